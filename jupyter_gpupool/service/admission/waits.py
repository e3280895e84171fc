"""Wait estimates for the line's rows (rules: :mod:`jupyter_gpupool.core.time.wait_estimate`).

Gathers what the service knows now: the line in its order, the servers that hold GPUs in each
pool with their start (the pods' creation, as the ledger's sessions start), the reservations
(held from now), the free units per pool and shape (reservations taken off), what will end a
server for sure (:attr:`WaitEstimates.sure_end`: the idle policy's stop once it warned, a
notice's deadline), and the durations the ledger keeps (:mod:`..records.durations`). One
walk gives every entry its estimate; it is kept for :data:`KEEP` seconds, or until the line
or the usage changes, so a listing of the line walks it once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from ...core.accounting.ledger import parse_time
from ...core.admission.decision import AdmissionState
from ...core.admission.queue import Waiting, pools_of
from ...core.time.notices import STOP, Notice
from ...core.time.wait_estimate import Ask, Estimate, Held, History, estimate
from ...core.usage.rows import ServerUsage
from ...core.usage.shapes import WHOLE
from .. import clock

if TYPE_CHECKING:
    from .line import Line

log = logging.getLogger(__name__)

#: Seconds an estimate is reused when nothing changed (the line, the usage)
KEEP = 5.0

#: What ends a server for sure: its deadline and why in words (``an idle stop``), or None.
SureEnd = Callable[[ServerUsage], "tuple[float, str] | None"]


#: A notice's kind as the reason it ends a server, in words
NOTICE_WHY = {
    "idle": "an idle stop",
    "runtime": "a runtime limit",
    "budget": "a spent budget",
    "booking": "a booking's window",
}


def no_sure_end(server: ServerUsage) -> tuple[float, str] | None:
    return None


def sure_end_of(notices: Iterable[Notice | None]) -> tuple[float, str] | None:
    """The earliest stop the notices of a server announce with a deadline, and why."""
    found = [
        (n.deadline, NOTICE_WHY.get(n.kind, "a known stop"))
        for n in notices
        if n is not None and n.action == STOP and n.deadline is not None
    ]
    return min(found) if found else None


class WaitEstimates:
    def __init__(self, line: Line, history: Callable[[], History]):
        self.line = line
        self.state = line.state
        self.history = history
        self.sure_end: SureEnd = no_sure_end
        self._kept: tuple[tuple[object, ...], dict[str, Estimate]] | None = None
        self._asks: dict[str, tuple[Waiting, object, Ask]] = {}

    def of(self) -> Mapping[str, Estimate]:
        """Each waiting entry's estimate."""
        now = clock.now()
        line, index = self.line, self.state.index
        key = (
            line.seq,
            line.at.version,
            len(line.waiting),
            len(index),
            len(self.state.reservations),
        )
        if self._kept is not None and self._kept[0][:-1] == key:
            at = self._kept[0][-1]
            if isinstance(at, float) and 0 <= now - at < KEEP:
                return self._kept[1]
        try:
            found = self._walk(now)
        except Exception:  # an estimate is advice: the line's answers go on without one
            log.exception("Wait estimates failed; the line is shown without them")
            found = {}
        self._kept = ((*key, now), found)
        return found

    def _ask(self, w: Waiting, base: AdmissionState) -> Ask:
        """What an entry asks for, as the estimate reads it (kept while it waits: it reads
        only the request, and the registry's default pools for one without pools)."""
        kept = self._asks.get(w.id)
        if kept is not None and kept[0] is w and kept[1] is base.registry:
            return kept[2]
        ask = Ask(w.id, tuple(w.request.choices(pools_of(w.request, base))), w.request.gpus)
        if len(self._asks) > 2 * len(self.line.waiting) + 100:  # those gone from the line
            self._asks = {i: a for i, a in self._asks.items() if i in self.line.waiting}
        self._asks[w.id] = (w, base.registry, ask)
        return ask

    def _walk(self, now: float) -> dict[str, Estimate]:
        state, index = self.state, self.state.index
        base = state.admission_state()
        asks = [self._ask(w, base) for w in self.line.ranked()]
        pools = {p for a in asks for p, _ in a.choices}
        held = []
        for s in (s for pool in pools for s in index.servers(pool)):
            if s.pool is None or not (s.gpus or s.units):
                continue
            sure = (now, "a stop under way") if s.state == "terminating" else self.sure_end(s)
            started = parse_time(s.created) or now
            units = s.gpus if not s.shape else max(s.units, 1)
            end, why = sure or (None, "")
            held.append(Held(s.pool, s.shape, units, started, end, why, s.node))
        for r in state.reservations:
            if r.pool in pools:
                held.append(Held(r.pool, r.shape, r.gpus, now, node=r.node))
        free: dict[tuple[str, str | None, str | None], int] = {}
        for pool in pools:
            reserved = state.reservations.pool_nodes(pool)
            for n in index.node_names(pool):
                free[(pool, None, n)] = max(0, index.node_free(n) - reserved.get(n, 0))
            held_units = state.reservations.pool_units(pool)
            for c in index.shape_counts(pool):
                if c.shape.id == WHOLE:
                    continue
                taken = sum(u for (_, res), u in held_units.items() if res == c.shape.resource)
                free[(pool, c.shape.id, None)] = max(0, c.free - taken)
        return estimate(asks, held, free, self.history(), now)
