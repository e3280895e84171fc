"""The service's database: opened and upgraded at start, written from a thread of its own.

``Database(url).open()`` connects, brings the schema to the newest revision this code knows
(alembic, :mod:`.migrations`) and starts the writer (:mod:`.writer`): writes are queued and
committed in batches by a thread of its own, and the durable ones (a reservation, a queue
entry) give a future completed by their commit. Reads are plain blocking calls: the service
runs them with ``asyncio.to_thread``.

A database whose schema is newer than this code (a newer gpupool wrote it) is refused with
:class:`SchemaTooNew`, before anything is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine, Select, create_engine, delete, event, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ..core.usage.history import hourly_averages
from ..core.usage.utilization import hourly_busy
from .models import (
    BookingRow,
    ChangeRecord,
    QueueEntry,
    ReservationRow,
    ServerSession,
    UsageSample,
)
from .statements import (
    BOOKINGS,
    DROP_BOOKING,
    QUEUE_ENTRIES,
    RESERVATIONS,
    SAVED,
    SESSIONS,
    STOPPING,
)
from .writer import DatabaseError, Many, NewRow, Row, Writer, short_error

__all__ = ["Database", "DatabaseError", "SchemaTooNew", "head_revision", "redacted", "upgrade"]

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


#: What a session is to the service (:meth:`Database.sessions`), in this order.
SESSION_FIELDS = (
    "pod_uid",
    "namespace",
    "pod",
    "user",
    "server",
    "charged",
    "pool",
    "platform",
    "gpu_type",
    "gpus",
    "shape",
    "equivalents",
    "over_quota",
    "started",
    "stopped",
    "last_seen",
    "ended",
    "idle_warned",
    "saved",
    "saved_at",
    "saved_paths",
)


#: A reservation's columns (:class:`~jupyter_gpupool.core.usage.reservations.Reservation`'s fields).
RESERVATION_FIELDS = (
    "admission_id",
    "pool",
    "node",
    "gpus",
    "user",
    "charged",
    "over_quota",
    "expires_at",
    "resource",
    "equivalents",
    "shape",
)


class SchemaTooNew(DatabaseError):
    """The database was written by a newer gpupool."""


def redacted(url: str) -> str:
    """``url`` without its password, for logs and pages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(an invalid database URL)"


