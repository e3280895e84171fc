"""Waiting in line (issue 18), the spawner's side: GPUPoolSpawner on the simulated cluster
against the real gpupool service, run in this process with the spawner tests' pools
(spawner_fakes.DOCUMENTS: dev-pool is one node of 4 RTX4090-24G GPUs, open to borrowing).

The truth is the service's own line (``GET api/v1/queue`` and ``GET api/v1/admissions/ID`` as an
admin asks them) and the cluster's pods; what the user reads is the spawner's progress and
errors. The spawner's question about its place is held by the service; most tests hold it at
most ``FAST_POLL`` s (``QUEUE_WAIT_SECONDS``) so that it is asked again often, those with ``asks``
with the spawner's own timing (issue 31: the turn comes at once); the demo test
(tests/demo/test_demo_queue.py) waits with the real ones too.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import tornado.httpclient
import tornado.httpserver
import tornado.netutil
import tornado.web
from service_kit import HubStub, Running, service_config
from spawner_fakes import DOCUMENTS, FakeUser, Group
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolClient
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.words.launch_options import Catalog, PoolChoice
from jupyter_gpupool.service import GPUPoolService
from jupyter_gpupool.service.web import admissionapi, waitapi
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.spawner import GPUPoolSpawner, placing
from jupyter_gpupool.spawner.errors import OptionsError, SpawnRefused
from jupyter_gpupool.spawner.messages import queue_timeout_message
from jupyter_gpupool.spawner.options import (
    SpawnOptions,
    default_options,
    form_to_user_options,
    parse_user_options,
)
from jupyter_gpupool.spawner.progress import ProgressLog, merge_progress

#: How long a question about the place is held at most, in these tests (and the pause between
#: asks after a failure).
FAST_POLL = 0.2
QUEUED_BOB = "waiting for 2 GPUs: position 1 in line for dev-pool · no estimate yet"


# --- the service, in this process -----------------------------------------------------------------


@pytest_asyncio.fixture
async def pool_service(sim_cluster: SimCluster, tmp_path: Path) -> AsyncIterator[Running]:
    """The gpupool service on the simulated cluster, with the spawner tests' pools."""
    hub = await HubStub().start()
    pools = tmp_path / "pools"
    pools.mkdir()
    (pools / "pools.yaml").write_text(DOCUMENTS)
    app = GPUPoolService(config=service_config(sim_cluster.kubeconfig, hub, pools))
    app.initialize([])
    await app.start_service()

    async def truth() -> UsageIndex:
        index = UsageIndex()
        index.reset(
            nodes=sim_cluster.store.list("nodes", None)[0],
            pods=sim_cluster.store.list("pods", None)[0],
        )
        return index

    running = Running(app, hub, sim_cluster, truth)
    yield running
    await running.stop()
    await hub.stop()


class Asks(list[str]):
    """The ids the spawners asked about, one entry per question; and the most questions that
    were in flight at once."""

    in_flight = 0
    most = 0


def count_asks(monkeypatch: pytest.MonkeyPatch) -> Asks:
    """The ids the spawners ask about, one entry per ask: an id alone (``GET
    api/v1/admissions/ID``), or the ids asked together (``POST api/v1/admissions/wait``),
    sorted and joined by commas."""
    asked = Asks()
    ask = placing.in_line
    together = GPUPoolClient.admissions_wait

    async def counted(link: Any, admission_id: str, wait: float = 0.0) -> dict[str, Any]:
        asked.append(admission_id)
        return await ask(link, admission_id, wait=wait)

    async def counted_together(
        client: GPUPoolClient, heard: dict[str, Any], wait: float = 0.0
    ) -> dict[str, Any]:
        asked.append(",".join(sorted(heard)))
        asked.in_flight += 1
        asked.most = max(asked.most, asked.in_flight)
        try:
            return await together(client, heard, wait=wait)
        finally:
            asked.in_flight -= 1

    monkeypatch.setattr(placing, "in_line", counted)
    monkeypatch.setattr(GPUPoolClient, "admissions_wait", counted_together)
    return asked


@pytest.fixture
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> Asks:
    """Questions held at most FAST_POLL s, asked again FAST_POLL s after a failure; the ids the
    spawner asked about, one entry per ask."""
    monkeypatch.setattr(placing, "QUEUE_WAIT_SECONDS", FAST_POLL)
    monkeypatch.setattr(placing, "QUEUE_POLL_SECONDS", FAST_POLL)
    monkeypatch.setattr(placing, "QUEUE_RETRY_SECONDS", FAST_POLL)
    return count_asks(monkeypatch)


@pytest.fixture
def asks(monkeypatch: pytest.MonkeyPatch) -> Asks:
    """The spawner's own timing (questions held 20 s); the ids it asked about, one per ask."""
    return count_asks(monkeypatch)


