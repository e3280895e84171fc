"""The service's memory: usage samples, the ledger of server sessions and the change log, kept
in its database (``c.GPUPoolService.db_url``; :mod:`jupyter_gpupool.db`).

Writes are queued to the database's own thread. Two are durable, because an answer promises
them: a reservation (the 201) and a queue entry (the 202). Their futures (:meth:`reserve`,
:meth:`queue_enqueued`) are awaited by the admission desk, outside its lock, before it answers;
every other write is batched after the answer.

What the database kept from before (open sessions, changes, reservations, the line, bookings) is
read back in one go (:meth:`Records.read_back`). A database that does not answer then is tried
again (:mod:`..readback` runs the loop, and the desk admits nothing meanwhile); once read back it
is checked every so often (:meth:`Records.check`), and the pages, the health report and the
history API say what is missing and why (:meth:`Records.status`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ...core.accounting import ledger
from ...core.accounting.budgets import Budget
from ...core.admission.queue import Waiting
from ...core.time.saved_work import SavedReport
from ...core.usage.amounts import amount_text, parse_amount
from ...core.usage.history import parse_range
from ...core.usage.index import UsageIndex
from ...core.usage.reservations import Reservation
from ...core.usage.utilization import PodUtilization, busy_gpus
from ...db.store import RESERVATION_FIELDS, Database, DatabaseError, SchemaTooNew
from .. import clock
from ..admission.entries import entry_of, waiting_from_row
from ..commits import until_committed
from ..errors import ApiError
from ..monitoring.polling import Utilization
from .bookingbook import BookingBook
from .budgetbook import BudgetBook
from .durations import DurationBook
from .ledger import Ledger, ReadPod

log = logging.getLogger(__name__)

#: How often old samples are averaged by the hour and the oldest rows deleted.
PRUNE_EVERY = 3600.0
#: The columns of ``GET api/v1/usage/history``'s rows.
HISTORY_COLUMNS = ("time", "gpu_used", "gpu_total", "gpu_over_quota", "gpu_pending", "gpu_busy")


class StartupRefused(Exception):
    """The database must not be used by this code (its schema is newer)."""


class NotAnswering(Exception):
    """The database did not answer: what it kept is not read back (the message says why)."""


@dataclass(frozen=True)
class Kept:
    """What the database kept from before, for the service to take up (:meth:`Records.read_back`):
    the latest changes (newest first), the reservations not expired, the line's entries."""

    changes: list[dict[str, Any]]
    reservations: list[Reservation]
    queue: list[Waiting]


