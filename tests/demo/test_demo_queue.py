"""Waiting in line in `gpupool demo` (issue 18), as the issue's demo scenario, on each cluster of
tests/clusters.py: a real JupyterHub with GPUPoolSpawner and the gpupool service, users driven
over the hub's REST API (and one through the spawn form, as a browser).

dev-pool is one node of 4 RTX4090-24G GPUs, open to everyone with a limit of 4 and no guarantee
(examples/pools/quotas.yaml): everyone there borrows as themselves, so the line is first come,
first served. The demo's own settings apply (start_timeout 900 s, the spawner's questions about
its place held by the service up to 20 s).
Truth from outside the spawner: the service's ``GET api/v1/queue``, the hub's server models,
and the cluster's pods through the Kubernetes API.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from clusters import CLUSTERS, Cluster, open_demo
from demo_hub import DemoHub, HubBrowser
from quiet import quiet_async
from waiting import WaitTimeout, async_wait_for

from jupyter_gpupool.demo.run import Demo

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEV = {"pools": ["dev-pool"]}


class Hub(DemoHub):
    """The demo hub, asked with the admin token, and what it runs on."""

    def __init__(self, cluster: Cluster, demo: Demo):
        super().__init__(cluster, demo)
        self.follow = self.client()  # the hub's REST client: starts followed, progress read

    async def line(self) -> list[tuple[str, int]]:
        """The service's line: (user, position), first in line first."""
        code, answer = await self.api("GET", "/services/gpupool/api/v1/queue")
        assert code == 200, answer
        return [(r["user"], r["position"]) for r in answer["queue"]]

    async def wait_line(self, expected: list[tuple[str, int]], timeout: float = 20) -> None:
        seen: list[list[tuple[str, int]]] = []

        async def matches() -> bool:
            seen.append(await self.line())
            return seen[-1] == expected

        try:
            await async_wait_for(
                matches, what=f"the service's line to be {expected}", timeout=timeout
            )
        except WaitTimeout as e:
            raise WaitTimeout(f"{e}; the line was {seen[-1] if seen else None}") from None

    async def queue_row(self, user: str) -> dict[str, Any]:
        _, answer = await self.api("GET", "/services/gpupool/api/v1/queue")
        return next(r for r in answer["queue"] if r["user"] == user)

    async def wait_ready(self, name: str, timeout: float = 60) -> dict[str, Any]:
        return await super().wait_ready(name, timeout, interval=0.1)

    async def stop(self, name: str, pod_timeout: float = 60) -> None:
        await super().stop(name, pod_timeout)


class Follow:
    """A start through the hub's REST API, its progress events collected as they come."""

    def __init__(self, hub: Hub, user: str, options: dict[str, Any]):
        self.events: list[dict[str, Any]] = []
        self.task = asyncio.ensure_future(self._run(hub, user, options))

    async def _run(self, hub: Hub, user: str, options: dict[str, Any]) -> None:
        async for event in hub.follow.start_and_follow(user, "", options, timeout=300):
            self.events.append(event)

    @property
    def messages(self) -> list[str]:
        return [str(e.get("message")) for e in self.events]

    async def says(self, message: str, timeout: float = 20) -> None:
        await async_wait_for(
            lambda: message in self.messages,
            what=f"the progress to say {message!r}",
            timeout=timeout,
        )


async def pods_made(hub: Hub, users: tuple[str, ...], since: float) -> dict[str, float]:
    """Seconds after ``since`` when alice's pod was gone and each user's pod was made, read
    from the cluster's API every 50 ms."""
    marks: dict[str, float] = {}
    while len(marks) < len(users) + 1:
        now = time.monotonic() - since
        if "alice" not in marks and await hub.pod("alice") is None:
            marks["alice"] = now
        for user in users:
            if user not in marks and await hub.pod(user) is not None:
                marks[user] = now
        await asyncio.sleep(0.05)
    return marks


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=CLUSTERS)
async def hub(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Hub]:
    kind = str(request.param)
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    state = tmp_path_factory.mktemp(f"gpupool-demo-queue-{kind}")
    async with open_demo(kind, state, realk8s_kubeconfig=real) as (cluster, demo):
        hub = Hub(cluster, demo)
        for user in ("alice", "bob", "carol", "dave", "erin"):
            await hub.api("POST", f"/hub/api/users/{user}", {})
        try:
            yield hub
        finally:
            await hub.follow.close()
            hub.http.close()


