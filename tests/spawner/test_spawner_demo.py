"""GPUPoolSpawner in the demo: a real JupyterHub (a child process) with the gpupool service, on
the simulated cluster, which runs in this test process so the tests can fill pools and taint
nodes. Servers are real single-user servers answering through the proxy.

Users: alice and bob are in ml-research, carol in ml-ops; others are in no group (the demo's
examples/pools/quotas.yaml: user-default limit of 4 GPUs, default order dev-pool, compute-pool).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import pytest
import pytest_asyncio
import tornado.httpclient
from test_spawner_form import submitted
from waiting import WaitTimeout, async_wait_for

from jupyter_gpupool.demo.run import Demo, DemoOptions, free_port
from jupyter_gpupool.hubclient import HubClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: Short waits, so that the fallback test does not wait 30 s.
EXTRA_CONFIG = """
c.GPUPoolSpawner.pool_schedule_timeout = 1
c.KubeSpawner.start_timeout = 60
"""
#: A taint the service does not judge (it leaves node.kubernetes.io/ taints to the node's
#: conditions) but the scheduler does.
INVISIBLE_TAINT = {"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}


class Hub:
    """The demo hub, asked with the admin token (API) or as a logged-in browser (pages)."""

    def __init__(self, demo: Demo):
        self.demo = demo
        self.url = demo.url
        self.http = tornado.httpclient.AsyncHTTPClient(force_instance=True)

    @property
    def cluster(self) -> Any:
        return self.demo.cluster

    async def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        resp = await self.http.fetch(
            self.url + path,
            method=method,
            body=None if body is None else json.dumps(body),
            headers={"Authorization": f"token {self.demo.admin_token}"},
            allow_nonstandard_methods=True,
            raise_error=False,
            request_timeout=60,
        )
        text = resp.body or b""
        return resp.code, json.loads(text) if text.strip().startswith(b"{") else text

    async def user(self, name: str) -> dict[str, Any]:
        code, model = await self.api("GET", f"/hub/api/users/{name}")
        if code == 404:
            await self.api("POST", f"/hub/api/users/{name}", {})
            code, model = await self.api("GET", f"/hub/api/users/{name}")
        assert code == 200, model
        return model

    async def server(self, name: str) -> dict[str, Any]:
        return (await self.user(name))["servers"].get("", {})

    async def wait_ready(self, name: str, timeout: float = 60) -> dict[str, Any]:
        async def ready() -> dict[str, Any] | None:
            server = await self.server(name)
            if not server:
                raise AssertionError(f"{name}'s server is gone (its start failed)")
            return server if server.get("ready") else None

        return await async_wait_for(
            ready, what=f"{name}'s server to be ready", timeout=timeout, interval=0.2
        )

    async def stop(self, name: str) -> None:
        await self.api("DELETE", f"/hub/api/users/{name}/server")
        pod = f"jupyter-{name}"
        await self.cluster.wait_for(lambda: self.cluster.pod("default", pod) is None, 30)

        async def gone() -> bool:
            return not await self.server(name)

        await async_wait_for(
            gone, what=f"the hub to forget {name}'s server", timeout=30, interval=0.1
        )

    async def answers(self, name: str, timeout: float = 10) -> bool:
        """That the user's own server answers through the proxy (its route may lag a bit)."""

        async def started() -> bool:
            code, status = await self.api("GET", f"/user/{name}/api/status")
            return code == 200 and "started" in status

        return await async_wait_for(
            started,
            what=f"{name}'s server to answer /api/status through the proxy",
            timeout=timeout,
            interval=0.2,
        )

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.cluster.pod("default", f"jupyter-{name}")


class Browser:
    """A browser session: cookies, the login form, the spawn form."""

    def __init__(self, hub: Hub):
        self.hub = hub
        self.cookies: dict[str, str] = {}

    async def request(self, method: str, path: str, form: dict[str, Any] | None = None) -> Any:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        resp = await self.hub.http.fetch(
            self.hub.url + path,
            method=method,
            body=None if form is None else urlencode(form, doseq=True),
            headers=headers,
            follow_redirects=False,
            raise_error=False,
            request_timeout=60,
        )
        for header in resp.headers.get_list("Set-Cookie"):
            for key, morsel in SimpleCookie(header).items():
                self.cookies[key] = morsel.value
        return resp

    async def login(self, name: str) -> None:
        page = (await self.request("GET", "/hub/login")).body.decode()
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
        resp = await self.request(
            "POST", "/hub/login", {"username": name, "password": "any", "_xsrf": xsrf}
        )
        assert resp.code == 302, resp.body

    async def spawn_form(self) -> tuple[str, str]:
        """The spawn page and its form's xsrf token."""
        resp = await self.request("GET", "/hub/spawn")
        assert resp.code == 200, resp.code
        page = resp.body.decode()
        return page, re.search(r"_xsrf=([^\"&]+)", page).group(1)

    async def submit(self, fields: dict[str, list[str]], xsrf: str) -> Any:
        return await self.request("POST", f"/hub/spawn?_xsrf={xsrf}", {**fields, "_xsrf": xsrf})


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hub(tmp_path_factory) -> AsyncIterator[Hub]:
    state = tmp_path_factory.mktemp("gpupool-demo")
    extra = state / "extra_config.py"
    extra.write_text(EXTRA_CONFIG)
    demo = Demo(DemoOptions(port=free_port(), state_dir=state, extra_config=extra))
    try:
        await demo.start()
    except BaseException:
        await demo.stop()
        raise
    hub = Hub(demo)
    yield hub
    hub.http.close()
    await demo.stop()


