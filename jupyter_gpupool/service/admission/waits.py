"""Wait estimates for the line's rows (rules: :mod:`jupyter_gpupool.core.time.wait_estimate`).

Gathers what the service knows now: the line in its order, each entry's pools (those it may
use) with how quota lets it in (:func:`~...core.admission.wait_terms.terms`), the servers that
hold GPUs in each pool with their start (the pods' creation, as the ledger's sessions start)
and the quota counters they count against, the reservations (held from now), the free units
per pool and shape (reservations taken off), what will end a
server for sure (:attr:`WaitEstimates.sure_end`: the idle policy's stop once it warned, a
notice's deadline), what MIG re-cuts will bring and when (:attr:`WaitEstimates.coming`), and
the durations the ledger keeps (:mod:`..records.durations`). One
walk gives every entry its estimate; it is kept for :data:`KEEP` seconds, or until the line
or the usage changes, so a listing of the line walks it once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ...core.accounting.ledger import parse_time
from ...core.admission.decision import AdmissionState
from ...core.admission.queue import Waiting, pools_of
from ...core.admission.wait_terms import counters, terms
from ...core.time.notices import STOP, Notice
from ...core.time.wait_estimate import Ask, Coming, Estimate, Held, History, estimate
from ...core.usage.index import UsageIndex
from ...core.usage.reservations import Reservations
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
        #: What MIG re-cuts will bring, at ``now`` (:meth:`.recutwatch.RecutWatch.coming`)
        self.coming: Callable[[float], Sequence[Coming]] = lambda now: ()
        self._kept: tuple[tuple[object, ...], dict[str, Estimate]] | None = None
        self._asks: dict[str, tuple[Waiting, object, tuple[int, int], Ask]] = {}

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
        """What an entry asks for, as the estimate reads it (kept while it waits and nothing
        it is charged by changed: its request, the registry and, for an entry asking for a
        shape, the reservations' and the usage's counts: what a unit of a shape weighs
        against quota follows the nodes that offer it, a whole GPU's does not)."""
        shaped = any(w.request.shapes)
        mark = (len(self.state.index), len(self.state.reservations)) if shaped else (0, 0)
        kept = self._asks.get(w.id)
        if kept is not None and kept[0] is w and kept[1] is base.registry and kept[2] == mark:
            return kept[3]
        ask = ask_of(w, base)
        if len(self._asks) > 2 * len(self.line.waiting) + 100:  # those gone from the line
            self._asks = {i: a for i, a in self._asks.items() if i in self.line.waiting}
        self._asks[w.id] = (w, base.registry, mark, ask)
        return ask

    def _walk(self, now: float) -> dict[str, Estimate]:
        state = self.state
        base = state.admission_state()
        asks = [self._ask(w, base) for w in self.line.ranked()]
        held, free = holding(asks, state.index, state.reservations, now, self.sure_end)
        coming = self.coming(now)
        return estimate(asks, held, free, self.history(), now, coming=coming)


def ask_of(w: Waiting, base: AdmissionState) -> Ask:
    """An entry as the estimate reads it: its pools (and shapes) in order, the pools it may use,
    and how quota lets it into each (:func:`~...core.admission.wait_terms.terms`)."""
    req = w.request
    choices = [
        (p, sh)
        # its own list keeps its shapes (pools_of's copy of it would drop them)
        for p, sh in req.choices(req.pools or pools_of(req, base))
        if (pool := base.registry.pool(p)) is None or pool.allows(req.user, req.groups)
    ]
    return Ask(
        w.id,
        tuple(choices),
        req.gpus,
        tuple(terms(req, p, sh, base) for p, sh in choices),
    )


def holding(
    asks: Iterable[Ask],
    index: UsageIndex,
    reservations: Reservations,
    now: float,
    sure_end: SureEnd = no_sure_end,
    started_of: Callable[[ServerUsage], float | None] = lambda s: parse_time(s.created),
) -> tuple[list[Held], dict[tuple[str, str | None, str | None], int]]:
    """What the estimate reads of the pools the ``asks`` list: the servers and reservations
    that hold GPUs there (with their quota counters), and the units free per pool, shape and
    node (whole GPUs per node, shapes per pool; reservations taken off). A server started at
    its pod's creation (``started_of``), as the ledger's sessions start."""
    pools = {p for a in asks for p, _ in a.choices}
    held = []
    for s in (s for pool in pools for s in index.servers(pool)):
        if s.pool is None or not (s.gpus or s.units):
            continue
        sure = (now, "a stop under way") if s.state == "terminating" else sure_end(s)
        started = started_of(s) or now
        units = s.gpus if not s.shape else max(s.units, 1)
        end, why = sure or (None, "")
        charged, amount = counters(s)
        held.append(Held(s.pool, s.shape, units, started, end, why, s.node, charged, amount))
    for r in reservations:
        if r.pool in pools:
            charged, amount = counters(r)
            held.append(Held(r.pool, r.shape, r.gpus, now, None, "", r.node, charged, amount))
    free: dict[tuple[str, str | None, str | None], int] = {}
    for pool in pools:
        reserved = reservations.pool_nodes(pool)
        for n in index.node_names(pool):
            # whole GPUs: on the nodes that take servers, whose nvidia.com/gpu units are GPUs
            # (not a shared GPU's replicas or MIG devices: those are shapes)
            if index.node_group(n) is not None and index.node_gpus_whole(n):
                free[(pool, None, n)] = max(0, index.node_free(n) - reserved.get(n, 0))
        held_units = reservations.pool_units(pool)
        for c in index.shape_counts(pool):
            if c.shape.id == WHOLE:
                continue
            taken = sum(u for (_, res), u in held_units.items() if res == c.shape.resource)
            free[(pool, c.shape.id, None)] = max(0, c.free - taken)
    return held, free
