"""Awaiting durable writes (``service/commits.py``) against the real writer, on SQLite and
PostgreSQL: a wait ends once its row is in the database (read through a connection of the test's
own), with the write's error when its commit failed, with TimeoutError when it is late (a write not
begun then is never written), and with the awaiting task's cancellation (likewise); the writes of
one batch wake the loop once, not once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any

import pytest
from commit_points import CommitPoints
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError
from test_store import reservation

from jupyter_gpupool.db.store import Database, DatabaseError
from jupyter_gpupool.service.commits import until_committed


def held(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {r[0] for r in conn.execute(text("SELECT admission_id FROM reservations"))}


class Gate:
    """The writer's commits held at the driver until :meth:`open` (a slow disk); ``fail``
    makes them fail instead."""

    def __init__(self, db: Database) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.fail = False
        assert db.engine is not None
        CommitPoints(db.engine, self._commit)

    def _commit(self, _statements: list[str]) -> None:
        self.entered.set()
        self.opened.wait(20)
        if self.fail:
            raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

    def open(self) -> None:
        self.opened.set()


async def behind_a_held_commit(db: Database) -> Gate:
    """The writer inside the commit of a first reservation, held there until the gate opens."""
    gate = Gate(db)
    db.reservation_add(reservation("first", 1e12))
    await asyncio.to_thread(gate.entered.wait, 10)
    return gate


async def test_a_wait_ends_once_its_row_is_in_and_a_batch_wakes_the_loop_once(
    db: Database, outside: Engine
) -> None:
    """16 reservations written while a commit is held share the next batch: none of their
    waits ends before it; each ends with its row in the database; the loop was woken from
    the writer's thread fewer times than there were writes."""
    gate = await behind_a_held_commit(db)
    writes = [db.reservation_add(reservation(f"a{i}", 1e12)) for i in range(16)]
    ended: list[str] = []

    async def wait(i: int, written: Future[None] | None) -> None:
        assert written is not None
        await until_committed(written, 20)
        ended.append(f"a{i}")
        assert f"a{i}" in held(outside), "the wait ended before its row was in"

    loop = asyncio.get_running_loop()
    wakes = 0
    real = loop.call_soon_threadsafe

    def counted(*args: Any, **kw: Any) -> Any:
        nonlocal wakes
        if threading.current_thread() is not threading.main_thread():
            wakes += 1
        return real(*args, **kw)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        tasks = [asyncio.ensure_future(wait(i, w)) for i, w in enumerate(writes)]
        await asyncio.sleep(0.3)
        assert ended == [], "a wait ended before its commit"
        gate.open()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
    finally:
        loop.call_soon_threadsafe = real  # type: ignore[method-assign]
    assert sorted(ended) == sorted(f"a{i}" for i in range(16))
    assert held(outside) == {"first", *ended}
    assert 1 <= wakes < 16, f"{wakes} wakes of the loop for one batch of 16 writes"


async def test_a_failed_commit_ends_each_wait_with_its_error(db: Database) -> None:
    gate = Gate(db)
    gate.fail = True
    gate.open()
    written = [db.reservation_add(reservation(f"a{i}", 1e12)) for i in range(3)]
    for w in written:
        assert w is not None
        with pytest.raises(DatabaseError, match="disk I/O error"):
            await until_committed(w, 20)


async def test_a_late_wait_times_out_and_a_write_not_begun_is_never_written(
    db: Database, outside: Engine
) -> None:
    """While a commit is held, a second write waits 0.2 s and times out: it is cancelled, and
    once the writer goes on it is skipped (its row never lands); the first, already being
    committed, still lands."""
    gate = await behind_a_held_commit(db)
    late = db.reservation_add(reservation("late", 1e12))
    assert late is not None
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await until_committed(late, 0.2)
    assert 0.15 < time.monotonic() - started < 5
    assert late.cancelled()
    gate.open()
    assert db.flush(timeout=10)
    assert held(outside) == {"first"}


async def test_a_cancelled_wait_cancels_a_write_not_begun(db: Database, outside: Engine) -> None:
    """The spawner goes away while its write waits behind a held commit: the write is skipped."""
    gate = await behind_a_held_commit(db)
    gone = db.reservation_add(reservation("gone", 1e12))
    assert gone is not None
    task = asyncio.ensure_future(until_committed(gone, 20))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone.cancelled()
    gate.open()
    assert db.flush(timeout=10)
    assert held(outside) == {"first"}


async def test_two_waits_of_one_write_both_end_and_a_done_write_answers_at_once(
    db: Database, outside: Engine
) -> None:
    gate = Gate(db)
    written = db.reservation_add(reservation("both", 1e12))
    assert written is not None
    await asyncio.to_thread(gate.entered.wait, 10)
    waits = asyncio.gather(until_committed(written, 20), until_committed(written, 20))
    await asyncio.sleep(0.1)
    assert not waits.done()
    gate.open()
    await asyncio.wait_for(waits, 20)
    assert held(outside) == {"both"}
    await asyncio.wait_for(until_committed(written, 0), 1)  # done: no wait at all


def test_a_write_completed_after_its_loop_closed_is_let_go_quietly(caplog) -> None:
    """The service stopped (its loop closed) while a write was in flight: the writer's thread
    completes it without an error from a loop that is gone."""
    loop = asyncio.new_event_loop()
    written: Future[None] = Future()

    async def give_up() -> None:
        waiting = asyncio.ensure_future(until_committed(written, 30))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting

    written.set_running_or_notify_cancel()  # being committed: the cancel cannot take it back
    loop.run_until_complete(give_up())
    loop.close()
    done = threading.Thread(target=written.set_result, args=(None,))
    done.start()
    done.join()
    assert written.result() is None
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_a_loop_that_awaited_commits_can_be_collected() -> None:
    """The waits kept per loop do not keep the loop alive once nothing else does (a test run
    makes thousands of loops)."""
    loop = asyncio.new_event_loop()
    written: Future[None] = Future()

    async def wait_for_it() -> None:
        waiting = asyncio.ensure_future(until_committed(written, 30))
        await asyncio.sleep(0)
        written.set_running_or_notify_cancel()
        written.set_result(None)
        await waiting

    loop.run_until_complete(wait_for_it())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None
