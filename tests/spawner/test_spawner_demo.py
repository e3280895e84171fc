"""GPUPoolSpawner in the demo: a real JupyterHub (a child process) with the gpupool service, on
each cluster of tests/clusters.py (the simulated one and the real v1.25 control plane, whose
kube-scheduler places the pods). The tests fill pools and taint nodes through the Kubernetes API,
the same calls on both. Servers are real single-user servers answering through the proxy.

Users: alice and bob are in ml-research, carol in ml-ops; others are in no group (the demo's
examples/pools/quotas.yaml: user-default limit of 4 GPUs, default order dev-pool, compute-pool).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from clusters import CLUSTERS, open_demo
from demo_hub import DemoHub, HubBrowser
from test_spawner_form import submitted
from waiting import WaitTimeout, async_wait_for

from jupyter_gpupool.hubclient import HubClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: The user whose starts give up after WRAP_START_TIMEOUT seconds (the wrap-around test).
WRAP_USER = "kim"
WRAP_START_TIMEOUT = 10
#: Short waits, so that the fallback test does not wait 30 s; one user's short start_timeout
#: (JupyterHub's pre_spawn_hook: the hub reads start_timeout after it).
EXTRA_CONFIG = f"""
c.GPUPoolSpawner.pool_schedule_timeout = 1
c.KubeSpawner.start_timeout = 60


def _short_start(spawner):
    if spawner.user.name == {WRAP_USER!r}:
        spawner.start_timeout = {WRAP_START_TIMEOUT}


