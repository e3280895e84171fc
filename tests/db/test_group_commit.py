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
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from commit_points import CommitPoints
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import OperationalError
from test_store import entry, reservation, session

from jupyter_gpupool.db import writer
from jupyter_gpupool.db.store import Database, DatabaseError
from jupyter_gpupool.db.writer import ROWS_PER_INSERT


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
        CommitPoints(db.engine, self._commit)

    def _commit(self, _statements: list[str]) -> None:
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


def test_a_batch_of_two_tables_is_one_transaction_a_failed_statement_keeps_none_of_it(
    db_url: str, outside: Engine
):
    """A batch of 10 reservations and 3 places in line is two statements in one transaction:
    when the second fails at the driver (after the first ran), both fail, and neither the
    reservations nor the places are in the database (the first statement was not committed
    on its own)."""
    db = Database(db_url, batch_seconds=0, retry_cap=0.2)
    db.open()
    try:
        assert db.engine is not None

        def refuse_places(_c: Any, _cur: Any, sql: str, *_: Any) -> None:
            if sql.lstrip().upper().startswith("INSERT INTO QUEUE_ENTRIES"):
                raise OperationalError(sql, {}, Exception("database or disk is full"))

        # listened to before the commits are held (not while the writer is inside a listener)
        event.listen(db.engine, "before_cursor_execute", refuse_places)
        commits = Commits(db, outside)
        db.reservation_add(reservation("first", 1e12))
        commits.wait_first()
        batch = [db.reservation_add(reservation(f"a{i}", 1e12)) for i in range(10)]
        batch += [db.queue_add(entry(f"q{i}", i), durable=True) for i in range(3)]
        commits.release()
        for f in batch:
            assert f is not None
            with pytest.raises(DatabaseError, match="disk is full"):
                f.result(timeout=10)
        assert count(outside, "reservations") == 1, "only the first batch's reservation"
        assert count(outside, "queue_entries") == 0
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


def test_saved_work_and_bookings_arriving_during_a_commit_share_the_next_and_each_lands(
    db_url: str, outside: Engine
):
    """While one commit is held, 10 labs report saved work on 10 sessions and 10 bookings are
    made, changed, deleted and made again: they share one commit, the reports are one UPDATE (an
    executemany) and each landed on its own session; the bookings are as they were left, in the
    order of their writes."""
    db = Database(db_url, batch_seconds=0)
    db.open()
    try:
        for i in range(10):
            db.open_session(session(f"uid{i}", f"user{i}", 100.0))
        assert db.flush(timeout=10)
        commits = Commits(db, outside)
        statements: list[tuple[str, bool]] = []
        assert db.engine is not None
        event.listen(
            db.engine,
            "before_cursor_execute",
            lambda _c, _cur, sql, _p, _ctx, many: statements.append((sql.split()[0], many)),
        )
        db.reservation_add(reservation("first", 1e12))
        commits.wait_first()
        statements.clear()
        for i in range(10):
            paths = f'["{i}.ipynb"]'
            commits.watched.append(db.session_saved(f"uid{i}", i, paths, 200.0 + i))  # type: ignore[arg-type]
            commits.watched.append(db.bookings_put([booking_row(f"b{i}")]))  # type: ignore[arg-type]
        commits.watched.append(db.booking_drop("b3"))  # type: ignore[arg-type]
        commits.watched.append(db.bookings_put([booking_row("b5", "b5 again")]))  # type: ignore[arg-type]
        commits.watched.append(db.booking_drop("b5"))  # type: ignore[arg-type]
        commits.watched.append(db.bookings_put([booking_row("b3", "b3 again")]))  # type: ignore[arg-type]
        time.sleep(0.3)
        assert not any(f.done() for f in commits.watched), "answered before any commit"
        commits.release()
        for f in commits.watched:
            f.result(timeout=10)
        assert len(commits.seen) == 2, "the 24 writes took one commit"
        with outside.connect() as conn:
            saved = conn.execute(
                text("SELECT pod_uid, saved, saved_at, saved_paths FROM server_sessions")
            )
            assert sorted(saved) == sorted(
                (f"uid{i}", i, 200.0 + i, f'["{i}.ipynb"]') for i in range(10)
            )
            names = conn.execute(text("SELECT name, document FROM bookings ORDER BY name"))
            assert list(names) == sorted(
                [(f"b{i}", '{"kind": "booking"}') for i in range(10) if i not in (3, 5)]
                + [("b3", "b3 again")]
            ), "in the order they were made"
        updates = [many for verb, many in statements if verb.upper() == "UPDATE"]
        assert updates == [True], "the 10 reports are one UPDATE"
    finally:
        db.close()


def booking_row(name: str, document: str = '{"kind": "booking"}') -> dict[str, object]:
    return {
        "name": name,
        "document": document,
        "created_by": "admin",
        "created": 1.0,
        "changed_by": "admin",
        "changed": 1.0,
    }


