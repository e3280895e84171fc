"""A question about a place in line held open (``GET api/v1/admissions/ID?wait=S``, issue 31):
the service answers it when the entry's turn comes or its place changes, else after ``S``
seconds, so a waiting spawner learns its turn when it comes instead of at its next poll.

The truth is what the API answers (the held answer against a fresh ``GET`` of the same entry,
the line as ``GET api/v1/queue`` lists it) and the simulated cluster's pods, deleted or added by
the test; times are the test's own clock around those steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from service_kit import T0, delete_pod, start_pod
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolClient, GPUPoolError

HEARTBEAT = 60.0


async def dev_pool_full(service) -> None:
    """dev-pool's 4 GPUs taken by running servers: alice's 2 and dave's 2."""
    admin = service.admin()
    for user, groups in (("alice", ["students"]), ("dave", [])):
        a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=2)
        await start_pod(service.cluster, a, f"{user}-nb")


async def in_line(admin, user: str, gpus: int = 2, groups=("students",)) -> dict[str, Any]:
    return await admin.admit(
        user=user, groups=list(groups), pools=["dev-pool"], gpus=gpus, queue=True
    )


async def waiting(admin) -> list[str]:
    """Who waits in line, in order (the queue's list: not asking for anyone's place)."""
    return [r["user"] for r in (await admin.queue())["queue"]]


class Held:
    """One held question, answered in the background; when the answer came."""

    def __init__(self, client: GPUPoolClient, admission_id: str, wait: float):
        self.answered_at: float | None = None
        self.task = asyncio.ensure_future(self._ask(client, admission_id, wait))

    async def _ask(self, client: GPUPoolClient, admission_id: str, wait: float) -> dict[str, Any]:
        try:
            return await client.admission(admission_id, wait=wait)
        finally:
            self.answered_at = time.monotonic()

    async def answer(self, timeout: float = 10) -> dict[str, Any]:
        return await asyncio.wait_for(self.task, timeout)


async def test_a_held_question_is_answered_when_the_turn_comes(start_service):
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    bob = await in_line(admin, "bob")
    held = Held(admin, bob["id"], wait=20)
    await asyncio.sleep(0.5)
    assert not held.task.done()  # nothing changed: still held
    freed = time.monotonic()
    await delete_pod(service.cluster, "alice-nb")  # 2 GPUs free: bob's turn
    got = await held.answer()
    assert held.answered_at is not None
    took = held.answered_at - freed
    assert took < 1.0, f"answered {took:.2f} s after alice's pod was deleted"
    assert got["state"] == "admitted" and (got["pool"], got["gpus"]) == ("dev-pool", 2)
    # the same answer a question not held gets now
    assert got == await admin.admission(bob["id"])


async def test_a_held_question_is_answered_when_the_place_changes_else_after_its_wait(
    start_service,
):
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    bob, carol = await in_line(admin, "bob"), await in_line(admin, "carol", gpus=1)
    assert (await admin.admission(carol["id"]))["position"] == 2
    held = Held(admin, carol["id"], wait=20)
    await asyncio.sleep(0.5)
    assert not held.task.done()
    left = time.monotonic()
    await admin.release(bob["id"])  # bob leaves the line: carol moves up
    got = await held.answer()
    assert held.answered_at is not None and held.answered_at - left < 1.0
    assert (got["state"], got["position"]) == ("queued", 1), got
    # nothing changes now: answered after its wait, as a question not held would be
    asked = time.monotonic()
    got = await admin.admission(carol["id"], wait=1)
    assert 0.9 <= time.monotonic() - asked < 3
    assert got == await admin.admission(carol["id"])
    assert (got["state"], got["position"]) == ("queued", 1)


async def test_a_held_question_keeps_the_place_and_one_given_up_does_not(start_service, now):
    service = await start_service(queue_heartbeat=HEARTBEAT)
    admin = service.admin()
    await dev_pool_full(service)
    bob = await in_line(admin, "bob")
    line = service.ctx.desk.line
    spawner = service.admin()  # bob's spawner: its own connection
    held = Held(spawner, bob["id"], wait=30)
    await asyncio.sleep(0.3)
    # longer than the heartbeat with the question held: bob keeps his place
    now[0] = T0 + HEARTBEAT + 10
    line.kick()
    await asyncio.sleep(0.3)
    assert await waiting(admin) == ["bob"]
    assert not held.task.done()
    # the spawner goes away mid-question (its start cancelled): the service stops holding it,
    # and a heartbeat later the place is gone
    held.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await held.task
    await spawner.close()
    await asyncio.sleep(0.3)
    now[0] += HEARTBEAT + 1
    line.kick()
    await async_wait_for(
        lambda: _empty(admin), what="bob's entry dropped once nobody asks", timeout=5
    )
    assert (await admin.admission(bob["id"]))["state"] == "expired"