async def fill(hub: Hub, pool: str, nodes: list[str]) -> list[str]:
    """Take every GPU of ``nodes`` with pods that are not servers (the service counts them)."""
    names = []
    for node in nodes:
        name = f"filler-{node}"
        hub.cluster.store.create(
            "pods",
            "default",
            {
                "metadata": {"name": name},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "command": ["sleep", "3600"],  # the kubelet runs it
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        }
                    ],
                },
            },
        )
        names.append(name)
    await wait_pool_free(hub, pool, 0)
    return names


async def unfill(hub: Hub, pool: str, names: list[str], free: int) -> None:
    for name in names:
        hub.cluster.store.delete("pods", "default", name, grace_period=0)
    await wait_pool_free(hub, pool, free)


async def wait_pool_free(hub: Hub, pool: str, free: int, timeout: float = 10) -> None:
    rows: list[dict[str, Any]] = []

    async def has_free() -> bool:
        _, answer = await hub.api("GET", "/services/gpupool/api/v1/pools")
        rows.append(next(p for p in answer["pools"] if p["name"] == pool))
        return rows[-1]["gpu_free"] == free

    try:
        await async_wait_for(
            has_free, what=f"{pool} to have {free} free GPUs", timeout=timeout, interval=0.1
        )
    except WaitTimeout as e:
        raise WaitTimeout(f"{e}; its last row: {rows[-1] if rows else None}") from None


def taint(hub: Hub, node: str, taints: list[dict[str, str]]) -> None:
    hub.cluster.store.patch(
        "nodes", None, node, {"spec": {"taints": taints}}, "application/merge-patch+json"
    )


def gpus_of(pod: dict[str, Any]) -> str | None:
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits") or {}
    return limits.get("nvidia.com/gpu")


async def test_spawn_through_the_form(hub):
    browser = Browser(hub)
    await browser.login("alice")
    page, xsrf = await browser.spawn_form()
    fields = submitted(page).fields
    fields.pop("profile", None)
    # alice is in ml-research: its default order, then the other pools she may use
    assert {k: v for k, v in fields.items() if k.startswith("priority.")} == {
        "priority.training-pool": ["1"],
        "priority.inference-pool": ["2"],
        "priority.dev-pool": ["3"],
        "priority.compute-pool": [""],
        "priority.default": [""],
    }
    assert "Large model training (high-end GPUs)" in page and "0 / 0" in page  # compute-pool
    fields.update({"priority.dev-pool": ["1"], "priority.training-pool": ["2"]})
    fields.update({"priority.inference-pool": [""], "gpus": ["1"]})
    resp = await browser.submit(fields, xsrf)
    assert resp.code == 302 and "/hub/spawn-pending/alice" in resp.headers["Location"]
    try:
        server = await hub.wait_ready("alice")
        assert server["user_options"] == {
            "pools": ["dev-pool", "training-pool"],
            "gpus": 1,
            "gpu_type": None,
            "pool": "dev-pool",  # what JupyterHub's admin page shows with the server
        }
        assert server["state"]["gpupool"]["pool"] == "dev-pool"
        assert server["state"]["gpupool"]["node"] == "gpu-node-5"
        pod = hub.pod("alice")
        assert pod["metadata"]["labels"]["runwhere.ai/pool"] == "dev-pool"
        assert pod["metadata"]["labels"]["runwhere.ai/job-type"] == "notebook"  # for gpuctl
        assert gpus_of(pod) == "1"
        assert await hub.answers("alice")
    finally:
        await hub.stop("alice")
    # the next visit to the form starts from this choice
    fields = submitted((await browser.spawn_form())[0]).fields
    assert (fields["priority.dev-pool"], fields["priority.training-pool"]) == (["1"], ["2"])
    assert fields["priority.inference-pool"] == [""] and fields["gpus"] == ["1"]