@pytest.fixture
def no_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A service older than ``POST api/v1/admissions/wait``: it answers that question 405 (as
    one would, where ``wait`` is taken for an admission's id)."""

    async def post(handler: waitapi.AdmissionsWaitHandler) -> None:
        raise tornado.web.HTTPError(405)

    monkeypatch.setattr(waitapi.AdmissionsWaitHandler, "post", post)


USERS = {
    "alice": FakeUser("alice", 7, [Group("ml-research")]),
    "bob": FakeUser("bob", 8, [Group("ml-research")]),
    "carol": FakeUser("carol", 9, [Group("ml-ops")]),
    "dave": FakeUser("dave", 10, []),
}

Make = Callable[..., GPUPoolSpawner]


@pytest.fixture
def user_spawner(pool_service: Running, make_spawner) -> Make:
    """``user_spawner(name, **config)``: a spawner of that user asking the real service."""
    token = pool_service.hub.admin()

    def make(name: str, **config: Any) -> GPUPoolSpawner:
        return make_spawner(
            user=USERS[name], service_url=pool_service.url, service_token=token, **config
        )

    return make


@pytest_asyncio.fixture
async def admin(pool_service: Running) -> GPUPoolClient:
    return pool_service.admin()


async def line(admin: GPUPoolClient) -> list[tuple[str, int | None]]:
    """The service's line: (user, position), first in line first."""
    return [(r["user"], r["position"]) for r in (await admin.queue())["queue"]]


async def wait_line(admin: GPUPoolClient, expected: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Wait until the service's line is ``expected``; its rows."""

    async def matches() -> list[dict[str, Any]] | None:
        rows = (await admin.queue())["queue"]
        got = [(r["user"], r["position"]) for r in rows]
        return rows if got == expected else None

    if not expected:
        await async_wait_for(
            lambda: _empty(admin), what="the service's line to be empty", timeout=10
        )
        return []
    return await async_wait_for(matches, what=f"the service's line to be {expected}", timeout=10)


async def _empty(admin: GPUPoolClient) -> bool:
    return await line(admin) == []


async def take_dev_pool(user_spawner: Make) -> GPUPoolSpawner:
    """alice's server with dev-pool's 4 GPUs."""
    alice = user_spawner("alice")
    alice.user_options = {"pools": ["dev-pool"], "gpus": 4}
    await alice.start()
    return alice


async def follow(spawner: GPUPoolSpawner) -> list[dict[str, Any]]:
    return [event async for event in spawner.progress()]


def pod_of(cluster: SimCluster, spawner: GPUPoolSpawner) -> dict[str, Any] | None:
    return cluster.pod("default", spawner.pod_name)


# --- waiting, then running -------------------------------------------------------------------------


async def cancel(*starts: asyncio.Future[Any]) -> None:
    """Cancel spawns' starts (as the hub does when a pending spawn is stopped) and wait for each
    to end."""
    for start in starts:
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await start


async def test_a_queued_start_shows_its_place_then_runs_when_gpus_come_free(
    user_spawner, admin, sim_cluster, fast_polls
):
    alice = await take_dev_pool(user_spawner)
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = bob.start()
    progress = asyncio.ensure_future(follow(bob))
    [row] = await wait_line(admin, [("bob", 1)])
    assert row["message"] == QUEUED_BOB and row["gpus"] == 2
    # the spawner keeps asking (which keeps it in line) and the page says its place once
    await async_wait_for(lambda: len(fast_polls) >= 5, what="five asks about bob's place")
    assert set(fast_polls) == {row["id"]}
    assert bob._progress.messages == [QUEUED_BOB]
    assert not start.done() and pod_of(sim_cluster, bob) is None

    await alice.stop()  # dev-pool's GPUs come free: bob's turn
    url = await asyncio.wait_for(start, 15)
    pod = pod_of(sim_cluster, bob)
    assert url == f"http://{pod['status']['podIP']}:8888"
    assert pod["spec"]["nodeName"] == "gpu-node-5"
    assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "dev-pool"}
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    # the admission from the line is the one the pod carries, as an immediate one would
    assert pod["metadata"]["labels"]["gpupool.jupyter.org/admission"] == row["id"]
    assert bob.get_state()["gpupool"]["pool"] == "dev-pool"
    assert bob.get_state()["gpupool"]["user_options"]["queue"] is True
    messages = [e["message"] for e in await asyncio.wait_for(progress, 10)]
    assert messages.count(QUEUED_BOB) == 1, messages
    turn = messages.index(QUEUED_BOB) + 1
    assert re.fullmatch(r"your turn came after \d+ s in line", messages[turn]), messages
    assert messages[turn + 1] == (
        "admitted to dev-pool over quota (2 RTX4090-24G GPUs): this server borrows idle GPUs "
        "and may be stopped (reclaimed) when their owners need them back"
    )
    assert "dev-pool, over quota: may be reclaimed \u00b7 scheduled on node gpu-node-5" in (
        " ".join(messages)
    )
    assert await line(admin) == []
    held = (await admin.request("GET", "api/v1/admissions")).json()["admissions"]
    assert held == []  # the pod exists: the service counts it, nothing is held for it


async def pod_made_after_alice_stops(
    alice: GPUPoolSpawner, bob: GPUPoolSpawner, cluster: SimCluster
) -> tuple[float, float]:
    """Stop alice's server; seconds from her pod gone to bob's pod made (the cluster's word,
    looked at every 10 ms), and from the stop asked to bob's pod made."""
    stopped = time.monotonic()
    stop = asyncio.ensure_future(alice.stop())
    gone = made = None
    while made is None:
        now = time.monotonic()
        if gone is None and pod_of(cluster, alice) is None:
            gone = now
        if pod_of(cluster, bob) is not None:
            made = now
        assert now - stopped < 15, "bob's pod was not made within 15 s of alice's stop"
        await asyncio.sleep(0.01)
    await stop
    return made - (gone if gone is not None else made), made - stopped


async def test_the_turn_comes_at_once_with_one_question_held(
    user_spawner, admin, sim_cluster, asks
):
    """The spawner's own timing: its question is held by the service, and answered when
    alice's GPUs come free, not at a next poll."""
    alice = await take_dev_pool(user_spawner)
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = asyncio.ensure_future(bob.start())
    await wait_line(admin, [("bob", 1)])
    await asyncio.sleep(3)
    assert len(asks) == 1  # one question, held: no polling meanwhile
    after_gone, after_stop = await pod_made_after_alice_stops(alice, bob, sim_cluster)
    await asyncio.wait_for(start, 15)
    print(
        f"bob's pod made {after_gone:.2f} s after alice's was gone, {after_stop:.2f} s after the stop"
    )
    assert after_gone < 1.0, f"bob's pod was made {after_gone:.2f} s after alice's was gone"
    assert after_stop < 2.0, f"bob's pod was made {after_stop:.2f} s after alice's stop"
    assert len(asks) == 1, asks


async def waiting_rows(admin: GPUPoolClient, n: int) -> list[dict[str, Any]]:
    """The service's line once ``n`` wait in it (in its fair order)."""

    async def rows() -> list[dict[str, Any]] | None:
        got = (await admin.queue())["queue"]
        return got if len(got) == n else None

    return await async_wait_for(rows, what=f"{n} in the service's line", timeout=10)


async def test_starts_waiting_at_once_share_one_held_question(
    user_spawner, admin, sim_cluster, asks
):
    """Three starts waiting in line in one hub process: one question held for all of them
    (asked again as each joins, then held), not one each; all start when alice's GPUs come
    free. dave and carol borrow as themselves; bob as ml-research."""
    alice = await take_dev_pool(user_spawner)
    waiting = {name: user_spawner(name) for name in ("bob", "carol", "dave")}
    for name, spawner in waiting.items():
        spawner.user_options = {"pools": ["dev-pool"], "gpus": 2 if name == "bob" else 1}
        spawner.user_options["queue"] = True
    starts = []
    for spawner in waiting.values():
        starts.append(asyncio.ensure_future(spawner.start()))
        await async_wait_for(
            lambda s=spawner: s._in_line is not None, what=f"{spawner.user.name} in line"
        )
    rows = await waiting_rows(admin, 3)
    ids = ",".join(sorted(r["id"] for r in rows))
    await async_wait_for(lambda: asks and asks[-1] == ids, what="one question for all three")
    # a new place alone is told once queue_place_interval (1 s) after the last: let it come
    await asyncio.sleep(1.2)
    held = len(asks)
    await asyncio.sleep(2)
    assert len(asks) == held, asks  # held: nobody asks meanwhile
    # asked again as each start joined or a place changed (bob's, as the others came in ahead
    # of him), never one question each at a time: one after another
    assert held <= 6 and asks.most == 1, asks
    await alice.stop()
    await asyncio.wait_for(asyncio.gather(*starts), 15)
    for spawner in waiting.values():
        assert pod_of(sim_cluster, spawner) is not None
    assert await line(admin) == []
    # the answer that admitted them ends the held question: no question after the last turn
    assert len(asks) <= held + 2, asks


async def test_a_start_cancelled_leaves_the_line_and_the_others_keep_their_shared_question(
    user_spawner, admin, sim_cluster, asks
):
    """Of three starts asking together, one is cancelled (JupyterHub stops it): it leaves the
    line at once; the other two move up, keep waiting with one question held for both, and
    start when the GPUs come."""
    alice = await take_dev_pool(user_spawner)
    dave, carol, bob = user_spawner("dave"), user_spawner("carol"), user_spawner("bob")
    for spawner, gpus in ((dave, 1), (carol, 1), (bob, 2)):
        spawner.user_options = {"pools": ["dev-pool"], "gpus": gpus, "queue": True}
    dave_start = asyncio.ensure_future(dave.start())
    await wait_line(admin, [("dave", 1)])
    others = [asyncio.ensure_future(carol.start())]
    await wait_line(admin, [("dave", 1), ("carol", 2)])
    others.append(asyncio.ensure_future(bob.start()))
    rows = await waiting_rows(admin, 3)
    dave_id = next(r["id"] for r in rows if r["user"] == "dave")
    await async_wait_for(lambda: asks and asks[-1].count(",") == 2, what="one question for three")
    await cancel(dave_start)
    assert [u for u, _ in await line(admin)] == [r["user"] for r in rows if r["id"] != dave_id]
    assert (await admin.admission(dave_id))["state"] == "cancelled"
    two = ",".join(sorted(r["id"] for r in rows if r["id"] != dave_id))
    await async_wait_for(lambda: asks[-1] == two, what="one question for the two left")
    held = len(asks)
    await asyncio.sleep(1.5)
    assert len(asks) == held and not any(o.done() for o in others), asks
    assert asks.most == 1
    for spawner, place in zip((carol, bob), await line(admin), strict=False):
        assert f"position {place[1]} in line" in spawner._progress.messages[-1]
    await alice.stop()
    await asyncio.wait_for(asyncio.gather(*others), 15)
    assert pod_of(sim_cluster, dave) is None
    assert pod_of(sim_cluster, carol) is not None and pod_of(sim_cluster, bob) is not None


async def test_a_held_question_cut_by_a_service_restart_is_asked_again_and_keeps_the_place(
    user_spawner, admin, sim_cluster, pool_service, asks, tmp_path
):
    """The service restarts (same address, same database) while bob's question is held: the
    spawner asks again, finds its place, and starts when alice's GPUs come free."""
    alice = await take_dev_pool(user_spawner)
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = asyncio.ensure_future(bob.start())
    [row] = await wait_line(admin, [("bob", 1)])
    old = pool_service.app
    await old.stop_service()
    app = GPUPoolService(
        config=service_config(
            sim_cluster.kubeconfig, pool_service.hub, tmp_path / "pools", port=old.port
        )
    )
    app.initialize([])
    await app.start_service()
    try:
        again = GPUPoolClient(pool_service.url, pool_service.hub.admin())
        try:
            rows = (await again.queue())["queue"]
            assert [(r["id"], r["position"]) for r in rows] == [(row["id"], 1)]
            await alice.stop()
            await asyncio.wait_for(start, 15)
            pod = pod_of(sim_cluster, bob)
            # admitted from the place it held before the restart, not a new one
            assert pod["metadata"]["labels"]["gpupool.jupyter.org/admission"] == row["id"]
            assert set(asks) == {row["id"]} and len(asks) >= 2
            said = [m for m in bob._progress.messages if "not answering" in m]
            assert len(said) == 1, bob._progress.messages
        finally:
            await again.close()
    finally:
        await app.stop_service()


async def test_a_service_that_answers_at_once_is_asked_once_a_second(
    user_spawner, admin, sim_cluster, asks, monkeypatch, no_batch
):
    """A service older than held questions ignores ``wait`` and answers at once: the spawner
    asks it once a second (the old polls, faster), not in a tight loop. (Older than the batch
    question too: the spawner asks its place alone, after one refused batch question.)"""
    monkeypatch.setattr(admissionapi, "MAX_WAIT", 0.0)  # wait=20 is held 0 s: an old service
    alice = await take_dev_pool(user_spawner)
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = asyncio.ensure_future(bob.start())
    await wait_line(admin, [("bob", 1)])
    await asyncio.sleep(0.5)
    before = len(asks)
    await asyncio.sleep(3)
    assert 2 <= len(asks) - before <= 4, asks
    assert asks[0] == asks[1]  # the refused batch question, then the single one
    assert bob._progress.messages == [QUEUED_BOB]  # the same place is not said again
    await alice.stop()
    await asyncio.wait_for(start, 15)
    assert pod_of(sim_cluster, bob) is not None


async def test_a_queued_start_gives_up_at_its_deadline_and_leaves_the_line(
    user_spawner, admin, sim_cluster, fast_polls
):
    await take_dev_pool(user_spawner)
    bob = user_spawner("bob", start_timeout=4)
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    started = time.monotonic()
    start = bob.start()
    [row] = await wait_line(admin, [("bob", 1)])
    with pytest.raises(SpawnRefused) as refused:
        await asyncio.wait_for(start, 10)
    took = time.monotonic() - started
    assert 3 <= took < 6, took  # a second before start_timeout, when JupyterHub would cancel it
    assert refused.value.status_code == 503
    message = refused.value.message
    head = re.match(
        r"No pool could take your server within 4 seconds: it waited (\d+) s in line for "
        r"dev-pool \(last at position 1\)\. ",
        message,
    )
    assert head, message
    assert message[head.end() :] == "dev-pool: no node has 2 free GPUs (largest free block: 0)"
    # it left the line: the service's truth
    assert await line(admin) == []
    assert (await admin.admission(row["id"]))["state"] == "cancelled"
    assert pod_of(sim_cluster, bob) is None


async def test_stopping_a_queued_start_leaves_the_line_and_those_behind_move_up(
    user_spawner, admin, sim_cluster, fast_polls
):
    # dave and carol borrow as themselves (no quota of a group of theirs uses dev-pool), so
    # the line is first come, first served
    await take_dev_pool(user_spawner)
    dave, carol = user_spawner("dave"), user_spawner("carol")
    dave.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    carol.user_options = {"pools": ["dev-pool"], "gpus": 1, "queue": True}
    dave_start = dave.start()
    await wait_line(admin, [("dave", 1)])
    carol_start = carol.start()
    dave_row, _ = await wait_line(admin, [("dave", 1), ("carol", 2)])
    # what JupyterHub does on DELETE .../server while the start is pending (apihandlers/users.py,
    # user.py): cancel the start, then stop the server, where Spawner.stop() is called only if
    # poll() says it runs; with no pod it does not, so the cancel alone must leave the line
    await cancel(dave_start)
    assert await line(admin) == [("carol", 1)]  # gone the moment the start was cancelled
    assert (await admin.admission(dave_row["id"]))["state"] == "cancelled"
    assert await dave.poll() is not None  # not running: JupyterHub won't call stop()
    assert pod_of(sim_cluster, dave) is None
    # carol's page: her new place, one line each
    moved = "waiting for 1 GPU: position 1 in line for dev-pool · no estimate yet"
    await async_wait_for(
        lambda: moved in carol._progress.messages, what="carol's progress to say position 1"
    )
    assert carol._progress.messages == [
        "waiting for 1 GPU: position 2 in line for dev-pool · no estimate yet",
        moved,
    ]
    await cancel(carol_start)
    await wait_line(admin, [])


async def test_the_place_is_the_services_fair_order_not_the_arrival(
    user_spawner, admin, sim_cluster, fast_polls
):
    # bob borrows as ml-research (its cluster-wide cap makes it the group's), whose alice holds
    # dev-pool's 4 GPUs; carol borrows as herself, who uses none: she goes first
    await take_dev_pool(user_spawner)
    bob, carol = user_spawner("bob"), user_spawner("carol")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    carol.user_options = {"pools": ["dev-pool"], "gpus": 1, "queue": True}
    starts = [bob.start()]
    await wait_line(admin, [("bob", 1)])
    starts.append(carol.start())
    await wait_line(admin, [("carol", 1), ("bob", 2)])
    # bob's page follows: he was first, then second
    await async_wait_for(
        lambda: len(bob._progress.messages) == 2, what="bob's progress to say his new place"
    )
    assert bob._progress.messages == [QUEUED_BOB, QUEUED_BOB.replace("position 1", "position 2")]
    await cancel(*starts)
    await wait_line(admin, [])


async def test_stop_alone_leaves_the_line_at_once_and_the_start_says_so(
    user_spawner, admin, sim_cluster, fast_polls
):
    await take_dev_pool(user_spawner)
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = bob.start()
    await wait_line(admin, [("bob", 1)])
    await bob.stop()  # a stop without the start being cancelled first (not JupyterHub's way)
    assert await line(admin) == []
    with pytest.raises(SpawnRefused) as refused:
        await asyncio.wait_for(start, 10)
    assert refused.value.status_code == 409
    assert refused.value.message == (
        "Your server stopped waiting in line for GPUs: cancelled. Start it again to wait anew."
    )


async def test_without_queue_the_refusal_stays_fast(user_spawner, admin, sim_cluster):
    await take_dev_pool(user_spawner)
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2}
    started = time.monotonic()
    with pytest.raises(SpawnRefused) as refused:
        await bob.start()
    assert time.monotonic() - started < 3
    assert refused.value.status_code == 409
    assert refused.value.message.startswith("No pool can take your server now. dev-pool: ")
    assert await line(admin) == []