async def _empty(admin) -> bool:
    return await waiting(admin) == []


async def test_a_hundred_held_questions_are_all_answered_when_their_turn_comes(start_service):
    """JupyterHub's ``concurrent_spawn_limit`` (100) spawns waiting in line at once, each with a
    question held open; GPUs for all of them come at once (13 nodes of 8 GPUs join dev-pool).
    The users are in no group: each borrows as themselves (a group's limit would keep most in
    line)."""
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    users = [f"user{i:03d}" for i in range(100)]
    entries = await asyncio.gather(*(in_line(admin, u, gpus=1, groups=()) for u in users))
    assert {e["state"] for e in entries} == {"queued"}
    spawners = service.client(service.hub.admin(), max_clients=len(users))
    asks = [0] * len(users)
    turns: list[float] = [0.0] * len(users)

    async def wait_turn(i: int, admission_id: str) -> dict[str, Any]:
        """A waiting spawner: held questions, asked again after each new place."""
        while True:
            asks[i] += 1
            got = await spawners.admission(admission_id, wait=30)
            if got["state"] != "queued":
                turns[i] = time.monotonic()
                return got

    waits = [asyncio.ensure_future(wait_turn(i, e["id"])) for i, e in enumerate(entries)]
    await asyncio.sleep(1.0)
    assert not any(w.done() for w in waits) and asks == [1] * len(users)  # all held
    room = time.monotonic()
    for i in range(13):
        service.cluster.add_node(
            {
                "name": f"dev-extra-{i}",
                "labels": {"runwhere.ai/pool": "dev-pool"},
                "gpu": {"count": 8, "type": "RTX4090-24G", "product": "NVIDIA-GeForce-RTX-4090"},
            }
        )
    answers = await asyncio.wait_for(asyncio.gather(*waits), 20)
    after = sorted(t - room for t in turns)
    print(
        f"100 held questions: turns {after[0]:.2f}-{after[-1]:.2f} s after the nodes came "
        f"(p50 {after[49]:.2f} s), {sum(asks)} questions"
    )
    assert [a["state"] for a in answers] == ["admitted"] * 100
    assert sorted(a["user"] for a in answers) == users
    assert after[-1] < 5.0, f"the last answer came {after[-1]:.2f} s after the GPUs"
    held_now = (await admin.request("GET", "api/v1/admissions")).json()["admissions"]
    assert sorted(h["user"] for h in held_now) == users  # what the answers said is held


async def test_a_held_question_cut_by_a_restart_is_asked_again_and_finds_its_place(
    start_service, tmp_path
):
    db_url = f"sqlite:///{tmp_path / 'line.sqlite'}"
    service = await start_service(db_url=db_url, queue_heartbeat=HEARTBEAT)
    await dev_pool_full(service)
    bob = await in_line(service.admin(), "bob")
    spawner = GPUPoolClient(service.url, service.hub.admin())
    try:
        held = Held(spawner, bob["id"], wait=30)
        await asyncio.sleep(0.3)
        stopped = time.monotonic()
        await service.stop()
        try:
            await held.answer()
            raise AssertionError("a held question outlived its service")
        except GPUPoolError as e:
            assert e.status == 0, e  # no answer: the spawner asks again
        assert held.answered_at is not None and held.answered_at - stopped < 5
    finally:
        await spawner.close()
    await delete_pod(service.cluster, "alice-nb")  # 2 GPUs free while the service is away

    service = await start_service(db_url=db_url, queue_heartbeat=HEARTBEAT)
    await service.settled()
    again = service.admin()
    asked = time.monotonic()
    # the entry taken up waits for its spawner: the held question itself confirms it
    got = await again.admission(bob["id"], wait=20)
    assert time.monotonic() - asked < 2
    assert got["state"] == "admitted" and got["id"] == bob["id"], got
    assert [a["user"] for a in await again.admissions()] == ["bob"]


async def test_a_wait_that_is_not_a_number_of_seconds_is_refused(start_service):
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    bob = await in_line(admin, "bob")
    for wait in ("soon", "-1", "nan"):
        try:
            await admin.request("GET", f"api/v1/admissions/{bob['id']}", params={"wait": wait})
            raise AssertionError(f"wait={wait} was taken")
        except GPUPoolError as e:
            assert (e.status, e.message) == (400, f"wait must be a number of seconds, not {wait!r}")
    # an admission the service does not know is answered at once, held or not
    asked = time.monotonic()
    try:
        await admin.admission("0123456789abcdef", wait=20)
        raise AssertionError("an unknown admission was answered")
    except GPUPoolError as e:
        assert e.status == 404
    assert time.monotonic() - asked < 1