async def test_spawn_through_the_rest_api_when_the_first_pool_is_full(hub):
    fillers = await fill(hub, "training-pool", ["gpu-node-1", "gpu-node-2"])
    try:
        await hub.user("bob")
        started = time.monotonic()
        request = asyncio.ensure_future(
            hub.api(
                "POST",
                "/hub/api/users/bob/server",
                {"user_options": {"pools": ["training-pool", "inference-pool"], "gpus": 2}},
            )
        )
        await hub.cluster.wait_for(lambda: hub.pod("bob"), 10, interval=0.005)
        to_pod = time.monotonic() - started
        code, _ = await request
        assert code in (201, 202)
        assert to_pod < 1.5, f"{to_pod:.2f} s from the request to the pod"
        server = await hub.wait_ready("bob")
        assert server["user_options"]["pool"] == "inference-pool"
        pod = hub.pod("bob")
        assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
        assert pod["spec"]["nodeName"] in ("gpu-node-3", "gpu-node-4") and gpus_of(pod) == "2"
    finally:
        await hub.stop("bob")
        await unfill(hub, "training-pool", fillers, 16)


async def test_falls_back_when_the_scheduler_refuses_what_the_service_admitted(hub):
    taint(hub, "gpu-node-5", [INVISIBLE_TAINT])
    try:
        await hub.user("erin")
        started = time.monotonic()
        code, _ = await hub.api(
            "POST",
            "/hub/api/users/erin/server",
            {"user_options": {"pools": ["dev-pool", "inference-pool"], "gpus": 1}},
        )
        assert code in (201, 202)
        server = await hub.wait_ready("erin")
        assert time.monotonic() - started >= 1  # it waited pool_schedule_timeout in dev-pool
        assert server["user_options"]["pool"] == "inference-pool"
        pod = hub.pod("erin")
        assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
        labels = pod["metadata"]["labels"]
        assert labels["gpupool.jupyter.org/over-quota"] == "true"  # erin borrows (no group)
        assert labels["gpupool.jupyter.org/admission"] == server["state"]["gpupool"]["admission"]
        # dev-pool's admission was given back: nothing is held any more
        code, held = await hub.api("GET", "/services/gpupool/api/v1/admissions")
        assert held["admissions"] == []
    finally:
        taint(hub, "gpu-node-5", [])
        await hub.stop("erin")


async def test_all_pools_full_is_a_clear_error_within_two_seconds(hub):
    fillers = await fill(hub, "training-pool", ["gpu-node-1", "gpu-node-2"])
    try:
        await hub.user("frank")
        started = time.monotonic()
        code, body = await hub.api(
            "POST",
            "/hub/api/users/frank/server",
            {"user_options": {"pools": ["training-pool"], "gpus": 4}},
        )
        assert time.monotonic() - started < 2
        assert code == 409
        assert body["message"] == (
            "No pool can take your server now. "
            "training-pool: no node has 4 free GPUs (largest free block: 0)"
        )
        assert hub.pod("frank") is None
    finally:
        await unfill(hub, "training-pool", fillers, 16)


async def test_quota_exceeded_is_said_on_the_form(hub):
    browser = Browser(hub)
    await browser.login("dave")
    _, xsrf = await browser.spawn_form()
    fields = {"priority.training-pool": ["1"], "gpus": ["8"], "gpu_type": [""]}
    resp = await browser.submit(fields, xsrf)
    assert resp.code == 409
    assert (
        "No pool can take your server now. training-pool: you use 0 of your limit of 4 GPUs "
        "in this pool (you asked for 8)"
    ) in resp.body.decode()
    assert hub.pod("dave") is None
    # the form under the message is the one dave sent
    fields = submitted(resp.body.decode()).fields
    assert fields["priority.training-pool"] == ["1"] and fields["gpus"] == ["8"]
    assert {v[0] for k, v in fields.items() if k.startswith("priority.")} == {"1", ""}