async def test_a_cpu_only_start_with_queue_starts_at_once(user_spawner, admin, sim_cluster):
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["compute-pool"], "gpus": 0, "queue": True}
    await asyncio.wait_for(bob.start(), 15)
    assert pod_of(sim_cluster, bob)["spec"]["nodeName"] in ("cpu-node-1", "cpu-node-2")
    assert not any("line" in m for m in bob._progress.messages)


# --- the service failing while a start waits --------------------------------------------------


class FlakyProxy:
    """Passes requests on to the service, except those ``failing(method, path)`` picks, which
    get ``answer``: 503 (the service's own way of saying it cannot answer) unless told. A GET
    (which changes nothing) is picked when it comes or when its answer does: a question the
    service held open is failed on its way back."""

    def __init__(self, target: str):
        self.target = target.rstrip("/")  # the service's origin: paths are passed on as they are
        self.failing: Callable[[str, str], bool] = lambda method, path: False
        self.failed = 0
        self.answer = 503
        self.url = ""
        self._server: tornado.httpserver.HTTPServer | None = None
        self._http = tornado.httpclient.AsyncHTTPClient(force_instance=True)

    async def start(self) -> FlakyProxy:
        proxy = self

        class Pass(tornado.web.RequestHandler):
            SUPPORTED_METHODS = ("GET", "POST", "DELETE")

            def check_xsrf_cookie(self) -> None:
                pass

            async def _pass(self) -> None:
                method, path = self.request.method or "GET", self.request.uri or "/"
                if proxy.failing(method, path):
                    proxy.failed += 1
                    raise tornado.web.HTTPError(proxy.answer)
                resp = await proxy._http.fetch(
                    proxy.target + path,
                    method=method,
                    body=self.request.body if method == "POST" else None,
                    headers={"Authorization": self.request.headers.get("Authorization", "")},
                    raise_error=False,
                    allow_nonstandard_methods=True,
                    request_timeout=60,  # longer than a held question
                )
                if method == "GET" and proxy.failing(method, path):
                    proxy.failed += 1
                    raise tornado.web.HTTPError(proxy.answer)
                self.set_status(resp.code)
                self.set_header("Content-Type", resp.headers.get("Content-Type", "text/plain"))
                self.finish(resp.body or b"")

            get = post = delete = _pass

        app = tornado.web.Application([(r"/.*", Pass)])
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self._server = tornado.httpserver.HTTPServer(app)
        self._server.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/services/gpupool/"
        return self

    async def stop(self) -> None:
        self._http.close()
        if self._server is not None:
            self._server.stop()
            await self._server.close_all_connections()


