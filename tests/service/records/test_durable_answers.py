"""Nothing promised leaves in an answer before it is durable (issue 27), on SQLite and on a real
PostgreSQL server: a 201's reservation and a 202's place are in the database when they are
answered; a write the database does not take, or takes too long for, drops the reservation or the
place and answers 503; the reservations come back at start, less those whose pods exist.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from typing import Any

import pytest
from service_kit import start_pod
from sqlrows import sql
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.db.store import DatabaseError

FAST = {"history_interval": 0.2}


def hold_back_queue_commits(db: Any) -> Future[None]:
    """From now on, entries are written as ever but their commits are reported only when the
    test completes the returned future (a database slow to commit, as seen by the desk)."""
    commit: Future[None] = Future()
    real_add = db.queue_add

    def held_back(*args: Any, **kw: Any) -> Future[None]:
        real_add(*args, **kw)
        return commit

    db.queue_add = held_back
    return commit


async def full_dev_pool(admin: Any) -> None:
    """dev-pool's 4 GPUs held: alice's 2 (students' guarantee) and dave's 2 (borrowed)."""
    await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)


async def test_answers_come_once_committed_and_reservations_come_back_at_start(
    db_url, start_service
):
    """A 201's reservation (every field) and a 202's entry are in the database when they are
    answered, with the writer's batch far longer than the test; after a restart the
    reservation holds its GPUs again, and the one whose pod was made meanwhile is dropped."""
    service = await start_service(db_url=db_url, **FAST)
    service.ctx.records.db.batch_seconds = 60  # plain writes would wait a minute
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    b = await admin.admit(user="bob", groups=["students"], pools=["dev-pool"], gpus=1)
    rows = sql(
        db_url,
        'SELECT admission_id, pool, node, gpus, "user", charged, over_quota FROM reservations '
        "ORDER BY gpus",
    )
    assert [r[0] for r in rows] == [b["id"], a["id"]]
    assert rows[1][1:] == ("dev-pool", a["node"], 2, "alice", a["charged"], a["over_quota"])
    c = await admin.admit(user="carol", groups=[], pools=["dev-pool"], gpus=4, queue=True)
    assert c["queued"]
    assert sql(db_url, "SELECT id, state FROM queue_entries") == [(c["id"], "queued")]
    await service.stop()
    await start_pod(service.cluster, b, "bob-nb", bound=True)  # while the service is down
    again = await start_service(db_url=db_url, **FAST)
    held = {r["id"]: r for r in await again.admin().admissions()}
    assert set(held) == {a["id"]}, "alice's reservation is back; bob's pod is seen"
    assert held[a["id"]]["gpus"] == 2 and held[a["id"]]["node"] == a["node"]
    line = (await again.admin().queue())["queue"]
    assert [r["id"] for r in line] == [c["id"]]
    # alice's 2 GPUs are still held: dev-pool (4 GPUs) has 1 left after bob's pod
    with pytest.raises(GPUPoolError) as refused:
        await again.admin().admit(user="erin", groups=[], pools=["dev-pool"], gpus=2)
    assert refused.value.status == 409


@pytest.mark.parametrize("how", ["fails", "late"])
async def test_an_admission_the_database_does_not_take_is_dropped_and_answered_503(
    how, db_url, start_service
):
    """The reservation's (or the entry's) write fails, or does not commit within
    durable_timeout: the answer is a 503 saying to try again, and nothing is held or in line."""
    service = await start_service(db_url=db_url, durable_timeout=0.5, **FAST)
    db, admin = service.ctx.records.db, service.admin()

    def broken(*args: Any, **kw: Any) -> Future[None]:
        future: Future[None] = Future()
        if how == "fails":
            future.set_exception(DatabaseError("the database did not take the write: disk full"))
        return future

    db.reservation_add = broken
    started = time.monotonic()
    with pytest.raises(GPUPoolError) as unrecorded:
        await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    assert unrecorded.value.status == 503
    assert "could not be recorded" in unrecorded.value.message
    assert "try again" in unrecorded.value.message
    if how == "late":
        assert time.monotonic() - started >= 0.5
        assert "within 0.5 s" in unrecorded.value.message
    assert await admin.admissions() == []
    assert service.ctx.state.reservations.pool_nodes("dev-pool") == {}

    del db.reservation_add  # reservations are written again; entries are not
    desk = service.ctx.desk
    desk.durable_timeout = 10  # real commits now: a loaded CI machine took over 0.5 s for one
    await full_dev_pool(admin)
    desk.durable_timeout = 0.5
    db.queue_add = broken
    with pytest.raises(GPUPoolError) as unrecorded:
        await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=1, queue=True)
    assert unrecorded.value.status == 503
    assert (await admin.queue())["queue"] == []


async def test_a_place_is_shown_in_the_line_only_once_it_is_kept(db_url, start_service):
    """While a queued request's entry is not committed, no listing shows it (its spawner has
    no id to cancel it by yet, and a crash would forget it); once it is, its 202 and the line
    show the same place."""

    service = await start_service(db_url=db_url, **FAST)
    db, admin = service.ctx.records.db, service.admin()
    await full_dev_pool(admin)
    commit = hold_back_queue_commits(db)
    answer = asyncio.ensure_future(
        admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=1, queue=True)
    )
    line = service.ctx.desk.line
    await async_wait_for(lambda: line.waiting, what="carol in line, in memory", timeout=10)
    listed = await admin.queue()
    assert listed["queue"] == [] and listed["pools"] == {}
    assert not answer.done()
    commit.set_result(None)
    carol = await asyncio.wait_for(answer, 10)
    assert carol["queued"] and carol["position"] == 1
    listed = await admin.queue()
    assert [(r["id"], r["position"]) for r in listed["queue"]] == [(carol["id"], 1)]
    assert listed["pools"] == {"dev-pool": 1}


async def test_a_202_says_the_place_it_was_given_even_if_admitted_before_its_commit(
    db_url, start_service
):
    """The line admits an entry while its insert is still being committed: its 202 still says
    the place it was given (not a place-less row), and asking for it then says admitted."""

    service = await start_service(db_url=db_url, **FAST)
    db, admin = service.ctx.records.db, service.admin()
    await full_dev_pool(admin)
    commit = hold_back_queue_commits(db)
    answer = asyncio.ensure_future(
        admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=2, queue=True)
    )
    line = service.ctx.desk.line
    await async_wait_for(lambda: line.waiting, what="carol in line, in memory", timeout=10)
    [carol_id] = list(line.waiting)
    for held in await admin.admissions():
        await admin.release(held["id"])  # dev-pool empties: the next pass admits carol
    await async_wait_for(
        lambda: carol_id not in line.waiting, what="the line to admit carol", timeout=10
    )
    commit.set_result(None)
    carol = await asyncio.wait_for(answer, 10)
    assert carol["queued"] and carol["position"] == 1
    assert (
        carol["message"] == "waiting for 2 GPUs: position 1 in line for dev-pool · no estimate yet"
    )
    after = await admin.admission(carol_id)
    assert after["state"] == "admitted" and after["pool"] == "dev-pool"


@pytest.mark.parametrize("question", ["one place", "many places"])
async def test_an_entry_whose_reservation_the_database_refused_is_never_answered_admitted(
    question, db_url, start_service
):
    """carol waits in line; GPUs come free and the line admits her, but the database refuses
    her reservation. Neither question (``GET admissions/ID?wait=`` nor ``POST
    admissions/wait``) says "admitted": the answer is a 503 (try again), then her entry has
    ended, saying why, and nothing is held for her, in the service or in the database."""
    service = await start_service(db_url=db_url, durable_timeout=0.5, **FAST)
    db, admin = service.ctx.records.db, service.admin()
    alice = await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    dave = await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)
    carol = await admin.admit(
        user="carol", groups=["students"], pools=["dev-pool"], gpus=2, queue=True
    )
    assert carol["queued"]

    def refused(*args: Any, **kw: Any) -> Future[None]:
        future: Future[None] = Future()
        future.set_exception(DatabaseError("the database did not take the write: disk full"))
        return future

    db.reservation_add = refused
    line = service.ctx.desk.line
    await admin.release(alice["id"])
    await admin.release(dave["id"])
    await async_wait_for(
        lambda: carol["id"] not in line.waiting, what="the line to admit carol", timeout=10
    )

    async def ask() -> tuple[int, Any]:
        try:
            if question == "one place":
                got = await admin.request("GET", f"api/v1/admissions/{carol['id']}?wait=0")
                return got.code, got.json()
            body = {"ids": {carol["id"]: None}, "wait": 0}
            got = await admin.request("POST", "api/v1/admissions/wait", json_body=body)
            return got.code, got.json()["admissions"][carol["id"]]
        except GPUPoolError as e:
            return e.status, {"message": e.message}

    status, first = await ask()
    assert status == 503, first
    assert "could not be recorded" in first["message"]
    status, again = await ask()
    assert (status, again["state"]) == (200, "expired"), again
    assert "could not be recorded" in again["message"]
    assert await admin.admissions() == []
    # (alice's and dave's rows may still be there: deletions are batched after the answer)
    assert (carol["id"],) not in sql(db_url, "SELECT admission_id FROM reservations")
