"""Group commit of the durable writes (issue 39), on SQLite and PostgreSQL: the durable writes that
arrive while a commit runs share the next one, each is answered (its future done) only once that
commit returned, and a commit that fails fails every durable write of its batch, none of whose rows
is left in the database.

The commits are counted and held back through the engine's own ``commit`` event (a slow disk, as
the writer sees it); what is in the database is read through a connection of the test's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError
from test_store import entry, reservation

from jupyter_gpupool.db.store import Database, DatabaseError


@pytest.fixture
def outside(db_url: str) -> Iterator[Engine]:
    """An engine of the test's own on the same database."""
    engine = create_engine(db_url)
    yield engine
    engine.dispose()


def count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


class Commits:
    """The writer's commits as the database driver is asked for them: at each, which of
    ``watched`` were already done and how many reservations an outside connection saw; the
    first is held until :meth:`release` (and ``fail``, when set, makes the next one fail)."""

    def __init__(self, db: Database, outside: Engine):
        self.seen: list[tuple[list[bool], int]] = []
        self.watched: list[Future[None]] = []
        self.outside = outside
        self.fail: Callable[[], bool] = lambda: False
        self._gate = threading.Event()
        assert db.engine is not None
        event.listen(db.engine, "commit", self._commit)

    def _commit(self, _conn: Any) -> None:
        self.seen.append(([f.done() for f in self.watched], count(self.outside, "reservations")))
        if len(self.seen) == 1:
            self._gate.wait(20)
        elif self.fail():
            raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

    def wait_first(self) -> None:
        deadline = time.monotonic() + 10
        while not self.seen:
            assert time.monotonic() < deadline, "the writer never committed"
            time.sleep(0.01)

    def release(self) -> None:
        self._gate.set()


def test_durable_writes_arriving_during_a_commit_share_the_next_and_are_done_after_it(
    db_url: str, outside: Engine
):
    """While one commit is held, 20 reservations and 5 places in line are written: none is
    done before its commit, all 25 share one commit, and every row is in the database once
    they are done."""
    db = Database(db_url, batch_seconds=0)
    db.open()
    try:
        commits = Commits(db, outside)
        first = db.reservation_add(reservation("first", 1e12))
        commits.wait_first()  # the writer is inside its first commit
        commits.watched += [db.reservation_add(reservation(f"a{i}", 1e12)) for i in range(20)]  # type: ignore[misc]
        commits.watched += [db.queue_add(entry(f"q{i}", i), durable=True) for i in range(5)]  # type: ignore[misc]
        time.sleep(0.3)
        assert not any(f.done() for f in commits.watched), "answered before any commit"
        commits.release()
        assert first is not None
        first.result(timeout=10)
        for f in commits.watched:
            f.result(timeout=10)
        assert len(commits.seen) == 2, "the 25 writes took one commit"
        # at that commit none of them was answered yet, and only the first row was in
        assert commits.seen[1] == ([False] * 25, 1)
        assert count(outside, "reservations") == 21
        assert count(outside, "queue_entries") == 5
    finally:
        db.close()


def test_a_failed_commit_fails_every_durable_write_of_its_batch_and_keeps_none(
    db_url: str, outside: Engine
):
    """The commit of a batch of 10 reservations fails: each of the 10 fails (their answers are
    503s), none of their rows is in the database, not even later; a plain write of the same
    batch is written again and lands."""
    db = Database(db_url, batch_seconds=0, retry_cap=0.2)
    db.open()
    try:
        commits = Commits(db, outside)
        failing = [True]
        commits.fail = lambda: failing.pop() if failing else False
        db.reservation_add(reservation("first", 1e12))
        commits.wait_first()
        db.add_change(1.0, "user admin", "in the failed batch", "API")
        commits.watched += [db.reservation_add(reservation(f"a{i}", 1e12)) for i in range(10)]  # type: ignore[misc]
        commits.release()
        for f in commits.watched:
            with pytest.raises(DatabaseError, match="disk I/O error"):
                f.result(timeout=10)
        assert db.flush(timeout=10)
        assert count(outside, "reservations") == 1, "only the first batch's reservation"
        with outside.connect() as conn:
            assert list(conn.execute(text("SELECT what FROM changes"))) == [
                ("in the failed batch",)
            ]
    finally:
        db.close()