@pytest_asyncio.fixture
async def flaky(pool_service: Running) -> AsyncIterator[FlakyProxy]:
    proxy = await FlakyProxy(pool_service.url.removesuffix("/services/gpupool/")).start()
    yield proxy
    await proxy.stop()


def asks_in_line(method: str, path: str) -> bool:
    """``GET api/v1/admissions/ID`` or ``POST api/v1/admissions/wait``: where a queued request
    stands."""
    return "/api/v1/admissions/" in path and (method == "GET" or path.endswith("/wait"))


async def test_one_failed_ask_is_asked_again_and_the_start_goes_on(
    make_spawner, pool_service, user_spawner, admin, flaky, sim_cluster, fast_polls
):
    alice = await take_dev_pool(user_spawner)
    bob = make_spawner(
        user=USERS["bob"], service_url=flaky.url, service_token=pool_service.hub.admin()
    )
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = bob.start()
    await wait_line(admin, [("bob", 1)])
    # one ask fails, the next ones are answered
    flaky.failing = lambda method, path: asks_in_line(method, path) and flaky.failed == 0
    await async_wait_for(lambda: flaky.failed == 1, what="one failed ask")
    await alice.stop()
    await asyncio.wait_for(start, 15)
    assert pod_of(sim_cluster, bob)["spec"]["nodeSelector"] == {"runwhere.ai/pool": "dev-pool"}
    said = [m for m in bob._progress.messages if "not answering" in m]
    assert said == [
        "in line, position 1 \u00b7 the GPU pool service is not answering (Service "
        "Unavailable); still waiting in line"
    ], bob._progress.messages