c.Spawner.pre_spawn_hook = _short_start
"""
#: A taint the service does not judge (it leaves node.kubernetes.io/ taints to the node's
#: conditions) but the scheduler does.
INVISIBLE_TAINT = {"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}
#: What kube-scheduler v1.25 says (a FailedScheduling event, the PodScheduled condition) of a
#: 1-GPU server pod of POOL when N nodes carry INVISIBLE_TAINT, keyed by (POOL, N): its reasons
#: sorted as text; the two CPU nodes and the MIG node (no whole GPU) count as lacking GPUs, and
#: inference-pool's time-sliced node does not match a whole GPU's node affinity. The simulated
#: scheduler says the same.
REFUSED = {
    ("dev-pool", 1): "0/10 nodes are available: "
    "1 node(s) had untolerated taint {node.kubernetes.io/out-of-service: }, "
    "3 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/10 nodes are available: 10 Preemption is not helpful for scheduling.",
    ("dev-pool", 3): "0/10 nodes are available: 3 Insufficient nvidia.com/gpu, "
    "3 node(s) had untolerated taint {node.kubernetes.io/out-of-service: }, "
    "9 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/10 nodes are available: 10 Preemption is not helpful for scheduling.",
    ("inference-pool", 3): "0/10 nodes are available: 3 Insufficient nvidia.com/gpu, "
    "3 node(s) had untolerated taint {node.kubernetes.io/out-of-service: }, "
    "8 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/10 nodes are available: 10 Preemption is not helpful for scheduling.",
}


class Hub(DemoHub):
    """The demo hub, asked with the admin token (API) or as a logged-in browser (pages)."""

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


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=CLUSTERS)
async def hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Hub]:
    """The demo on the cluster of this param, for every test of the module."""
    kind = str(request.param)
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    state = tmp_path_factory.mktemp(f"gpupool-demo-{kind}")
    async with open_demo(kind, state, realk8s_kubeconfig=real, extra_config=EXTRA_CONFIG) as (
        cluster,
        demo,
    ):
        hub = Hub(cluster, demo)
        try:
            yield hub
        finally:
            hub.http.close()


def filler(node: str) -> dict[str, Any]:
    """A pod that is not a server and takes all 8 GPUs of ``node``: the scheduler binds it there
    (a nodeSelector on the hostname label), the kubelet runs its command."""
    return {
        "metadata": {"name": f"filler-{node}"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "command": ["sleep", "3600"],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
        },
    }


async def fill(hub: Hub, pool: str, nodes: list[str]) -> list[str]:
    """Take every GPU of ``nodes`` with pods that are not servers (the service counts them)."""
    names = []
    for node in nodes:
        pod = await hub.cluster.create_pod("default", filler(node))
        names.append(pod["metadata"]["name"])
    await wait_pool_free(hub, pool, 0)
    return names


async def unfill(hub: Hub, pool: str, names: list[str], free: int) -> None:
    for name in names:
        await hub.cluster.delete_pod("default", name, grace=0)
    for name in names:
        await hub.cluster.wait_gone("default", name)
    await wait_pool_free(hub, pool, free)


async def wait_pool_free(hub: Hub, pool: str, free: int, timeout: float = 10) -> None:
    rows: list[dict[str, Any]] = []

    async def has_free() -> bool:
        _, answer = await hub.api("GET", "/services/gpupool/api/v1/pools")
        rows.append(next(p for p in answer["pools"] if p["name"] == pool))
        return rows[-1]["whole_gpus"]["free"] == free  # GPUs, not parts of one

    try:
        await async_wait_for(
            has_free, what=f"{pool} to have {free} free whole GPUs", timeout=timeout, interval=0.1
        )
    except WaitTimeout as e:
        raise WaitTimeout(f"{e}; its last row: {rows[-1] if rows else None}") from None


async def taint(hub: Hub, nodes: list[str]) -> None:
    for node in nodes:
        await hub.cluster.add_taint(node, INVISIBLE_TAINT)


async def untaint(hub: Hub, nodes: list[str]) -> None:
    for node in nodes:
        await hub.cluster.remove_taint(node, INVISIBLE_TAINT["key"])


def gpus_of(pod: dict[str, Any]) -> str | None:
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits") or {}
    return limits.get("nvidia.com/gpu")


async def test_spawn_through_the_form(hub):
    browser = HubBrowser(hub)
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
            "queue": False,  # the form's "wait in line" box, left unticked
            "pool": "dev-pool",  # what JupyterHub's admin page shows with the server
        }
        assert server["state"]["gpupool"]["pool"] == "dev-pool"
        assert server["state"]["gpupool"]["node"] == "gpu-node-5"
        pod = await hub.pod("alice")
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


async def test_a_user_in_no_group_is_offered_a_pool_with_gpus_for_the_gpus_offered(hub):
    # the demo's order for no group is dev-pool, then compute-pool, which has no GPU: a first
    # visit offers 1 GPU (default_gpus) and ticks dev-pool only, which quota lets oscar use
    browser = HubBrowser(hub)
    await browser.login("oscar")
    page, _ = await browser.spawn_form()
    fields = submitted(page).fields
    ticked = {k: v for k, v in fields.items() if k.startswith("priority.") and v != [""]}
    assert ticked == {"priority.dev-pool": ["1"]}
    assert "priority.compute-pool" in fields and fields["gpus"] == ["1"]


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
        await async_wait_for(
            lambda: hub.pod("bob"), what="bob's pod to exist", timeout=10, interval=0.005
        )
        to_pod = time.monotonic() - started
        code, _ = await request
        assert code in (201, 202)
        assert to_pod < 1.5, f"{to_pod:.2f} s from the request to the pod"
        server = await hub.wait_ready("bob")
        assert server["user_options"]["pool"] == "inference-pool"
        pod = await hub.pod("bob")
        assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
        assert pod["spec"]["nodeName"] in ("gpu-node-3", "gpu-node-4") and gpus_of(pod) == "2"
    finally:
        await hub.stop("bob")
        await unfill(hub, "training-pool", fillers, 16)


async def scheduler_said(hub: Hub, pod: str) -> list[str]:
    """The messages of the FailedScheduling events the cluster holds for ``pod`` (every pod of
    that name so far), from the API."""
    events = await hub.cluster.events_for("default", pod)
    return [str(e.get("message")) for e in events if e.get("reason") == "FailedScheduling"]


async def test_falls_back_when_the_scheduler_refuses_what_the_service_admitted(hub):
    """dev-pool's node carries a taint the service does not judge: the scheduler refuses the
    pod there, and after pool_schedule_timeout the server starts in the next pool, the user
    reading the scheduler's own words."""
    await taint(hub, ["gpu-node-5"])
    refused = REFUSED["dev-pool", 1]
    client = hub.client()
    try:
        await hub.user("erin")
        started = time.monotonic()
        options = {"pools": ["dev-pool", "inference-pool"], "gpus": 1}
        events = [e async for e in client.start_and_follow("erin", "", options, timeout=60)]
        assert events[-1].get("ready"), events
        assert time.monotonic() - started >= 1  # it waited pool_schedule_timeout in dev-pool
        assert refused in await scheduler_said(hub, "jupyter-erin")
        messages = [e.get("message") for e in events]
        assert f'falling back from dev-pool to inference-pool because "{refused}"' in messages
        assert events[-1]["message"].endswith(f'; dev-pool could not schedule it ("{refused}")')
        server = await hub.wait_ready("erin")
        assert server["user_options"]["pool"] == "inference-pool"
        pod = await hub.pod("erin")
        assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "inference-pool"}
        labels = pod["metadata"]["labels"]
        assert labels["gpupool.jupyter.org/over-quota"] == "true"  # erin borrows (no group)
        assert labels["gpupool.jupyter.org/admission"] == server["state"]["gpupool"]["admission"]
        # dev-pool's admission was given back: nothing is held any more
        code, held = await hub.api("GET", "/services/gpupool/api/v1/admissions")
        assert code == 200 and held["admissions"] == [], held
    finally:
        await client.close()
        await untaint(hub, ["gpu-node-5"])
        await hub.stop("erin")


