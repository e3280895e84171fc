"""How long servers ran, per pool and shape, over ``history_days``: what wait estimates read
(rules: :mod:`jupyter_gpupool.core.time.wait_estimate`).

Loaded from the ledger's ended sessions off the event loop by its loop (``records.durations``)
as the service starts, and again every :data:`REFRESH` seconds (sessions older
than ``history_days`` drop out, and those the database got otherwise come in), and told of
each session the ledger closes meanwhile (:meth:`DurationBook.closed`), so the line's
estimates never wait for the database.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...core.time.wait_estimate import History
from ...db.store import Database
from ..loops import Loop

log = logging.getLogger(__name__)

#: Seconds between two loads of the durations from the database.
REFRESH = 3600.0
DAY = 86400.0

Key = tuple[str, "str | None"]


def durations_of(sessions: Iterable[Mapping[str, Any]], since: float) -> dict[Key, list[float]]:
    """The ended sessions' durations (sorted) per ``(pool, shape)``, those stopped at or after
    ``since``; sessions without a pool or a GPU are left out."""
    out: dict[Key, list[float]] = {}
    for s in sessions:
        stopped, pool = s.get("stopped"), s.get("pool")
        if stopped is None or pool is None or stopped < since:
            continue
        if not s.get("shape") and not s.get("gpus"):
            continue  # no GPU: not what a request in line waits for
        out.setdefault((str(pool), s.get("shape") or None), []).append(
            max(0.0, float(stopped) - float(s["started"]))
        )
    for values in out.values():
        values.sort()
    return out


class DurationBook:
    def __init__(self, db: Database | None, days: float, now: Callable[[], float]):
        self.db = db
        self.days = days
        self.now = now
        self.durations: dict[Key, list[float]] = {}
        #: Its loads: the first as the service starts it with the others, then every REFRESH s
        self.loop = Loop("records.durations", REFRESH, self.load, first=0)

    async def load(self) -> None:
        """Read the ended sessions of the last ``days`` from the database, off the loop."""
        if self.db is None or self.db.engine is None:
            return
        since = self.now() - self.days * DAY
        db = self.db

        def read() -> list[dict[str, Any]]:
            db.flush()  # the sessions the ledger just closed are in
            return db.sessions(since=since, fields=("pool", "shape", "gpus", "started", "stopped"))

        rows = await asyncio.to_thread(read)
        self.durations = durations_of(rows, since)
        log.info(
            "Wait estimates read %d ended sessions of the last %g days",
            sum(len(v) for v in self.durations.values()),
            self.days,
        )

    def closed(self, session: Mapping[str, Any], stopped: float) -> None:
        """The ledger closed a session: its duration counts from now."""
        pool = session.get("pool")
        if pool is None or (not session.get("shape") and not session.get("gpus")):
            return
        key = (str(pool), session.get("shape") or None)
        bisect.insort(
            self.durations.setdefault(key, []), max(0.0, stopped - float(session["started"]))
        )

    def history(self) -> History:
        return History(self.durations, self.days)
