"""The database's writer: a thread that commits queued writes in batches (:class:`Writer`,
which :class:`~jupyter_gpupool.db.store.Database` is).

Writes are queued and committed in batches every ``batch_seconds`` by the thread, so the event
loop never waits for the database. While it is down, writes wait in memory (at most
``max_queue``; the oldest samples go first) and are retried; ``healthy`` and ``last_error`` say
so.

A **durable** write (``durable=True``: the reservations and the queue's entries) returns a
:class:`concurrent.futures.Future`, completed once its batch has committed, or failed with
:class:`DatabaseError` when the batch could not be committed (it is not retried: whoever waits
on it drops what it stands for). While a durable write waits the writer commits at once, not
after ``batch_seconds``: the durable writes that arrive meanwhile share one commit (group
commit). A write whose future was cancelled before its batch began (its waiter gave up) is
skipped.

What a batch costs follows its commits, not its writes: a write is a function of the batch's
session, a :class:`Row` (rows put in a table) or a :class:`Many` (a statement's parameters). The
rows of one table in a batch (the reservations of the admissions answered in the same few
milliseconds) are written together: on SQLite and PostgreSQL one statement, an INSERT of them all
that replaces the rows of the same keys (``ON CONFLICT ... DO UPDATE``, the SQL compiled once per
table, columns and number of rows), elsewhere one DELETE of their keys and one INSERT, rather than
an ORM merge (a SELECT and an INSERT) each; the uses of one statement (reports of saved work) are
one executemany (:func:`write_batch` says what may go ahead of what). One statement is also one
release of the GIL by the driver, not one per row: the thread waits for it again at each (up to
the interpreter's switch interval while the event loop runs), which made a batch of N rows wait
N times. A batch that is one statement (the reservations of admissions answered together,
bookings made together: :func:`one_statement`) is run alone on the writer's connection, which is
in autocommit mode: the database commits it as it runs it, one call into the driver, where a
transaction of its own would add an implicit ``BEGIN`` and a ``COMMIT`` (and the ORM session
around them); any other batch is ``BEGIN``, its writes, ``COMMIT`` (``Writer._commit``). Batches
that follow each other within :data:`KEEP_CONNECTION` seconds share one connection (no checkout,
no reset, no pre-ping between them).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import (
    Column,
    Connection,
    Delete,
    Dialect,
    Engine,
    Table,
    Update,
    bindparam,
    delete,
    select,
)
from sqlalchemy import insert as plain_insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

log = logging.getLogger("jupyter_gpupool.db.store")

Write = Callable[[Session], None]


@dataclass(frozen=True, slots=True)
class Row:
    """Rows put in ``table``, each replacing the row of the same primary key if there is one.

    Rows of one table queued one after another are written together: on SQLite and PostgreSQL
    one INSERT of them all that replaces the rows of the same keys (per :data:`ROWS_PER_INSERT`),
    elsewhere one DELETE of their keys and one INSERT (an executemany), so that a batch of N
    admissions costs one or two statements, not N round trips of an ORM merge."""

    table: Table
    rows: tuple[dict[str, Any], ...]

    def __post_init__(self) -> None:
        # a wrong column fails its caller now, not the batch it would share with others
        columns = self.table.columns.keys()
        for row in self.rows:
            if wrong := row.keys() - columns:
                raise TypeError(f"{self.table.name} has no column {sorted(wrong)[0]!r}")


@dataclass(frozen=True, slots=True)
class Many:
    """One of the statements below (an UPDATE or DELETE with bound parameters) with its
    parameters: the same statement queued one after another runs once with all of theirs (an
    executemany), so that N reports of saved work in a batch are one UPDATE."""

    statement: Update | Delete
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NewRow:
    """A row put in ``table`` unless one with the same ``key`` (a unique column) is there,
    which is left as it is (as the first of one key in a batch is).

    Rows of one table queued one after another are one INSERT of them all per
    :data:`ROWS_PER_INSERT` that skips the keys there (``ON CONFLICT DO NOTHING``; elsewhere a
    SELECT of those keys first): the sessions of 20,000 running servers at a first start are
    40 statements, not 20,000 ORM objects, each a SELECT and an INSERT."""

    table: Table
    key: str
    row: dict[str, Any]

    def __post_init__(self) -> None:
        if wrong := self.row.keys() - self.table.columns.keys():
            raise TypeError(f"{self.table.name} has no column {sorted(wrong)[0]!r}")


#: A queued write: its kind, the write (a function of the batch's session, rows, or a
#: statement's parameters), and its future when it is durable.
Queued = tuple[str, "Write | Row | NewRow | Many", "Future[None] | None"]

#: Keys per DELETE ... IN (...), rows per INSERT: within every driver's limit on parameters.
KEYS_PER_DELETE = 500
ROWS_PER_INSERT = 500

#: Seconds the writer keeps its connection after a batch for the next one (batches back to back
#: under load); a connection idle longer goes back to the pool, which checks it (pre-ping) when
#: it is taken again.
KEEP_CONNECTION = 1.0

#: The dialects whose INSERT can replace a row of the same key (``ON CONFLICT ... DO UPDATE``).
_UPSERTS: dict[str, Callable[[Table], Any]] = {
    "sqlite": sqlite_insert,
    "postgresql": postgresql_insert,
}


@functools.cache
def _key(table: Table) -> Column[Any]:
    (key,) = table.primary_key.columns
    return key


def _last_of_each_key(table: Table, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    key = _key(table).name
    return list({row[key]: row for row in rows}.values())


def _upserts(
    dialect: Dialect, table: Table, last: Sequence[dict[str, Any]]
) -> list[tuple[str, Any]] | None:
    """The statements that put ``last`` (rows of distinct keys) in ``table``, each replacing the
    row of its key: one upsert per :data:`ROWS_PER_INSERT` rows, its text and parameters. None
    when they cannot be upserts: the dialect has none, or the rows give different columns."""
    if dialect.name not in _UPSERTS or not last:
        return None
    columns = tuple(last[0])
    if any(tuple(row) != columns for row in last):
        return None
    chunks = [last[i : i + ROWS_PER_INSERT] for i in range(0, len(last), ROWS_PER_INSERT)]
    return [_statement(upsert_sql(dialect, table, columns, len(c)), c) for c in chunks]


def write_rows(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Put ``rows`` in ``table``, each replacing the row of its key (the last of one key wins)."""
    key = _key(table)
    last = _last_of_each_key(table, rows)
    if not last:
        return
    statements = _upserts(session.get_bind().dialect, table, last)
    if statements is not None:
        for text, params in statements:
            session.connection().exec_driver_sql(text, params)
        return
    keys = [row[key.name] for row in last]
    for i in range(0, len(keys), KEYS_PER_DELETE):
        session.execute(delete(table).where(key.in_(keys[i : i + KEYS_PER_DELETE])))
    session.execute(plain_insert(table), last)