async def test_wraps_around_the_pools_until_start_timeout(hub):
    """Every whole-GPU node of both pools the user lists carries the taint: the spawner tries
    dev-pool, inference-pool, dev-pool again... until start_timeout, then fails saying what the
    scheduler said in each pool, and leaves no pod and no admission behind."""
    nodes = ["gpu-node-3", "gpu-node-4", "gpu-node-5"]
    refused = {pool: REFUSED[pool, 3] for pool in ("dev-pool", "inference-pool")}
    await taint(hub, nodes)
    client = hub.client()
    try:
        await hub.user(WRAP_USER)
        started = time.monotonic()
        options = {"pools": ["dev-pool", "inference-pool"], "gpus": 1}
        events = [e async for e in client.start_and_follow(WRAP_USER, "", options, timeout=60)]
        took = time.monotonic() - started
        failed = events[-1]
        assert failed.get("failed"), events
        within = f"within {WRAP_START_TIMEOUT} seconds"
        head = f"Spawn failed: No pool could schedule your server {within}. "
        assert failed["message"].startswith(head), failed
        tried = failed["message"][len(head) :].split("; ")
        # the pools in the user's order, wrapping around, each with the scheduler's words
        order = ["dev-pool", "inference-pool"]
        assert len(tried) >= 3, tried
        assert tried == [f"{order[i % 2]}: {refused[order[i % 2]]}" for i in range(len(tried))]
        wrapped = (
            f'falling back from inference-pool to dev-pool because "{refused["inference-pool"]}"'
        )
        assert wrapped in [e.get("message") for e in events]
        said = await scheduler_said(hub, f"jupyter-{WRAP_USER}")
        assert set(refused.values()) <= set(said), said
        # it gave up on its own just before JupyterHub's start_timeout would have
        assert WRAP_START_TIMEOUT - 1 <= took < WRAP_START_TIMEOUT + 5, took
        await hub.cluster.wait_gone("default", f"jupyter-{WRAP_USER}", 30)
        assert await hub.server(WRAP_USER) == {}
        code, held = await hub.api("GET", "/services/gpupool/api/v1/admissions")
        assert code == 200 and held["admissions"] == [], held
    finally:
        await client.close()
        await untaint(hub, nodes)
        await hub.stop(WRAP_USER)


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
        assert await hub.pod("frank") is None
    finally:
        await unfill(hub, "training-pool", fillers, 16)


async def test_quota_exceeded_is_said_on_the_form(hub):
    browser = HubBrowser(hub)
    await browser.login("dave")
    _, xsrf = await browser.spawn_form()
    fields = {"priority.training-pool": ["1"], "gpus": ["8"], "gpu_type": [""]}
    resp = await browser.submit(fields, xsrf)
    assert resp.code == 409
    assert (
        "No pool can take your server now. training-pool: you use 0 of your limit of 4 GPUs "
        "in this pool (you asked for 8)"
    ) in resp.body.decode()
    assert await hub.pod("dave") is None
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
        pod = await hub.pod("carol")
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
    assert await hub.pod("grace") is None
    assert await hub.server("grace") == {}


async def test_invalid_form_input_is_said_on_the_form(hub):
    browser = HubBrowser(hub)
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
    assert await hub.pod("heidi") is None
    # the form comes back as heidi left it: both pools chosen, in her order, and 2 GPUs
    fields = submitted(page).fields
    chosen = sorted((v[0], k) for k, v in fields.items() if k.startswith("priority.") and v[0])
    assert chosen == [("1", "priority.inference-pool"), ("2", "priority.dev-pool")]
    assert fields["gpus"] == ["2"]


async def test_a_refused_form_with_no_pool_names_the_default_order(hub):
    # judy is in no group: the demo's fallback order is dev-pool then compute-pool, where no
    # node has 8 GPUs
    browser = HubBrowser(hub)
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
        pod = await hub.pod("ivan")
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