# --- many places asked at once: POST api/v1/admissions/wait --------------------------------------


def heard(row: dict[str, Any]) -> dict[str, Any]:
    return {"state": row["state"], "position": row["position"]}


class Asked:
    """How many questions about places in line the service saw (held or not)."""

    def __init__(self, monkeypatch):
        from jupyter_gpupool.service.web import admissionapi, waitapi

        self.batch = self.single = 0
        post, get = waitapi.AdmissionsWaitHandler.post, admissionapi.AdmissionHandler.get

        async def counted_post(handler):
            self.batch += 1
            return await post(handler)

        async def counted_get(handler, admission_id):
            self.single += 1
            return await get(handler, admission_id)

        monkeypatch.setattr(waitapi.AdmissionsWaitHandler, "post", counted_post)
        monkeypatch.setattr(admissionapi.AdmissionHandler, "get", counted_get)


async def test_one_question_holds_a_hundred_places_and_answers_each_turn(
    start_service, monkeypatch
):
    """A hundred waiting entries held by ONE question (one request, one connection); GPUs for
    all of them come at once: one answer with all of them admitted, promptly."""
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    users = [f"user{i:03d}" for i in range(100)]
    entries = await asyncio.gather(*(in_line(admin, u, gpus=1, groups=()) for u in users))
    asked = Asked(monkeypatch)
    hub = service.client(service.hub.admin())  # the hub process: one client, one question
    question = asyncio.ensure_future(
        hub.admissions_wait({e["id"]: heard(e) for e in entries}, wait=30)
    )
    await asyncio.sleep(1.0)
    assert not question.done() and (asked.batch, asked.single) == (1, 0)  # held
    room = time.monotonic()
    for i in range(13):
        service.cluster.add_node(
            {
                "name": f"dev-extra-{i}",
                "labels": {"runwhere.ai/pool": "dev-pool"},
                "gpu": {"count": 8, "type": "RTX4090-24G", "product": "NVIDIA-GeForce-RTX-4090"},
            }
        )
    got = await asyncio.wait_for(question, 20)
    took = time.monotonic() - room
    print(f"one question for 100 places: answered {took:.2f} s after the nodes came")
    # one pass admits them all; a pass that admits only some answers those (asked again below)
    admitted = {i for i, row in got.items() if row["state"] == "admitted"}
    rounds = 1
    while len(admitted) < len(entries):
        rest = {e["id"]: heard(e) for e in entries if e["id"] not in admitted}
        more = await asyncio.wait_for(hub.admissions_wait(rest, wait=30), 20)
        admitted |= {i for i, row in more.items() if row["state"] == "admitted"}
        rounds += 1
    took = time.monotonic() - room
    assert took < 5.0, f"the last turn came {took:.2f} s after the GPUs ({rounds} questions)"
    assert asked.single == 0 and asked.batch == rounds
    row = got[next(iter(admitted & set(got)))]
    assert row == await admin.admission(row["id"])  # the same answer the single question gets


async def test_many_places_answered_at_once_when_one_changed_since_it_was_heard(start_service):
    """The key rule: what the asker last heard is in the question, so a change that came
    between two questions is answered at once; nothing changed, the answer comes after the
    wait with every entry (the heartbeat); ids not known are ``unknown``."""
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    bob, carol = await in_line(admin, "bob"), await in_line(admin, "carol", gpus=1)
    was = {bob["id"]: heard(bob), carol["id"]: heard(carol)}
    await admin.release(bob["id"])  # between two questions: carol moves up, bob left
    asked = time.monotonic()
    got = await admin.admissions_wait(was, wait=20)
    assert time.monotonic() - asked < 1.0
    assert got[bob["id"]]["state"] == "cancelled"
    assert (got[carol["id"]]["state"], got[carol["id"]]["position"]) == ("queued", 1)
    # nothing new since: held for its wait, then every entry
    now_heard = {carol["id"]: heard(got[carol["id"]])}
    asked = time.monotonic()
    again = await admin.admissions_wait(now_heard, wait=1)
    assert 0.9 <= time.monotonic() - asked < 3
    assert again == {carol["id"]: await admin.admission(carol["id"])}
    # heard nothing yet (null): answered at once; an unknown id too
    got = await admin.admissions_wait({carol["id"]: None, "no-such": None}, wait=20)
    assert got["no-such"] == {"id": "no-such", "state": "unknown", "queued": False}
    assert got[carol["id"]]["position"] == 1