def write_new_rows(
    session: Session, table: Table, key: str, rows: Sequence[dict[str, Any]]
) -> None:
    """Put ``rows`` in ``table`` but those whose ``key`` is there already (or came first)."""
    first: dict[Any, dict[str, Any]] = {}
    for row in rows:
        first.setdefault(row[key], row)
    dialect = session.get_bind().dialect
    for columns, group in _by_columns(first.values()).items():
        for i in range(0, len(group), ROWS_PER_INSERT):
            chunk = group[i : i + ROWS_PER_INSERT]
            if dialect.name in _UPSERTS:
                sql = upsert_sql(dialect, table, columns, len(chunk), key)
                session.connection().exec_driver_sql(*_statement(sql, chunk))
                continue
            there = set(
                session.scalars(
                    select(table.c[key]).where(table.c[key].in_([r[key] for r in chunk]))
                )
            )
            if others := [r for r in chunk if r[key] not in there]:
                session.execute(plain_insert(table), others)


def _by_columns(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    out: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(tuple(row), []).append(row)
    return out


def _statement(
    sql: tuple[str, tuple[str, ...] | None], chunk: Sequence[dict[str, Any]]
) -> tuple[str, Any]:
    """One statement of :func:`upsert_sql` with the values of ``chunk``: its text and
    parameters, as the driver takes them."""
    text, order = sql
    values = {f"p{j}": v for j, v in enumerate(v for row in chunk for v in row.values())}
    return text, (values if order is None else tuple(values[n] for n in order))


def one_statement(dialect: Dialect, batch: Sequence[Queued]) -> tuple[str, Any] | None:
    """The batch as one statement (its text and parameters), when it is one: rows of one table
    (each replacing the row of its key), at most :data:`ROWS_PER_INSERT` of them once the last
    of each key is taken, written as one upsert. The reservations of the admissions answered
    together are such a batch. None for any other batch."""
    table: Table | None = None
    rows: list[dict[str, Any]] = []
    for _, write, _ in batch:
        if not isinstance(write, Row) or (table is not None and write.table is not table):
            return None
        table = write.table
        rows.extend(write.rows)
    if table is None:
        return None
    last = _last_of_each_key(table, rows)
    statements = _upserts(dialect, table, last) if len(last) <= ROWS_PER_INSERT else None
    return statements[0] if statements else None


@functools.lru_cache(maxsize=256)
def upsert_sql(
    dialect: Dialect, table: Table, columns: tuple[str, ...], n: int, skip: str | None = None
) -> tuple[str, tuple[str, ...] | None]:
    """The SQL of one INSERT of ``n`` rows of ``columns`` into ``table`` that replaces the rows
    of the same keys (``skip``: that leaves out the rows whose ``skip`` column is there), as
    the driver takes it, with the order of its parameters (``p0``, ``p1``... row after row;
    None when the driver takes them by name)."""
    values: list[dict[str, Any]] = [
        {c: bindparam(f"p{i * len(columns) + j}") for j, c in enumerate(columns)} for i in range(n)
    ]
    stmt: Any = _UPSERTS[dialect.name](table).values(values)  # the dialect's Insert
    if skip is not None:
        stmt = stmt.on_conflict_do_nothing(index_elements=[table.c[skip]])
    else:
        key = _key(table)
        stmt = stmt.on_conflict_do_update(
            index_elements=[key],
            # every other column, given or not: the row is replaced, as DELETE and INSERT would
            set_={c.name: stmt.excluded[c.name] for c in table.columns if c is not key},
        )
    compiled = stmt.compile(dialect=dialect)
    # nothing but the rows' values is bound (a column default computed in Python would be)
    assert set(compiled.binds) == {f"p{k}" for k in range(n * len(columns))}, compiled.binds
    order = tuple(compiled.positiontup or ()) if compiled.positional else None
    return compiled.string, order


@functools.cache
def _new_rows_of(table: Table) -> object:
    """What the new rows of ``table`` are grouped by (apart from its replacing rows)."""
    return object()


def _group(write: Write | Row | NewRow | Many) -> tuple[object, Table] | None:
    """What ``write`` is written together with (its table's rows, its statement), and the
    table it writes; None for a function of the session (it may write anything)."""
    if isinstance(write, Row):
        return write.table, write.table
    if isinstance(write, NewRow):
        return _new_rows_of(write.table), write.table
    if isinstance(write, Many):
        return write.statement, cast(Table, write.statement.table)
    return None


def write_batch(session: Session, batch: Sequence[Queued]) -> None:
    """The batch's writes, each write with the later ones it is written together with (rows of
    its table, its statement's parameters): those go ahead of writes of other tables (which
    they cannot change) but never past a write of the same table, nor past a function of the
    session."""
    done = [False] * len(batch)
    for i, (_, write, _) in enumerate(batch):
        if done[i]:
            continue
        group = _group(write)
        if group is None:
            write(session)  # type: ignore[operator]
            continue
        together = [write]
        for j in range(i + 1, len(batch)):
            if done[j]:
                continue
            other = _group(batch[j][1])
            if other is None:
                break
            if other[0] is group[0]:
                together.append(batch[j][1])
                done[j] = True
            elif other[1] is group[1]:
                break
        if isinstance(write, Row):
            rows = [row for w in together for row in w.rows]  # type: ignore[union-attr]
            write_rows(session, write.table, rows)
        elif isinstance(write, NewRow):
            write_new_rows(session, write.table, write.key, [w.row for w in together])  # type: ignore[union-attr]
        else:
            session.execute(write.statement, [w.params for w in together])  # type: ignore[union-attr]


class DatabaseError(Exception):
    """The database cannot be used: the message says why and what to do."""


class Writer:
    """The queue of writes and the thread that commits them (see the module docstring)."""

    def __init__(self, *, batch_seconds: float, max_queue: int, retry_cap: float):
        self.batch_seconds = batch_seconds
        self.max_queue = max_queue
        self.retry_cap = retry_cap
        self.engine: Engine | None = None
        self.healthy = False
        self.last_error = ""
        self.dropped = 0  # writes given up while the database was down too long
        self.written = 0
        self._queue: deque[Queued] = deque()
        self._durable = 0  # durable writes queued: the writer commits at once
        self._cond = threading.Condition()
        self._busy = False
        self._in_flight = 0  # writes of the batch being committed
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: The writer thread's connection, kept between batches that follow each other
        #: (:data:`KEEP_CONNECTION`), and when it was last used
        self._conn: Connection | None = None
        self._conn_used = 0.0

    @property
    def backlog(self) -> int:
        """Writes queued or being committed: what a crash now would lose."""
        with self._cond:
            return len(self._queue) + (self._in_flight if self._busy else 0)

    def start_writer(self) -> None:
        self.healthy = True
        self._stopping = False  # started again after a stop (a database opened anew)
        self._thread = threading.Thread(target=self._write_loop, name="gpupool-db", daemon=True)
        self._thread.start()

    def stop_writer(self, timeout: float) -> None:
        """Write what is queued (for at most ``timeout`` seconds), then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued write is committed; False if that took over ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def _put(
        self, kind: str, write: Write | Row | NewRow | Many, durable: bool = False
    ) -> Future[None] | None:
        future: Future[None] | None = Future() if durable else None
        with self._cond:
            self._queue.append((kind, write, future))
            if durable:
                self._durable += 1
            if len(self._queue) > self.max_queue:
                self._drop_one()
            self._cond.notify_all()
        return future

    def _drop_one(self) -> None:
        """Make room: the oldest sample goes first (a gap in a chart), else the oldest plain
        write (a durable one is failed only when nothing else is left)."""
        for i, (kind, _, _f) in enumerate(self._queue):
            if kind == "sample":
                del self._queue[i]
                break
        else:
            for i, (_, _, future) in enumerate(self._queue):
                if future is None:
                    del self._queue[i]
                    break
            else:
                _, _, future = self._queue.popleft()
                self._durable -= 1
                if future is not None and future.set_running_or_notify_cancel():
                    future.set_exception(DatabaseError("too many writes wait for the database"))
        self.dropped += 1

    def _connection(self) -> Connection:
        """The writer's connection: the last batch's if it came less than
        :data:`KEEP_CONNECTION` seconds ago, else one from the engine's pool (checked then)."""
        if self._conn is not None and (
            self._conn.invalidated or time.monotonic() - self._conn_used > KEEP_CONNECTION
        ):
            self._let_go()
        if self._conn is None:
            assert self.engine is not None
            # each transaction is the writer's own (BEGIN ... COMMIT below), or one statement
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._conn

    def _commit(self, batch: Sequence[Queued]) -> None:
        """Commit ``batch``: one statement alone when it is one (:func:`one_statement`), which
        the database commits as it runs it; else ``BEGIN``, its writes, ``COMMIT``.

        Each call into the driver lets go of the GIL and must win it back from the event loop
        (up to the interpreter's switch interval, or until the OS gives the thread a core):
        a transaction of its own costs the implicit BEGIN and the COMMIT, two more such calls
        each (four, with SQLite's statement preparing), and the ORM session around them more
        work in this thread than the statement itself."""
        conn = self._connection()
        one = one_statement(conn.dialect, batch)
        if one is not None:
            conn.exec_driver_sql(*one)
            conn.commit()  # SQLAlchemy's own (autobegun) transaction: nothing is sent
            return
        # the session's commit (or rollback) is the driver's commit() (or rollback()), which
        # ends the transaction begun here: sqlite3's and psycopg's do whenever one is open, in
        # autocommit mode too
        with Session(bind=conn) as session, session.begin():
            session.connection().exec_driver_sql("BEGIN")
            write_batch(session, batch)

    def _let_go(self) -> None:
        """The writer's connection back to the pool (or dropped, when it failed)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except SQLAlchemyError as e:
                log.debug("closing the writer's connection: %s", short_error(e))

    def _write_loop(self) -> None:
        try:
            self._write_batches()
        finally:
            self._let_go()

    def _write_batches(self) -> None:
        delay = 0.5
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    # idle: the connection goes back to the pool (where the engine's dispose
                    # at a close or a shut finds it)
                    if self._conn is not None and not self._cond.wait(KEEP_CONNECTION):
                        self._let_go()
                    elif self._conn is None:
                        self._cond.wait()
                if not self._queue and self._stopping:
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._durable = 0
                self._busy = True
                self._in_flight = len(batch)
            # a durable write whose waiter gave up before now is skipped; the others can no
            # longer be cancelled
            batch = [
                (kind, write, future)
                for kind, write, future in batch
                if future is None or future.set_running_or_notify_cancel()
            ]
            try:
                self._commit(batch)
                self._conn_used = time.monotonic()
            except SQLAlchemyError as e:
                self._let_go()  # a connection that failed is not used again
                failed = DatabaseError(f"the database did not take the write: {short_error(e)}")
                for _, _, future in batch:
                    if future is not None:
                        future.set_exception(failed)
                with self._cond:
                    # the plain writes again, in order, before newer writes; the durable ones
                    # are failed above: their waiters drop what they stand for
                    self._queue.extendleft(reversed([w for w in batch if w[2] is None]))
                    while len(self._queue) > self.max_queue:
                        self._drop_one()
                    self._busy = False
                    self._cond.notify_all()
                    if self.healthy or self.last_error != short_error(e):
                        log.error("database writes failed (will retry): %s", short_error(e))
                    self.healthy = False
                    self.last_error = short_error(e)
                    if self._stopping:
                        return
                    # a durable write tries at once: its waiter has a deadline
                    self._cond.wait_for(lambda: self._durable > 0 or self._stopping, delay)
                delay = min(delay * 2, self.retry_cap)
                continue
            with self._cond:
                if not self.healthy:
                    log.info("database writes work again (%d written)", len(batch))
                self.healthy = True
                self.last_error = ""
                self.written += len(batch)
                self._busy = False
                self._cond.notify_all()
            for _, _, future in batch:
                if future is not None:
                    future.set_result(None)
            delay = 0.5
            if self.batch_seconds:
                # gather the next batch, unless a durable write waits (it commits at once)
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._durable > 0 or self._stopping, self.batch_seconds
                    )


def short_error(e: BaseException) -> str:
    """An error in one line: the driver's message without SQLAlchemy's background link."""
    text = str(getattr(e, "orig", None) or e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]