async def test_a_place_the_service_no_longer_knows_is_asked_for_again(
    make_spawner, pool_service, user_spawner, admin, flaky, sim_cluster, asks, no_batch
):
    # the service forgets bob's request (as a restart without its database would): the answer
    # to his held question is a 404, and the start asks to be admitted again, which puts it in
    # line anew
    await take_dev_pool(user_spawner)
    bob = make_spawner(
        user=USERS["bob"], service_url=flaky.url, service_token=pool_service.hub.admin()
    )
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = bob.start()
    [first] = await wait_line(admin, [("bob", 1)])
    flaky.answer = 404
    # Only the one-place question (GET api/v1/admissions/ID) gets the 404: the start's first
    # question may still be the many-places POST, whose 404 says "a service without it" (as
    # the service's own 405 here does), not "no such place".
    flaky.failing = lambda method, path: (
        method == "GET" and asks_in_line(method, path) and flaky.failed == 0
    )
    await admin.release(first["id"])  # gone from the service's line
    await async_wait_for(lambda: flaky.failed == 1, what="the 404")
    [again] = await wait_line(admin, [("bob", 1)])
    assert again["id"] != first["id"]
    await async_wait_for(
        lambda: bob._progress.messages[-1] == QUEUED_BOB, what="bob's place shown again"
    )
    assert bob._progress.messages == [
        QUEUED_BOB,
        "the GPU pool service lost this server's place in line; asking again",
        QUEUED_BOB,
    ]
    await cancel(start)
    await wait_line(admin, [])