async def test_many_places_only_ones_own_unless_admin(start_service):
    """A user may list only their own entries: listing another's makes the question a 403
    (as ``GET api/v1/admissions/ID`` of it is); the spawner's admin token may list any."""
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    bob, carol = await in_line(admin, "bob"), await in_line(admin, "carol", gpus=1)
    as_bob = service.user("bob")
    got = await as_bob.admissions_wait({bob["id"]: None}, wait=0)
    assert got[bob["id"]]["user"] == "bob"
    try:
        await as_bob.admissions_wait({bob["id"]: None, carol["id"]: None}, wait=0)
    except GPUPoolError as e:
        assert e.status == 403 and carol["id"] in e.message
    else:
        raise AssertionError("bob was told of carol's place")
    # refused before anything is held: bob's question does not keep carol's place for her
    asked = time.monotonic()
    with contextlib.suppress(GPUPoolError):
        await as_bob.admissions_wait({carol["id"]: heard(carol)}, wait=5)
    assert time.monotonic() - asked < 1.0
    assert service.ctx.desk.line.held == {}


async def test_many_places_let_go_when_the_asker_goes_away(start_service):
    """The hub process's question cut (its task cancelled, its connection closed): the
    service holds it no longer, and its entries count as asked for no more."""
    service = await start_service()
    admin = service.admin()
    await dev_pool_full(service)
    bob, carol = await in_line(admin, "bob"), await in_line(admin, "carol", gpus=1)
    hub = service.admin()
    question = asyncio.ensure_future(
        hub.admissions_wait({bob["id"]: heard(bob), carol["id"]: heard(carol)}, wait=30)
    )
    line = service.ctx.desk.line
    await async_wait_for(lambda: len(line.held) == 2, what="both places held", timeout=5)
    question.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await question
    await hub.close()
    await async_wait_for(lambda: line.held == {}, what="the question let go", timeout=5)


async def test_many_places_bodies_are_checked(start_service):
    service = await start_service()
    admin = service.admin()
    for body, words in (
        ({"ids": {}}, "ids must be a non-empty object"),
        ({"ids": {"a": None}, "wait": "soon"}, "wait must be a number"),
        ({"ids": {"a": {"state": "queued", "position": "2"}}}, "position must be a whole"),
        ({"ids": {f"x{i}": None for i in range(1001)}}, "at most 1000"),
        ({"ids": {"a": None}, "wiat": 1}, "wiat"),
    ):
        try:
            await admin.request("POST", "api/v1/admissions/wait", json_body=body)
        except GPUPoolError as e:
            assert e.status == 400 and words in e.message, (body, e.message)
        else:
            raise AssertionError(f"{body} was taken")


async def test_a_new_place_alone_is_told_at_most_once_per_interval_a_turn_at_once(start_service):
    """``queue_place_interval``: two moves up the line within the interval are one answer, with
    the latest place, no sooner than the interval after the entry's place was last told; the
    turn that comes within the interval is answered at once. Times are the test's clock around
    the API's answers."""
    every = 1.5
    service = await start_service(queue_place_interval=every)
    admin = service.admin()
    await dev_pool_full(service)
    bob, carol = await in_line(admin, "bob"), await in_line(admin, "carol")
    erin = await in_line(admin, "erin", gpus=1)
    hub = service.client(service.hub.admin())
    first = await hub.admissions_wait({erin["id"]: None}, wait=20)  # heard nothing: at once
    told = time.monotonic()
    assert first[erin["id"]]["position"] == 3
    question = asyncio.ensure_future(hub.admissions_wait({erin["id"]: heard(erin)}, wait=20))
    await asyncio.sleep(0.1)
    await admin.release(bob["id"])  # erin moves up to 2 ...
    await asyncio.sleep(0.2)
    assert not question.done()  # ... not told yet: her place was told under 1.5 s ago
    await admin.release(carol["id"])  # ... and up to 1
    got = await asyncio.wait_for(question, 10)
    answered = time.monotonic()
    assert every - 0.1 <= answered - told < every + 1.5, f"told after {answered - told:.2f} s"
    assert (got[erin["id"]]["state"], got[erin["id"]]["position"]) == ("queued", 1)
    # her turn comes within the interval of that answer: told at once
    question = asyncio.ensure_future(
        hub.admissions_wait({erin["id"]: heard(got[erin["id"]])}, wait=20)
    )
    await asyncio.sleep(0.1)
    freed = time.monotonic()
    await delete_pod(service.cluster, "alice-nb")
    got = await asyncio.wait_for(question, 10)
    assert time.monotonic() - freed < 1.0, f"the turn told {time.monotonic() - freed:.2f} s late"
    assert got[erin["id"]]["state"] == "admitted"
    assert got[erin["id"]] == await admin.admission(erin["id"])