class Records:
    def __init__(self, db: Database | None, raw_days: float = 7, keep_days: float = 90):
        self.db = db
        self.raw_days = raw_days
        self.keep_days = keep_days
        self.ledger: Ledger | None = None
        #: The sessions budgets count; None without a database (budgets are not enforced)
        self.budgets: BudgetBook | None = None
        self.problem = "" if db is not None else "no database is configured"
        #: The bookings made through the API (kept only with a database)
        self.bookings = BookingBook(db)
        #: How long servers ran, per pool and shape: what wait estimates read
        self.durations = DurationBook(db, keep_days, lambda: clock.now())
        #: Seconds a durable write (a lab's saved work) may take before the answer is a 503
        self.durable_timeout = 5.0
        #: Whether what the database kept was read back (:meth:`read_back`): until then the
        #: service does not know what it promised before
        self.read = False
        #: Why the database's last check failed (:meth:`check`); empty while it answers
        self.not_answering = ""
        self._ping: asyncio.Future[None] | None = None
        self._last_prune = float("-inf")

    @classmethod
    def at(cls, db_url: str, raw_days: float = 7, keep_days: float = 90) -> Records:
        """The records kept in the database at ``db_url`` (``c.GPUPoolService.db_url``); an empty
        URL keeps none. Nothing is opened until :meth:`open`."""
        return cls(Database(db_url) if db_url else None, raw_days, keep_days)

    @property
    def available(self) -> bool:
        return self.db is not None and self.db.engine is not None and not self.problem

    async def read_back(
        self, index: UsageIndex, read_pod: ReadPod, now: float, admitted_since: float
    ) -> Kept:
        """Open the database (upgrading its schema), read back what it kept, and take up the
        open sessions and the stored bookings; what the service takes up itself is returned:
        the changes, the reservations not expired at ``now``, the line's entries (and those
        admitted since ``admitted_since``: their spawner may not have heard it before the
        restart).

        A database that cannot be opened or read raises :class:`NotAnswering` (``problem``
        says why; nothing is taken up, and this may be called again); one newer than this code
        raises :class:`StartupRefused`."""
        db = self.db
        assert db is not None
        try:
            before, after = await asyncio.to_thread(db.open)
        except SchemaTooNew as e:
            self._unread(str(e))
            raise StartupRefused(str(e)) from e
        except DatabaseError as e:
            raise self._unread(str(e)) from None
        try:
            rows = await asyncio.to_thread(db.read_back, now, admitted_since)
        except DatabaseError as e:
            await asyncio.to_thread(db.shut)
            raise self._unread(str(e)) from None
        if before != after:
            log.info("Database %s: schema upgraded from %s to %s", db.description, before, after)
        else:
            log.info("Database %s: schema %s", db.description, after)
        self.ledger = Ledger(db, index, lambda: clock.now())  # patched in tests: read late
        self.budgets = BudgetBook(self._budget_sessions, lambda: clock.now())
        self.ledger.durable_timeout = self.durable_timeout
        self.ledger.on_open = self.budgets.opened
        self.ledger.on_close = self._closed
        await self.ledger.take_up(rows["sessions"], read_pod)
        self.bookings.take_up(rows["bookings"])
        self.problem, self.not_answering, self.read = "", "", True
        reservations = []
        for r in rows["reservations"]:
            text = r.pop("equivalents", None)
            reservations.append(Reservation(**r, equivalents=parse_amount(text) if text else None))
        return Kept(rows["changes"], reservations, [waiting_from_row(r) for r in rows["queue"]])

    def _unread(self, why: str) -> NotAnswering:
        """The database could not be read back: said everywhere it matters."""
        if why != self.problem:
            log.error(
                "%s; until it answers, nothing is admitted, and usage history, GPU-hours and "
                "the change log are not kept",
                why,
            )
        self.problem = why
        self.bookings.unavailable(why)
        return NotAnswering(why)

    async def check(self, timeout: float) -> bool:
        """Whether the database (read back) answers a round trip within ``timeout`` seconds;
        ``not_answering`` says why not. A round trip still out from an earlier check is waited
        for rather than doubled."""
        db = self.db
        if db is None or not self.read:
            return False
        if self._ping is None or self._ping.done():
            self._ping = asyncio.ensure_future(asyncio.to_thread(db.ping))
        try:
            await asyncio.wait_for(asyncio.shield(self._ping), timeout)
        except Exception as e:  # DatabaseError, or late (TimeoutError)
            why = str(e) or f"no answer within {timeout:g} s"
            if not self.not_answering:
                log.error("the database %s is not answering: %s", db.description, why)
            self.not_answering = why
            return False
        if self.not_answering:
            log.info("the database %s answers again", db.description)
        self.not_answering = ""
        return True

    def _closed(self, session: Mapping[str, Any], stopped: float) -> None:
        if self.budgets is not None:
            self.budgets.closed(session, stopped)
        self.durations.closed(session, stopped)

    def _budget_sessions(
        self, since: float, users: Sequence[str], charged: Sequence[str]
    ) -> list[dict[str, Any]]:
        """In the budget book's thread: the sessions of these subjects since ``since``, once
        the writes queued before (sessions the ledger just closed) are in."""
        assert self.db is not None
        self.db.flush()
        return self.db.sessions(since=since, users=users, charged=charged)

    def follow_budgets(self, budgets: Sequence[Budget]) -> None:
        """The registry's budgets (at start, and whenever the registry changes)."""
        if self.budgets is not None and self.ledger is not None:
            self.budgets.follow(budgets, list(self.ledger.open.values()))
        elif budgets:
            log.warning(
                "%d GPU-hour budgets are not enforced: %s",
                len(budgets),
                self.problem or "there is no ledger of server sessions",
            )

    def close(self) -> None:
        if self.db is not None and self.db.engine is not None:
            self.db.close()

    # --- what the service feeds in ---------------------------------------------------------------

    def on_pod(self, event_type: str, pod: Mapping[str, Any]) -> None:
        if self.ledger is not None:
            self.ledger.on_pod(event_type, pod)

    def sample(
        self,
        now: float,
        pools: Iterable[Mapping[str, Any]],
        index: UsageIndex,
        utilization: Utilization | None = None,
    ) -> None:
        """One usage sample per pool (rows of ``GET api/v1/pools``), and the ledger's tick.

        ``gpu_busy``, the GPUs actually busy, comes from ``utilization`` (the service's
        :class:`Utilization`): None without it or its source, or where no server was measured."""
        if self.db is None or self.ledger is None:
            return
        measure: Callable[[str, str], PodUtilization | None] | None = None
        if utilization is not None and utilization.source is not None:
            measure = functools.partial(utilization.of, now=now)
        rows = []
        for row in pools:
            name = row["name"]
            servers = index.servers(name)
            pending = sum(s.gpus for s in servers if s.state == "pending")
            rows.append(
                {
                    "pool": name,
                    "gpu_total": row["gpu_total"],
                    "gpu_used": row["gpu_used"],
                    "gpu_over_quota": row.get("gpu_borrowed") or 0,
                    "gpu_pending": pending,
                    "gpu_busy": None if measure is None else busy_gpus(servers, measure),
                }
            )
        self.db.add_samples(now, rows)
        self.ledger.tick()
        if self.budgets is not None:
            self.budgets.forget_old()
        if now - self._last_prune >= PRUNE_EVERY:
            self._last_prune = now
            self.db.prune(now, self.raw_days, self.keep_days)

    def change(self, when: float, who: str, what: str, via: str) -> None:
        if self.db is not None and self.ledger is not None:
            self.db.add_change(when, who, what, via)

    # --- the fair queue's entries ---------------------------------------------------------------

    def queue_enqueued(self, w: Waiting) -> Future[None] | None:
        """A request put in line: the future of its durable insert."""
        if self.db is not None and self.ledger is not None:
            return self.db.queue_add(entry_of(w), durable=True)
        return None

    def queue_ended(self, admission_id: str, how: str) -> None:
        if self.db is not None and self.ledger is not None:
            self.db.queue_end(admission_id, how, clock.now())

    # --- the admissions' reservations ------------------------------------------------------------

    def reserve(self, r: Reservation) -> Future[None] | None:
        """An admission holds GPUs: the future of its durable insert (None without a
        database: nothing to wait for)."""
        if self.db is not None and self.ledger is not None:
            fields = {f: getattr(r, f) for f in RESERVATION_FIELDS}
            if r.equivalents is not None:
                fields["equivalents"] = amount_text(r.equivalents)
            return self.db.reservation_add(fields)
        return None

    def unreserve(self, r: Reservation) -> None:
        """A reservation was dropped (released, expired, its pod seen): its row goes, batched."""
        if self.db is not None and self.ledger is not None:
            self.db.reservation_drop(r.admission_id)

    # --- work saved before a stop -----------------------------------------------------------------

    async def saved(self, user: str, report: SavedReport) -> dict[str, Any]:
        """``user``'s lab saved ``report.count`` documents of server ``report.server``: kept on
        the server's open session once committed; its fields as the ledger now has them."""
        if not self.available or self.ledger is None:
            raise ApiError(503, f"The ledger is not available: {self.status()}")
        assert self.db is not None
        mine = [
            s
            for s in self.ledger.open.values()
            if s.get("user") == user and s.get("server") == report.server
        ]
        if not mine:
            name = f"server {report.server!r}" if report.server else "default server"
            raise ApiError(404, f"{user} has no {name} running")
        session = max(mine, key=lambda s: float(s.get("started") or 0))
        at = clock.now()
        future = self.db.session_saved(
            str(session["pod_uid"]), report.count, report.paths_json(), at
        )
        try:
            assert future is not None
            await until_committed(future, self.durable_timeout)
        except Exception as e:  # DatabaseError, or late (TimeoutError)
            why = str(e) or f"no commit within {self.durable_timeout:g} s"
            raise ApiError(503, f"the saved work could not be recorded ({why})") from None
        session.update(saved=report.count, saved_at=at, saved_paths=report.paths_json())
        return {
            "user": user,
            "server": report.server,
            "pod": session.get("pod"),
            "saved": report.count,
            "saved_at": at,
            "paths": list(report.paths),
        }

    async def recent_stops(self, user: str, since: float, n: int = 10) -> list[dict[str, Any]]:
        """``user``'s ``n`` latest sessions that ended at or after ``since``, latest first
        (*My GPUs*: how each ended and what its lab saved)."""
        if not self.available:
            raise ApiError(503, f"The ledger is not available: {self.status()}")
        assert self.db is not None
        try:
            rows = await asyncio.to_thread(self.db.sessions, since=since, users=[user])
        except Exception as e:
            raise ApiError(503, f"cannot read the ledger: {e}") from None
        ended = [r for r in rows if r["stopped"] is not None and r["user"] == user]
        return sorted(ended, key=lambda r: r["stopped"], reverse=True)[:n]

    # --- what the pages and the API read ---------------------------------------------------------

    def status(self) -> str:
        """Why history is missing or stale, for the pages; empty when all is well."""
        if self.problem:
            return self.problem
        if self.db is not None and self.not_answering:
            return f"the database {self.db.description} is not answering: {self.not_answering}"
        if self.db is not None and not self.db.healthy:
            return f"the database {self.db.description} is not answering: {self.db.last_error}"
        return ""

    def health(self) -> dict[str, Any]:
        """The database, for ``GET api/v1/health``: whether what it kept was read back, whether
        it answers, whether the writer writes, and its backlog."""
        db = self.db
        return {
            "configured": db is not None,
            "url": db.description if db is not None else None,
            "read_back": self.read,
            "answering": db is not None and self.read and not self.not_answering,
            "writing": db is not None and db.healthy and not self.problem,
            "backlog": db.backlog if db is not None else 0,
            "written": db.written if db is not None else 0,
            "dropped": db.dropped if db is not None else 0,
            "problem": self.status() or None,
        }

    async def idle_warnings(self, since: float) -> list[dict[str, Any]]:
        """The ledger's sessions the idle policy warned since ``since``, latest first, with
        how they ended (``culled``, ``stopped``...; None while they run)."""
        if not self.available:
            raise ApiError(503, f"The ledger is not available: {self.status()}")
        assert self.db is not None
        try:
            return await asyncio.to_thread(self.db.idle_warnings, since)
        except Exception as e:
            raise ApiError(503, f"cannot read the ledger: {e}") from None

    async def gpu_hours(
        self, since: str | None, until: str | None, by: str | None, user: str | None
    ) -> dict[str, Any]:
        """``GET api/v1/reports/gpu-hours``: GPU-equivalent hours per ``by`` (user, group, pool,
        shape) in the window, within and over quota; only ``user``'s own sessions when given."""
        now = clock.now()
        try:
            start, end = ledger.parse_window(since, until, now)
            ledger.gpu_hours([], start, end, by or "user")  # checks ``by``
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        if not self.available:
            raise ApiError(503, f"GPU-hours are not available: {self.status()}")
        assert self.db is not None
        # one user's sessions are picked by the database (its index on user), not out of every
        # session read: at 20,000 servers the My GPUs page took 0.6 s reading them all
        users = None if user is None else [user]
        try:
            sessions = await asyncio.to_thread(
                self.db.sessions, since=start, users=users, fields=ledger.REPORT_FIELDS
            )
        except Exception as e:
            raise ApiError(503, f"cannot read the ledger: {e}") from None
        rows = ledger.gpu_hours(sessions, start, end, by or "user")
        return {
            "since": start,
            "until": end,
            "by": by or "user",
            "columns": list(ledger.REPORT_COLUMNS),
            "rows": rows,
            "total": round(sum(r["gpu_hours"] for r in rows), 4),
            "problem": self.status() or None,
        }

    async def history(self, range_: str | None, pool: str | None) -> dict[str, Any]:
        """``GET api/v1/usage/history``: the samples of the last ``range`` (6h, 24h, 7d, 30d),
        rows of :data:`HISTORY_COLUMNS` (``gpu_busy`` None where nothing was measured)."""
        try:
            seconds = parse_range(range_)
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        if not self.available:
            raise ApiError(503, f"usage history is not available: {self.status()}")
        assert self.db is not None
        now = clock.now()
        try:
            rows = await asyncio.to_thread(self.db.samples, now - seconds, pool)
        except Exception as e:
            raise ApiError(503, f"cannot read usage history: {e}") from None
        pools: dict[str, list[list[float | None]]] = {}
        for r in rows:
            pools.setdefault(r["pool"], []).append([r[c] for c in HISTORY_COLUMNS])
        return {
            "range": range_ or "6h",
            "since": now - seconds,
            "until": now,
            "columns": list(HISTORY_COLUMNS),
            "pools": pools,
            "problem": self.status() or None,
        }