def test_a_batch_of_reservations_is_one_insert_that_replaces_rows_of_the_same_key(
    db_url: str, outside: Engine
):
    """While one commit is held, 30 reservations are written, two of them for admissions
    already in the database (admitted again from the line): they share one commit, as one
    statement (an INSERT that replaces the rows of the same key, no DELETE, no INSERT per row:
    each statement is a wait for the driver and the GIL), and the two rows read as written last.
    More rows than one statement takes are one statement per ROWS_PER_INSERT."""
    db = Database(db_url, batch_seconds=0)
    db.open()
    try:
        for aid in ("again1", "again2"):
            db.reservation_add(reservation(aid, 1e12, gpus=1, node="gpu-old"))
        assert db.flush(timeout=10)
        statements: list[tuple[str, str]] = []
        assert db.engine is not None
        # listened to first: the first statement (held there, at its commit) is seen before
        # it is held, then cleared
        event.listen(
            db.engine,
            "before_cursor_execute",
            lambda _c, _cur, sql, *_: statements.append(tuple(sql.split()[:3])),  # type: ignore[arg-type]
        )
        commits = Commits(db, outside)
        db.reservation_add(reservation("first", 1e12))
        commits.wait_first()
        statements.clear()
        commits.watched += [db.reservation_add(reservation(f"a{i}", 1e12)) for i in range(28)]  # type: ignore[misc]
        commits.watched += [
            db.reservation_add(reservation(a, 2e12, gpus=4)) for a in ("again1", "again2")
        ]  # type: ignore[misc]
        commits.release()
        for f in commits.watched:
            f.result(timeout=10)
        assert len(commits.seen) == 2, "the 30 writes took one commit"
        assert statements == [("INSERT", "INTO", "reservations")], statements
        assert count(outside, "reservations") == 31
        with outside.connect() as conn:
            again = conn.execute(
                text(
                    "SELECT admission_id, gpus, node, expires_at FROM reservations "
                    "WHERE admission_id LIKE 'again%' ORDER BY admission_id"
                )
            )
            assert list(again) == [("again1", 4, "gpu-01", 2e12), ("again2", 4, "gpu-01", 2e12)]
        statements.clear()
        many = [db.reservation_add(reservation(f"m{i}", 1e12)) for i in range(ROWS_PER_INSERT + 1)]
        for f in many:
            assert f is not None
            f.result(timeout=10)
        inserts = [s for s in statements if s[0] == "INSERT"]
        assert 2 <= len(inserts) <= len(many) // 2, "a statement per ROWS_PER_INSERT rows"
        assert count(outside, "reservations") == 31 + ROWS_PER_INSERT + 1
    finally:
        db.close()


def test_batches_back_to_back_share_the_writers_connection_and_an_idle_writer_gives_it_back(
    db_url: str, monkeypatch: pytest.MonkeyPatch
):
    """Ten durable writes one after the other (ten batches) take one connection from the pool
    (no checkout, reset or pre-ping between batches); a writer idle for KEEP_CONNECTION gives
    it back, and takes one again for the next write."""
    monkeypatch.setattr(writer, "KEEP_CONNECTION", 0.3)
    db = Database(db_url, batch_seconds=0)
    db.open()
    try:
        assert db.engine is not None
        taken: list[str] = []
        given: list[str] = []
        name = threading.current_thread
        event.listen(db.engine, "checkout", lambda *_: taken.append(name().name))
        event.listen(db.engine, "checkin", lambda *_: given.append(name().name))
        for i in range(10):
            written = db.reservation_add(reservation(f"r{i}", 1e12))
            assert written is not None
            written.result(timeout=10)
        assert taken.count("gpupool-db") == 1, taken
        time.sleep(1.0)
        assert given.count("gpupool-db") == 1, "given back while idle"
        written = db.reservation_add(reservation("later", 1e12))
        assert written is not None
        written.result(timeout=10)
        assert taken.count("gpupool-db") == 2
    finally:
        db.close()


def test_sessions_opened_together_are_an_insert_per_500_and_an_open_session_is_left_as_it_is(
    db_url: str, outside: Engine
):
    """A first start opens a session per running server (1,200 here) in one batch: one INSERT
    per ROWS_PER_INSERT sessions, not an ORM SELECT and INSERT each; a session already open
    for a pod (a restart) is left as it is, and the same pod twice in a batch is one session,
    the first."""
    db = Database(db_url, batch_seconds=0)
    db.open()
    try:
        db.open_session(session("uid0", "user0", 100.0))
        assert db.flush(timeout=10)
        statements: list[str] = []
        assert db.engine is not None
        event.listen(
            db.engine,
            "before_cursor_execute",
            lambda _c, _cur, sql, *_: statements.append(sql.split()[0].upper()),
        )
        with db._cond:  # the 1,201 writes queued before the writer takes any (one batch)
            for i in range(1200):
                db.open_session(session(f"uid{i}", f"user{i}", 500.0))
            db.open_session(session("uid7", "user7", 900.0))
        assert db.flush(timeout=30)
        assert statements.count("INSERT") == -(-1200 // ROWS_PER_INSERT), statements[:5]
        assert "SELECT" not in statements
        with outside.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM server_sessions")).scalar() == 1200
            started = dict(
                conn.execute(
                    text(
                        "SELECT pod_uid, started FROM server_sessions "
                        "WHERE pod_uid IN ('uid0', 'uid7')"
                    )
                ).all()
            )
        assert started == {"uid0": 100.0, "uid7": 500.0}
    finally:
        db.close()