def gpus_of(pod: dict[str, Any]) -> str | None:
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits") or {}
    return limits.get("nvidia.com/gpu")


async def test_the_issue_scenario_bob_then_carol_wait_in_line_and_start_when_alice_stops(hub):
    code, _ = await hub.api("POST", "/hub/api/users/alice/server", {**DEV, "gpus": 4})
    assert code in (201, 202)
    await hub.wait_ready("alice")
    bob = Follow(hub, "bob", {**DEV, "gpus": 2, "queue": True})
    carol: Follow | None = None
    try:
        await hub.wait_line([("bob", 1)])
        await bob.says("waiting for 2 GPUs: position 1 in line for dev-pool · no estimate yet")
        carol = Follow(hub, "carol", {**DEV, "gpus": 1, "queue": True})
        await hub.wait_line([("bob", 1), ("carol", 2)])
        await carol.says("waiting for 1 GPU: position 2 in line for dev-pool · no estimate yet")
        assert (await hub.server("bob"))["pending"] == "spawn"
        assert await hub.pod("bob") is None and await hub.pod("carol") is None
        # dave does not ask to wait: today's fast refusal
        started = time.monotonic()
        code, body = await hub.api("POST", "/hub/api/users/dave/server", {**DEV, "gpus": 1})
        assert time.monotonic() - started < 2
        assert code == 409, body
        assert body["message"].startswith("No pool can take your server now. dev-pool: "), body
        assert await hub.line() == [("bob", 1), ("carol", 2)]  # dave is not in line
        assert await hub.server("dave") == {} and await hub.pod("dave") is None

        # The bound is on what gpupool does: from alice's pod gone (the cluster's word) to the
        # pods of bob and carol made (the line's pass, the spawner's next poll, its pod). The
        # rest of "ready" is the single-user server's own start and the hub's check of it,
        # which a loaded machine stretches (bob ready 10.6-10.9 s under load average 4-5,
        # 5.2 s quiet, where his pod was made 0.3 s after alice's was gone): printed, not bound.
        async with quiet_async():
            stopped = time.monotonic()
            made = asyncio.ensure_future(pods_made(hub, ("bob", "carol"), stopped))
            code, _ = await hub.api("DELETE", "/hub/api/users/alice/server")
            assert code in (202, 204)
            alice_stopped = time.monotonic() - stopped
            bob_server = await hub.wait_ready("bob", timeout=30)
            bob_ready = time.monotonic() - stopped
            carol_server = await hub.wait_ready("carol", timeout=30)
            carol_ready = time.monotonic() - stopped
            marks = await asyncio.wait_for(made, 10)
        print(
            f"alice stopped in {alice_stopped:.1f} s; from then: her pod gone "
            f"{marks['alice']:.2f} s, bob's pod {marks['bob']:.2f} s, ready {bob_ready:.1f} s; "
            f"carol's pod {marks['carol']:.2f} s, ready {carol_ready:.1f} s"
        )
        # Their questions are held by the service and answered at the pass that admits them
        # (issue 31): the pods come at once. Measured 0.00-0.07 s on the simulator (looked at
        # every 50 ms; 0.05 s on the real control plane), where 2 s polls took up to 2 s more;
        # 1 s leaves room for a loaded machine.
        assert marks["bob"] - marks["alice"] < 1, (
            f"bob's pod was made {marks['bob'] - marks['alice']:.2f} s after alice's pod was gone"
        )
        assert marks["carol"] - marks["alice"] < 1, (
            f"carol's pod was made {marks['carol'] - marks['alice']:.2f} s after alice's was gone"
        )
        assert await hub.line() == []
        for server, gpus in ((bob_server, 2), (carol_server, 1)):
            assert server["user_options"]["pool"] == "dev-pool"
            assert server["state"]["gpupool"]["gpus"] == gpus
        await hub.cluster.wait_gone("default", "jupyter-alice", 60)
        for user, gpus in (("bob", "2"), ("carol", "1")):
            pod = await hub.pod(user)
            assert pod is not None and pod["spec"]["nodeName"] == "gpu-node-5"
            assert pod["metadata"]["labels"]["runwhere.ai/pool"] == "dev-pool"
            assert gpus_of(pod) == gpus
        # what bob read: his place once (his questions held, or asked again unchanged), then
        # his turn
        await asyncio.wait_for(bob.task, 30)
        # (JupyterHub adds its own "Server launch is taking longer than expected" after 60 s of
        # a start, beside the place in line; a loaded CI run took that long to get here)
        messages = [m for m in bob.messages if "Server launch is taking longer" not in m]
        assert (
            messages.count("waiting for 2 GPUs: position 1 in line for dev-pool · no estimate yet")
            == 1
        )
        turn = (
            messages.index("waiting for 2 GPUs: position 1 in line for dev-pool · no estimate yet")
            + 1
        )
        assert re.fullmatch(r"your turn came after \d+ s in line", messages[turn]), messages
        assert messages[turn + 1].startswith("admitted to dev-pool over quota (2 RTX4090-24G GPUs)")
        assert bob.events[-1].get("ready"), bob.events[-1]
    finally:
        for follow in (bob, carol):
            if follow is not None and not follow.task.done():
                follow.task.cancel()
        for user in ("alice", "bob", "carol"):
            await hub.stop(user)