async def test_a_place_lost_among_places_asked_together_is_that_starts_alone(
    user_spawner, admin, sim_cluster, pool_service, asks
):
    """Two starts asking together; the service forgets one entry (as a restart without its
    database would): that start is told its place is lost and asks to be admitted again; the
    other keeps its place and its wait."""
    await take_dev_pool(user_spawner)
    carol, dave = user_spawner("carol"), user_spawner("dave")
    for spawner in (carol, dave):
        spawner.user_options = {"pools": ["dev-pool"], "gpus": 1, "queue": True}
    starts = [asyncio.ensure_future(carol.start())]
    await waiting_rows(admin, 1)
    starts.append(asyncio.ensure_future(dave.start()))
    rows = await waiting_rows(admin, 2)
    await async_wait_for(lambda: asks and "," in asks[-1], what="one question for both")
    by_user = {r["user"]: r for r in rows}
    line_ = pool_service.app.ctx.desk.line
    del line_.waiting[by_user["dave"]["id"]]  # forgotten
    line_.moved()
    lost = "the GPU pool service lost this server's place in line; asking again"
    await async_wait_for(lambda: lost in dave._progress.messages, what="dave told")
    again = await waiting_rows(admin, 2)
    assert {r["user"]: r["id"] for r in again}["carol"] == by_user["carol"]["id"]
    assert {r["user"]: r["id"] for r in again}["dave"] != by_user["dave"]["id"]
    assert lost not in carol._progress.messages and not starts[0].done()
    await cancel(*starts)
    await wait_line(admin, [])