def _config(connection: Any) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(_config(None)).get_current_head()
    assert head is not None
    return head


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the schema to :func:`head_revision`; ``(revision before, revision after)``."""
    with engine.begin() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
        cfg = _config(conn)
        head = head_revision()
        if current is not None:
            try:
                ScriptDirectory.from_config(cfg).get_revision(current)
            except CommandError:
                raise SchemaTooNew(
                    f"the database {redacted(str(engine.url))} has schema revision {current}, "
                    f"newer than this gpupool knows (up to {head}): upgrade jupyter_gpupool, "
                    "or give c.GPUPoolService.db_url another database"
                ) from None
        if current != head:
            command.upgrade(cfg, "head")
    return current, head


def make_engine(url: str) -> Engine:
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            # readers and the writer side by side; a file's writes wait for each other a while
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=5000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


class Database(Writer):
    """The service's database (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        batch_seconds: float = 0.5,
        max_queue: int = 100_000,
        retry_cap: float = 10.0,
    ):
        super().__init__(batch_seconds=batch_seconds, max_queue=max_queue, retry_cap=retry_cap)
        self.url = url

    @property
    def description(self) -> str:
        return redacted(self.url)

    # --- lifecycle -------------------------------------------------------------------------------

    def open(self) -> tuple[str | None, str]:
        """Connect and upgrade the schema; start the writer. ``(revision before, after)``.

        Raises :class:`SchemaTooNew`, or :class:`DatabaseError` when the database cannot be
        reached or written (the service says so and tries again later: :meth:`open` may be
        called again after a failure)."""
        try:
            self.engine = make_engine(self.url)
            revisions = upgrade(self.engine)
        except SchemaTooNew:
            self._drop_engine()
            raise
        except (SQLAlchemyError, OSError, CommandError, ValueError) as e:
            self._drop_engine()
            self.last_error = short_error(e)
            raise DatabaseError(
                f"cannot use the database {self.description}: {short_error(e)}"
            ) from e
        self.start_writer()
        return revisions

    def _drop_engine(self) -> None:
        """Forget the engine of a database that could not be opened (it is tried anew)."""
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None

    def shut(self) -> None:
        """Stop the writer and forget the engine without writing what is queued: an open whose
        read-back failed (:meth:`read_back`), to be tried again from :meth:`open`."""
        self.stop_writer(2.0)  # nothing is queued: the thread ends at once
        self._drop_engine()
        self.healthy = False

    def ping(self) -> None:
        """One round trip to the database (``SELECT 1``); raises :class:`DatabaseError` when it
        does not answer."""
        if self.engine is None:
            raise DatabaseError("the database is not open")
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except SQLAlchemyError as e:
            raise DatabaseError(short_error(e)) from e

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds), then stop."""
        self.stop_writer(timeout)
        if self.engine is not None:
            self.engine.dispose()

    # --- writes (queued) -------------------------------------------------------------------------

    def add_samples(self, now: float, rows: Iterable[Mapping[str, Any]]) -> None:
        """One usage sample per pool row (``pool``, ``gpu_total``, ``gpu_used``,
        ``gpu_over_quota``, ``gpu_pending``, and optionally ``gpu_busy``: None or missing when
        nothing was measured)."""
        samples = [
            UsageSample(
                time=now,
                pool=str(r["pool"]),
                hourly=False,
                gpu_total=float(r["gpu_total"]),
                gpu_used=float(r["gpu_used"]),
                gpu_over_quota=float(r["gpu_over_quota"]),
                gpu_pending=float(r["gpu_pending"]),
                gpu_busy=None if r.get("gpu_busy") is None else float(r["gpu_busy"]),
            )
            for r in rows
        ]
        self._put("sample", lambda s: s.add_all(samples))

    def add_change(self, when: float, who: str, what: str, via: str) -> None:
        record = ChangeRecord(time=when, who=who, what=what, via=via)
        self._put("change", lambda s: s.add(record))

    def open_session(self, fields: Mapping[str, Any]) -> None:
        """A server session begins (``fields``: the columns of :class:`ServerSession`); a
        session already open for that pod is left as it is."""
        self._put("session", NewRow(SESSIONS, "pod_uid", dict(fields)))

    def close_session(self, pod_uid: str, stopped: float, ended: str) -> None:
        def write(s: Session) -> None:
            s.execute(
                update(ServerSession)
                .where(ServerSession.pod_uid == pod_uid, ServerSession.stopped.is_(None))
                .values(stopped=max(stopped, 0.0), ended=ended)
            )

        self._put("session", write)

    def session_stopping(self, pod_uid: str, ended: str) -> Future[None] | None:
        """The service is about to stop the server of the open session of ``pod_uid``, and
        its session is to end so (``reclaimed``): a durable write before the stop is asked,
        so that a crash between the two still knows why it stopped. Its ``stopped`` stays
        empty until the pod is gone."""
        return self._put("session", Many(STOPPING, {"s_uid": pod_uid, "s_ended": ended}), True)

    def idle_warned(self, pod_uid: str, at: float) -> None:
        """The idle policy warned the open session of ``pod_uid`` at ``at`` (the latest
        warning is kept)."""

        def write(s: Session) -> None:
            s.execute(
                update(ServerSession)
                .where(ServerSession.pod_uid == pod_uid, ServerSession.stopped.is_(None))
                .values(idle_warned=at)
            )

        self._put("session", write)

    def session_saved(
        self, pod_uid: str, count: int, paths_json: str, at: float
    ) -> Future[None] | None:
        """The user's lab saved ``count`` documents (``paths_json``) before a stop of the
        session of ``pod_uid``: a durable write, the future of its commit (the API's answer
        says it is recorded). A later report replaces an earlier one."""
        params = {"s_uid": pod_uid, "s_saved": count, "s_at": at, "s_paths": paths_json}
        return self._put("session", Many(SAVED, params), durable=True)

    def queue_add(self, entry: Mapping[str, Any], durable: bool = False) -> Future[None] | None:
        """A request is put in line (``entry``: ``id``, ``seq``, ``since``, ``user``,
        ``groups`` and ``pools`` lists, ``gpus``, ``gpu_type``, ``server``, ``reclaim``);
        ``durable``: the future of its commit."""
        row = dict(
            id=str(entry["id"]),
            seq=int(entry["seq"]),
            since=float(entry["since"]),
            user=str(entry["user"]),
            groups=json.dumps(list(entry["groups"])),
            pools=json.dumps(list(entry["pools"])),
            gpus=int(entry["gpus"]),
            gpu_type=entry.get("gpu_type"),
            server=str(entry.get("server") or ""),
            reclaim=bool(entry.get("reclaim", True)),
            state="queued",
            ended=None,
        )
        # the same entry twice (a retried batch) is one row
        return self._put("queue", Row(QUEUE_ENTRIES, (row,)), durable)

    def queue_end(self, entry_id: str, state: str, at: float) -> None:
        """An entry left the line: ``admitted``, ``cancelled`` or ``expired`` (the latest end
        is kept: an admitted entry taken up again after a restart leaves the line again)."""

        def write(s: Session) -> None:
            s.execute(
                update(QueueEntry).where(QueueEntry.id == entry_id).values(state=state, ended=at)
            )

        self._put("queue", write)

    def reservation_add(self, fields: Mapping[str, Any]) -> Future[None] | None:
        """An admission holds GPUs (``fields``: the columns of :class:`ReservationRow`, the
        fields of a reservation): a durable write, the future of its commit."""
        # the same admission again (admitted from the line anew) is one row
        row = Row(RESERVATIONS, (dict(fields),))
        return self._put("reservation", row, durable=True)

    def reservation_drop(self, admission_id: str) -> None:
        """A reservation is released, expired, or its pod showed up (a plain write: a row
        left over only holds GPUs until it expires or its pod is seen)."""

        def write(s: Session) -> None:
            s.execute(delete(ReservationRow).where(ReservationRow.admission_id == admission_id))

        self._put("reservation", write)

    def bookings_put(self, rows: Sequence[Mapping[str, Any]]) -> Future[None] | None:
        """Bookings are created or replaced together (``rows``: the columns of
        :class:`BookingRow` each): one durable write, so one commit takes all of them or none
        (the rows they replace go first, one DELETE per 500 names)."""
        return self._put("booking", Row(BOOKINGS, tuple(dict(r) for r in rows)), durable=True)

    def booking_drop(self, name: str) -> Future[None] | None:
        """A booking is deleted: a durable write, the future of its commit."""
        return self._put("booking", Many(DROP_BOOKING, {"b_name": name}), durable=True)

    def seen_open(self, now: float) -> None:
        """Every open session was still running at ``now`` (one statement, however many; the
        ledger closes the sessions of servers that stopped before it says this)."""

        def write(s: Session) -> None:
            s.execute(
                update(ServerSession).where(ServerSession.stopped.is_(None)).values(last_seen=now)
            )

        self._put("session", write)

    def prune(self, now: float, raw_days: float, keep_days: float) -> None:
        """Samples older than ``raw_days`` become hourly averages (``gpu_busy``: of the
        samples that have one); everything older than ``keep_days`` goes (sessions that ended
        then, changes, and queue entries that left the line then, too)."""
        raw_before = now - raw_days * 86400
        keep_after = now - keep_days * 86400

        def write(s: Session) -> None:
            old = s.execute(
                select(
                    UsageSample.time,
                    UsageSample.pool,
                    UsageSample.gpu_total,
                    UsageSample.gpu_used,
                    UsageSample.gpu_over_quota,
                    UsageSample.gpu_pending,
                    UsageSample.gpu_busy,
                ).where(UsageSample.hourly.is_(False), UsageSample.time < raw_before)
            ).all()
            if old:
                rows = [r._asdict() for r in old]
                busy = hourly_busy(rows)
                s.add_all(
                    UsageSample(hourly=True, gpu_busy=busy.get((h["time"], h["pool"])), **h)
                    for h in hourly_averages(rows)
                )
                s.execute(
                    delete(UsageSample).where(
                        UsageSample.hourly.is_(False), UsageSample.time < raw_before
                    )
                )
            s.execute(delete(UsageSample).where(UsageSample.time < keep_after))
            s.execute(delete(ServerSession).where(ServerSession.stopped < keep_after))
            s.execute(delete(ChangeRecord).where(ChangeRecord.time < keep_after))
            s.execute(delete(QueueEntry).where(QueueEntry.ended < keep_after))
            s.execute(delete(ReservationRow).where(ReservationRow.expires_at < now))

        self._put("prune", write)

    # --- reads (blocking: run them in a thread) --------------------------------------------------

    def _read(self) -> Session:
        if self.engine is None:
            raise DatabaseError("the database is not open")
        return Session(self.engine)

    def samples(self, since: float, pool: str | None = None) -> list[dict[str, Any]]:
        """Samples since ``since``, oldest first: ``time``, ``pool``, the four GPU figures and
        ``gpu_busy`` (None where nothing was measured)."""
        query = select(UsageSample).where(UsageSample.time >= since)
        if pool is not None:
            query = query.where(UsageSample.pool == pool)
        with self._read() as s:
            return [
                {
                    "time": r.time,
                    "pool": r.pool,
                    "gpu_total": r.gpu_total,
                    "gpu_used": r.gpu_used,
                    "gpu_over_quota": r.gpu_over_quota,
                    "gpu_pending": r.gpu_pending,
                    "gpu_busy": r.gpu_busy,
                }
                for r in s.scalars(query.order_by(UsageSample.time, UsageSample.id))
            ]

    def changes(self, n: int = 50) -> list[dict[str, Any]]:
        """The ``n`` latest changes, newest first."""
        query = select(ChangeRecord).order_by(ChangeRecord.time.desc(), ChangeRecord.id.desc())
        with self._read() as s:
            return [
                {"time": r.time, "who": r.who, "what": r.what, "via": r.via}
                for r in s.scalars(query.limit(n))
            ]

    def sessions(
        self,
        *,
        open_only: bool = False,
        since: float | None = None,
        users: Sequence[str] | None = None,
        charged: Sequence[str] | None = None,
        fields: Sequence[str] = SESSION_FIELDS,
    ) -> list[dict[str, Any]]:
        """Server sessions: those still open, or those running at any time after ``since``;
        given ``users`` or ``charged`` subjects, only the sessions of those users or charged to
        those subjects. Each is a dict of ``fields`` (by default all of
        :data:`SESSION_FIELDS`; a report reads the few it sums)."""
        query = _select_sessions(fields)
        if open_only:
            query = query.where(ServerSession.stopped.is_(None))
        if since is not None:
            query = query.where(
                (ServerSession.stopped.is_(None)) | (ServerSession.stopped >= since)
            )
        if users is not None or charged is not None:
            query = query.where(
                ServerSession.user.in_(list(users or ()))
                | ServerSession.charged.in_(list(charged or ()))
            )
        return self._session_rows(query.order_by(ServerSession.started), fields)

    def idle_warnings(self, since: float, n: int = 200) -> list[dict[str, Any]]:
        """The ``n`` latest sessions the idle policy warned at or after ``since``, newest
        warning first, with how they ended (None while they run)."""
        query = (
            _select_sessions(SESSION_FIELDS)
            .where(ServerSession.idle_warned >= since)
            .order_by(ServerSession.idle_warned.desc(), ServerSession.id.desc())
            .limit(n)
        )
        rows = self._session_rows(query, SESSION_FIELDS)
        for row in rows:
            if row["stopped"] is None:
                row["ended"] = None  # how it is to end (session_stopping), not how it ended
        return rows

    def _session_rows(self, query: Select[Any], fields: Sequence[str]) -> list[dict[str, Any]]:
        """The rows of a :func:`_select_sessions` query, as dicts of ``fields``."""
        with self._read() as s:
            return [dict(zip(fields, r, strict=True)) for r in s.execute(query)]

    def queue(self, admitted_since: float | None = None) -> list[dict[str, Any]]:
        """The entries still in line, and those admitted at or after ``admitted_since``, in
        order of arrival (``seq``); the fields of :meth:`queue_add` with ``state`` and
        ``ended``."""
        waiting = QueueEntry.state == "queued"
        if admitted_since is not None:
            waiting = waiting | (
                (QueueEntry.state == "admitted") & (QueueEntry.ended >= admitted_since)
            )
        query = select(QueueEntry).where(waiting).order_by(QueueEntry.seq)
        with self._read() as s:
            return [
                {
                    "id": r.id,
                    "seq": r.seq,
                    "since": r.since,
                    "user": r.user,
                    "groups": json.loads(r.groups),
                    "pools": json.loads(r.pools),
                    "gpus": r.gpus,
                    "gpu_type": r.gpu_type,
                    "server": r.server,
                    "reclaim": r.reclaim,
                    "state": r.state,
                    "ended": r.ended,
                }
                for r in s.scalars(query)
            ]

    def reservations(self, now: float) -> list[dict[str, Any]]:
        """The reservations not expired at ``now`` (dicts of :data:`RESERVATION_FIELDS`), in
        order of expiry."""
        query = (
            select(*(getattr(ReservationRow, f) for f in RESERVATION_FIELDS))
            .where(ReservationRow.expires_at > now)
            .order_by(ReservationRow.expires_at)
        )
        with self._read() as s:
            return [dict(zip(RESERVATION_FIELDS, r, strict=True)) for r in s.execute(query)]

    def read_back(self, now: float, admitted_since: float) -> dict[str, list[dict[str, Any]]]:
        """What the service promised and kept before it (re)started, read in one go: the open
        ``sessions``, the latest ``changes``, the ``reservations`` not expired at ``now``, the
        ``queue`` (entries in line, and those admitted since ``admitted_since``) and the
        ``bookings``. Raises :class:`DatabaseError` when any of them cannot be read."""
        try:
            return {
                "sessions": self.sessions(open_only=True),
                "changes": self.changes(200),
                "reservations": self.reservations(now),
                "queue": self.queue(admitted_since),
                "bookings": self.bookings(),
            }
        except SQLAlchemyError as e:
            raise DatabaseError(
                f"cannot read the database {self.description}: {short_error(e)}"
            ) from e

    def bookings(self) -> list[dict[str, Any]]:
        """Every booking made through the API, by name: the columns of :class:`BookingRow`."""
        fields = ("name", "document", "created_by", "created", "changed_by", "changed")
        query = select(*(getattr(BookingRow, f) for f in fields)).order_by(BookingRow.name)
        with self._read() as s:
            return [dict(zip(fields, r, strict=True)) for r in s.execute(query)]


def _select_sessions(fields: Sequence[str]) -> Select[Any]:
    """The sessions' ``fields`` as columns, not ORM objects: at 20,000 sessions the objects
    took 340 ms, the seven columns a report needs 50."""
    return select(*(getattr(ServerSession, f) for f in fields))
