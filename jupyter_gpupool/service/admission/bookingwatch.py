"""Bookings' windows at work while servers run (rules: :mod:`jupyter_gpupool.core.time.bookings_in_force`).

Every round (``booking_interval``, and at once when a window starts) the watch

- **warns**, from ``booking_warning`` seconds before a window starts, the borrowers that would be
  stopped if it started now (a ``booking`` notice with the start as deadline), and, before a
  window ends, the servers admitted within it (they borrow from then on);
- **stops at the start**, through the hub, the borrowers from before the window's start that
  hold the units the bookings in force keep, newest first (their ledger entries say
  ``reclaimed``); a server is asked once, and again if it still runs a minute later;
- **kicks the line** when a window starts or ends, so a member waiting for it is admitted at
  its start, in the fair order among members.

Nothing here is a promise: the bookings themselves are stored (files, the database), and the
warnings are worked out again from them after a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace

from ...core.admission.booking_charge import booking_ledger
from ...core.admission.decision import AdmissionRequest, Context
from ...core.time.bookings_in_force import InForce, ShapeLedger, booking_of, to_free
from ...core.time.notices import REPORT, STOP, Notice
from ...core.usage.rows import ServerUsage
from ...core.words.gpu_use import clock_words
from .. import clock
from ..loops import Loop
from ..state import ServiceState
from ..stopasks import StopAsks

log = logging.getLogger(__name__)

Key = tuple[str, str]


class BookingWatch:
    def __init__(
        self,
        state: ServiceState,
        stop: Callable[[ServerUsage], Awaitable[None]],
        *,
        warning: float = 600.0,
        interval: float = 2.0,
        kick: Callable[[], None] | None = None,
    ):
        self.state = state
        #: Stops one server through the hub (the desk's ``stop_server``), awaited
        self.stop = stop
        self.warning = warning
        self.kick = kick
        #: Told of each server stopped at a window's start, and awaited before the stop is
        #: asked of the hub (the ledger records durably that it is reclaimed)
        self.on_stop: Callable[[ServerUsage], Awaitable[None]] | None = None
        self.notices: dict[Key, Notice] = {}
        self._asked = StopAsks()
        self._last: float | None = None
        self.loop = Loop("bookings.windows", interval, self.round, first=0)

    def notice(self, server: ServerUsage, now: float) -> Notice | None:
        """The booking notice of ``server``, if any (a provider for the notice board)."""
        return self.notices.get((server.namespace, server.name))

    def _ledgers(
        self, pool: str, now: float, windows: list[InForce]
    ) -> Iterator[tuple[str, ShapeLedger]]:
        state = replace(self.state.admission_state(), now=now)
        ctx = Context(AdmissionRequest(user=""), state)
        for shape in sorted({w.booking.shape for w in windows}):
            ledger = booking_ledger(ctx, pool, None if shape == "whole" else shape)
            if ledger is not None:
                yield shape, ledger

    def victims(self, now: float) -> list[tuple[ServerUsage, InForce]]:
        """The borrowers from before a window in force began that hold its units now."""
        calendar = self.state.calendar
        out: list[tuple[ServerUsage, InForce]] = []
        for pool in sorted(calendar.pools):
            windows = calendar.in_force(pool, now)
            if not windows:
                continue
            servers = self.state.index.servers(pool=pool)
            for shape, ledger in self._ledgers(pool, now, windows):
                mine = [w for w in windows if w.booking.shape == shape]
                latest = max(mine, key=lambda w: w.occurrence.start)
                out.extend((s, latest) for s in to_free(ledger, servers, latest.occurrence.start))
        return out

    def _warnings(self, now: float) -> dict[Key, Notice]:
        calendar = self.state.calendar
        found: dict[Key, Notice] = {}
        for w in calendar.starting(now, now + self.warning):
            start = w.occurrence.start
            pool = w.booking.pool
            windows = calendar.in_force(pool, start)
            servers = [s for s in self.state.index.servers(pool=pool) if s.state != "terminating"]
            for shape, ledger in self._ledgers(pool, start, windows):
                if shape != w.booking.shape:
                    continue
                for s in to_free(ledger, servers, start):
                    found.setdefault(
                        (s.namespace, s.name),
                        Notice(
                            "booking",
                            f"this server borrows GPUs booked for {w.booking.name} from "
                            f"{clock_words(start, now)}: it is stopped then",
                            start,
                            STOP,
                        ),
                    )
        for w in calendar.ending(now, now + self.warning):
            end = w.occurrence.end
            for s in self.state.index.servers(pool=w.booking.pool):
                if booking_of(s.charged) == w.booking.name and s.state != "terminating":
                    found.setdefault(
                        (s.namespace, s.name),
                        Notice(
                            "booking",
                            f"booking {w.booking.name} ends at {clock_words(end, now)}: this server "
                            "then borrows its GPUs and may be stopped when others need them",
                            end,
                            REPORT,
                        ),
                    )
        return found

    async def round(self) -> None:
        now = clock.now()
        calendar = self.state.calendar
        last = self._last if self._last is not None else now - 1.0
        self._last = now
        if not len(calendar):
            self.notices = {}
            return
        if self.kick is not None and (calendar.starting(last, now) or calendar.ending(last, now)):
            self.kick()
        victims = [(s, w) for s, w in self.victims(now) if self._asked.due(s, now)]
        for s, w in victims:
            log.info(
                "Booking %s (%s) starts: stopping %s/%s, which borrows its GPUs",
                w.booking.name,
                w.occurrence.words(),
                s.namespace,
                s.name,
            )
            if self.on_stop is not None:
                await self.on_stop(s)
        for s, _ in victims:
            await self.stop(s)
        self.notices = self._warnings(now)