async def test_a_service_failing_for_long_ends_the_wait_as_a_service_down_does(
    make_spawner, pool_service, user_spawner, admin, flaky, sim_cluster, fast_polls, monkeypatch
):
    monkeypatch.setattr(placing, "QUEUE_OUTAGE_SECONDS", 1.0)
    await take_dev_pool(user_spawner)
    bob = make_spawner(
        user=USERS["bob"], service_url=flaky.url, service_token=pool_service.hub.admin()
    )
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": True}
    start = bob.start()
    await wait_line(admin, [("bob", 1)])
    flaky.failing = asks_in_line
    with pytest.raises(SpawnRefused) as refused:
        await asyncio.wait_for(start, 10)
    assert refused.value.status_code == 503
    assert refused.value.message.startswith(
        "The GPU pool service is not answering (Service Unavailable)"
    )
    assert flaky.failed >= 2  # asked again before giving up
    assert await line(admin) == []  # it still left the line (that request got through)
    assert pod_of(sim_cluster, bob) is None


# --- the option, the form and queue_by_default -------------------------------------------------


class Inputs(HTMLParser):
    """Every ``input`` of a page: (name, type, value, checked)."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[tuple[str, str, str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "input" and a.get("name"):
            self.inputs.append(
                (str(a["name"]), str(a.get("type") or "text"), a.get("value") or "", "checked" in a)
            )

    def named(self, name: str) -> list[tuple[str, str, str, bool]]:
        return [i for i in self.inputs if i[0] == name]


def queue_inputs(page: str) -> list[tuple[str, str, str, bool]]:
    parser = Inputs()
    parser.feed(page)
    return parser.named("queue")


async def test_the_form_offers_waiting_in_line_ticked_by_queue_by_default(user_spawner):
    plain = user_spawner("bob")
    page = await plain.get_options_form()
    assert "Wait in line if no pool can take it now" in page
    assert queue_inputs(page) == [
        ("queue", "hidden", "off", False),
        ("queue", "checkbox", "on", False),
    ]
    patient = user_spawner("carol", queue_by_default=True)
    assert queue_inputs(await patient.get_options_form())[1] == ("queue", "checkbox", "on", True)
    # what a browser sends: the hidden "off", then "on" when ticked
    form = {"priority.dev-pool": ["1"], "gpus": ["1"], "gpu_type": [""]}
    ticked = await plain.run_options_from_form({**form, "queue": ["off", "on"]})
    assert ticked == {"pools": ["dev-pool"], "gpus": 1, "gpu_type": None, "queue": True}
    unticked = await patient.run_options_from_form({**form, "queue": ["off"]})
    assert unticked["queue"] is False  # the user's choice wins over queue_by_default
    # a form of the admin's own without the field: queue_by_default decides
    assert (await patient.run_options_from_form(form))["queue"] is True
    assert (await plain.run_options_from_form(form))["queue"] is False
    # the next visit starts from the last choice
    plain.user_options = ticked
    assert queue_inputs(await plain.get_options_form())[1][3] is True
    patient.user_options = unticked
    assert queue_inputs(await patient.get_options_form())[1][3] is False


async def test_queue_by_default_makes_a_rest_start_without_queue_wait(
    user_spawner, admin, sim_cluster, fast_polls
):
    await take_dev_pool(user_spawner)
    bob = user_spawner("bob", queue_by_default=True)
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2}
    start = bob.start()
    await wait_line(admin, [("bob", 1)])
    await bob.stop()
    with pytest.raises(SpawnRefused):
        await asyncio.wait_for(start, 10)
    await wait_line(admin, [])


@pytest.mark.parametrize("value", ["yes", "true", 1, 0])
async def test_a_queue_that_is_not_true_or_false_is_refused_before_anything_is_asked(
    user_spawner, admin, sim_cluster, value
):
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 2, "queue": value}
    with pytest.raises(OptionsError) as refused:
        await bob.start()
    assert refused.value.status_code == 400
    shown = repr(value) if isinstance(value, str) else repr(str(value))
    assert refused.value.message == (
        "queue must be true (wait in line when no pool can take the server now) or false, "
        f"not {shown}"
    )
    assert await line(admin) == [] and pod_of(sim_cluster, bob) is None
    # nor from the form
    with pytest.raises(OptionsError) as refused:
        await bob.run_options_from_form({"priority.dev-pool": ["1"], "queue": ["maybe"]})
    assert refused.value.message.endswith("or false, not 'maybe'")


# --- the rules, pure ---------------------------------------------------------------------------

DEV = PoolChoice(
    name="dev-pool", gpu_types=("RTX4090-24G",), gpu_total=4, largest_node_gpus=4, max_gpus=4
)
CATALOG = Catalog(pools=(DEV,), default_pools=("dev-pool",), max_gpus=8)


def test_queue_in_user_options_and_from_the_form():
    parse = lambda raw, **kw: parse_user_options(raw, CATALOG, **kw)  # noqa: E731
    assert parse({"gpus": 2}).queue is False
    assert parse({"gpus": 2}, default_queue=True).queue is True
    assert parse({"gpus": 2, "queue": False}, default_queue=True).queue is False
    got = parse({"pools": ["dev-pool"], "gpus": 2, "queue": True})
    assert got == SpawnOptions(("dev-pool",), 2, None, True)
    assert got.to_user_options() == {
        "pools": ["dev-pool"],
        "gpus": 2,
        "gpu_type": None,
        "queue": True,
    }
    assert parse(got.to_user_options()) == got
    assert got.describe() == "2 GPUs in dev-pool, waiting in line if need be"
    assert form_to_user_options({"queue": ["off", "on"]})["queue"] is True
    assert form_to_user_options({"queue": ["off"]})["queue"] is False
    assert "queue" not in form_to_user_options({})
    assert form_to_user_options({"queue": ["maybe"]})["queue"] == "maybe"  # the check says why
    assert "queue" not in form_to_user_options({"queue": ["maybe"]}, strict=False)
    # the form's starting state: the last choice, else queue_by_default
    assert default_options(None, CATALOG, default_queue=True).queue is True
    assert default_options({"gpus": 1}, CATALOG, default_queue=True).queue is True
    assert default_options({"gpus": 1, "queue": False}, CATALOG, default_queue=True).queue is False


def test_the_give_up_message_says_how_long_where_and_why():
    row = {
        "position": 2,
        "pools": ["training-pool", "inference-pool"],
        "reasons": "training-pool: no node has 4 free GPUs\ninference-pool: quota used up",
    }
    assert queue_timeout_message(3600, 3598.6, row) == (
        "No pool could take your server within 3600 seconds: it waited 3599 s in line for "
        "training-pool, inference-pool (last at position 2). training-pool: no node has 4 free "
        "GPUs; inference-pool: quota used up"
    )


async def test_steps_told_before_a_pod_event_arrives_come_before_it():
    # while the merge waits for the pod's next event, the start tells its turn and admission,
    # then the pod's first event arrives (carrying that decision): the page reads them in order
    log = ProgressLog()
    log.add("waiting for 2 GPUs: position 1 in line for dev-pool")
    turn = asyncio.Event()

    async def kubespawner_events() -> AsyncIterator[dict[str, Any]]:
        await turn.wait()
        log.add("your turn came after 4 s in line")
        log.add("admitted to dev-pool over quota (2 RTX4090-24G GPUs)")
        yield {"message": "Successfully assigned default/jupyter-bob to gpu-node-5"}

    got = []
    async for event in merge_progress(log, kubespawner_events(), turn.is_set, poll=5):
        got.append(event["message"])
        turn.set()  # the merge goes back to waiting for the pod's event; then the turn comes
    assert got == [
        "waiting for 2 GPUs: position 1 in line for dev-pool",
        "your turn came after 4 s in line",
        "admitted to dev-pool over quota (2 RTX4090-24G GPUs)",
        "Successfully assigned default/jupyter-bob to gpu-node-5",
    ]