class Browser(HubBrowser):
    """A browser session on the hub, and its spawn form with "wait in line"."""

    async def spawn(self, fields: dict[str, list[str]]) -> Any:
        page, xsrf = await self.spawn_form()
        assert 'name="queue" value="on"' in page, page[-2000:]  # the "wait in line" box
        return await self.submit(fields, xsrf)


async def test_stopping_a_start_that_waits_in_line_takes_it_out_of_the_line(hub):
    """erin ticks "wait in line" on the spawn form while dev-pool is full, then stops the
    pending server (what the progress page's Stop button asks): her request leaves the line
    and the hub forgets the server; nothing starts when the GPUs come free."""
    code, _ = await hub.api("POST", "/hub/api/users/alice/server", {**DEV, "gpus": 4})
    assert code in (201, 202)
    await hub.wait_ready("alice")
    try:
        browser = Browser(hub)
        await browser.login("erin")
        fields = {"priority.dev-pool": ["1"], "gpus": ["1"], "gpu_type": [""]}
        resp = await browser.spawn({**fields, "queue": ["off", "on"]})
        assert resp.code == 302 and "/hub/spawn-pending/erin" in resp.headers["Location"]
        await hub.wait_line([("erin", 1)])
        row = await hub.queue_row("erin")
        # (with the wait estimate's words: the module's earlier servers may have made a history)
        assert row["message"] == (
            "waiting for 1 GPU: position 1 in line for dev-pool · " + row["estimate_words"]
        )
        # her progress page reads her place (after the hub's own "Server requested")
        stream = hub.follow.progress("erin", "")
        try:
            read = [await asyncio.wait_for(anext(stream), 20) for _ in range(2)]
        finally:
            await stream.aclose()
        assert [e["message"] for e in read] == ["Server requested", row["message"]]

        code, _ = await hub.api("DELETE", "/hub/api/users/erin/server")
        assert code in (202, 204)
        await hub.wait_line([], timeout=10)
        code, state = await hub.api("GET", f"/services/gpupool/api/v1/admissions/{row['id']}")
        assert (code, state["state"]) == (200, "cancelled"), state

        async def forgotten() -> bool:
            return not await hub.server("erin")

        await async_wait_for(forgotten, what="the hub to forget erin's server", timeout=30)
        await hub.stop("alice")
        # the GPUs are free and nobody is admitted for erin: nothing held, no pod
        code, held = await hub.api("GET", "/services/gpupool/api/v1/admissions")
        assert code == 200 and held["admissions"] == [], held
        assert await hub.pod("erin") is None
    finally:
        await hub.stop("erin")
        await hub.stop("alice")