async def test_a_cpu_only_server_in_compute_pool(hub):
    await hub.user("carol")
    code, _ = await hub.api(
        "POST",
        "/hub/api/users/carol/server",
        {"user_options": {"pools": ["compute-pool"], "gpus": 0}},
    )
    assert code in (201, 202)
    try:
        server = await hub.wait_ready("carol")
        assert server["user_options"]["pool"] == "compute-pool"
        pod = hub.pod("carol")
        assert pod["spec"]["nodeName"] in ("cpu-node-1", "cpu-node-2")
        assert gpus_of(pod) is None
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["NVIDIA_VISIBLE_DEVICES"] == "none"
        assert await hub.answers("carol")
    finally:
        await hub.stop("carol")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pools": ["nope"], "gpus": 1}, "there is no pool named 'nope'; pools you may use: "),
        ({"pools": ["dev-pool"], "gpus": "two"}, "gpus must be a whole number of GPUs, not 'two'"),
        ({"pools": ["dev-pool"], "gpus": 9}, "no pool you chose allows a server with 9 GPUs"),
        ({"pools": ["x" * 100]}, "pools[0] is longer than 63 characters"),
        ({"pools": ["dev-pool"] * 9}, "at most 8 pools may be listed; you listed 9"),
    ],
)
async def test_invalid_options_are_a_400_from_the_rest_api(hub, options, message):
    await hub.user("grace")
    code, body = await hub.api("POST", "/hub/api/users/grace/server", {"user_options": options})
    assert code == 400 and body["message"].startswith(message), body
    assert hub.pod("grace") is None
    assert await hub.server("grace") == {}


async def test_invalid_form_input_is_said_on_the_form(hub):
    browser = Browser(hub)
    await browser.login("heidi")
    _, xsrf = await browser.spawn_form()
    sent = {
        "priority.inference-pool": ["1"],
        "priority.dev-pool": ["first"],
        "priority.compute-pool": [""],
        "gpus": ["2"],
    }
    resp = await browser.submit(sent, xsrf)
    assert resp.code == 400
    page = resp.body.decode()
    assert "the priority of dev-pool must be a whole number from 1" in page
    assert hub.pod("heidi") is None
    # the form comes back as heidi left it: both pools chosen, in her order, and 2 GPUs
    fields = submitted(page).fields
    chosen = sorted((v[0], k) for k, v in fields.items() if k.startswith("priority.") and v[0])
    assert chosen == [("1", "priority.inference-pool"), ("2", "priority.dev-pool")]
    assert fields["gpus"] == ["2"]


async def test_a_refused_form_with_no_pool_names_the_default_order(hub):
    # judy is in no group: the demo's fallback order is dev-pool then compute-pool, where no
    # node has 8 GPUs
    browser = Browser(hub)
    await browser.login("judy")
    _, xsrf = await browser.spawn_form()
    resp = await browser.submit({"priority.dev-pool": [""], "gpus": ["8"]}, xsrf)
    assert resp.code == 400
    page = resp.body.decode()
    assert "no pool you chose allows a server with 8 GPUs" in page
    fields = submitted(page).fields
    assert all(v == [""] for k, v in fields.items() if k.startswith("priority."))
    assert fields["gpus"] == ["8"]
    note = re.search(r'<p class="form-text gpupool-default-note"[^>]*>([^<]*)</p>', page)
    assert note and "hidden" not in note.group(0)
    assert note.group(1) == (
        "No pool is chosen, so the default order for your groups will be used: "
        "dev-pool, then compute-pool."
    )


async def test_the_progress_stream_shows_the_pool_decision_until_ready(hub):
    # what the spawn page reads: the hub's progress stream, followed from the start request
    fillers = await fill(hub, "training-pool", ["gpu-node-1", "gpu-node-2"])
    client = HubClient(hub.url + "/hub/api", hub.demo.admin_token)
    try:
        await hub.user("ivan")
        options = {"pools": ["training-pool", "dev-pool"], "gpus": 1}
        events = [e async for e in client.start_and_follow("ivan", "", options, timeout=60)]
        pod = hub.pod("ivan")
        assert pod is not None, events
        ready = events[-1]
        assert ready.get("ready"), events
        before = events[-2]  # the page's message just before it moves into the server
        assert before["html_message"].startswith(
            '<span class="gpupool-decision-again">Admitted to dev-pool over quota '
            "(1 RTX4090-24G GPU): this server borrows idle GPUs and may be stopped (reclaimed) "
            "when their owners need them back; skipped training-pool because no node has"
        ), events
        assert before["message"].startswith("dev-pool, over quota: may be reclaimed \u00b7 ")
        node = pod["spec"]["nodeName"]
        assert ready["message"].startswith(
            f"Server ready at /user/ivan/ in dev-pool over quota (1 RTX4090-24G GPU on node "
            f"{node}): it borrows idle GPUs and may be stopped (reclaimed) when their owners "
            "need them back; skipped training-pool because no node has"
        ), ready
        assert "<br>skipped training-pool because" in ready["html_message"]
    finally:
        await client.close()
        await hub.stop("ivan")
        await unfill(hub, "training-pool", fillers, 16)
