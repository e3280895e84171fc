"""Re-cutting MIG layouts to demand, at work (rules: :mod:`jupyter_gpupool.core.admission.recut`).

Every round (``RECUT_EVERY`` seconds) the watch, for each pool whose file has a ``recut``
section:

- gathers its nodes as the planner reads them (GFD's product and GPU count, the MIG manager's
  ``nvidia.com/mig.config`` and ``.state``, the pods holding GPUs there and the reservations
  made on them, when the service last changed them, since when nothing used them) and what the
  line waits for in the pool beyond what its nodes offer free;
- asks the planner, and for each re-cut writes, in one patch of the node, the chosen config to
  ``nvidia.com/mig.config``, ``nvidia.com/mig.config.state=pending`` (the MIG manager writes the
  same as it starts; written here too, the node takes no server from this moment on, not only
  once the MIG manager has seen the change), and :data:`RECUT_AT_LABEL` (when) and
  :data:`RECUT_FOR_LABEL` (for which shape). The plan is made outside the admission desk's lock
  (a round over thousands of nodes takes a while); each node is then checked again (no GPU pod,
  no reservation, nothing under way) and patched under it, so no admission lands on the node
  between that check and its patch;
- re-cuts ahead of a booking's window (:mod:`jupyter_gpupool.core.admission.booking_layout`):
  the bookings of the pool in force now or starting within the re-cut's expected duration
  plus :data:`BOOKING_MARGIN` are demand for their shapes; the layout that fits them (chosen
  as the booking desk chose it, nodes free to change now before others) says which nodes to
  cut to which config, and those the planner may change now are re-cut (never one with a GPU pod, the policy's interval kept).
  While the bookings hold them, the line neither re-cuts those nodes nor sends them home;
  once the windows end, the planner's "back again" brings them home as any other;
- follows each re-cut's state to ``success`` or ``failed``: both go in the change log; a failed
  node is left as the MIG manager left it (the planner never touches it again until an admin
  sets a config whose state ends ``success``) and is a problem in the health report.

The line admits the waiting requests as the new instances appear (the watch of nodes kicks
it). Nothing here is a promise: the node's labels say what was asked and when, so a restarted
service knows the interval still runs, and the change log is the record.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...core.admission.booking_fit import Capacity, pool_guarantees
from ...core.admission.booking_layout import (
    Units,
    booking_homes,
    booking_recuts,
    choose_layout,
    needed_at_home,
)
from ...core.admission.queue import Waiting, pools_of
from ...core.admission.recut import SETTLED, NodeCut, Recut, free_to_change, plan
from ...core.documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ...core.pools.recut_policy import (
    CONFIG_LABEL,
    RECUT_AT_LABEL,
    RECUT_FOR_LABEL,
    RecutPolicy,
)
from ...core.time.bookings_in_force import Calendar
from ...core.time.idle import duration_words
from ...core.time.wait_inputs import Coming
from ...core.usage.shapes import MIG_CONFIG_STATE_LABEL, WHOLE, cut_units
from ...core.words.gpu_use import clock_words
from ...core.words.recut_rows import EXPECTED_SECONDS, recuts_under_way
from .. import clock
from ..loops import Loop
from ..records.changelog import ChangeLog
from ..state import ServiceState
from .recutlayouts import layout_of, plain_cut

log = logging.getLogger(__name__)

#: The states after which a re-cut is over
ENDED = ("success", "failed", "superseded")
#: Seconds between two rounds when nothing kicks one
RECUT_EVERY = 2.0
#: How long before a booking's window its nodes are re-cut, beyond what a re-cut is expected
#: to take (:meth:`RecutWatch.expected_seconds`): the device plugin's new resources come a
#: little after the MIG manager's ``success``
BOOKING_MARGIN = 60.0

Patch = Callable[[str, Mapping[str, str | None]], Awaitable[dict[str, Any]]]


@dataclass
class RecutEvent:
    """One re-cut the service asked for, as the pool page, the health report and the change
    log say it."""

    at: float
    pool: str
    node: str
    config: str
    shape: str
    reason: str
    state: str = "pending"  # pending, rebooting, success, failed
    done_at: float | None = None

    def words(self, now: float) -> str:
        head = f"{self.node} re-cut to {self.config} at {clock_words(self.at, now)} {self.reason}"
        if self.reason.startswith("back to"):
            head = f"{self.node} {self.reason} (at {clock_words(self.at, now)})"
        if self.state == "success" and self.done_at is not None:
            return f"{head}: done in {duration_words(self.done_at - self.at)}"
        if self.state == "failed":
            return f"{head}: failed, left as the MIG manager left it"
        return f"{head}: {self.state}"

    def row(self, now: float, iso: Callable[[float], str]) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "node": self.node,
            "config": self.config,
            "shape": self.shape,
            "state": self.state,
            "asked_at": iso(self.at),
            "done_at": iso(self.done_at) if self.done_at is not None else None,
            "words": self.words(now),
        }


class RecutWatch:
    def __init__(
        self,
        state: ServiceState,
        patch: Patch,
        waiting: Callable[[], Iterable[Waiting]],
        changes: ChangeLog,
        *,
        lock: asyncio.Lock | None = None,
        configs: MigConfigs = DEFAULT_CONFIGS,
        interval: float = RECUT_EVERY,
    ):
        self.state = state
        #: Patches a node's labels (the Kubernetes client's), returns the node
        self.patch = patch
        self.waiting = waiting
        self.changes = changes
        self.lock = lock or asyncio.Lock()
        self.configs = configs
        self.events: deque[RecutEvent] = deque(maxlen=50)
        self._unused: dict[str, float] = {}
        self._took: deque[float] = deque(maxlen=10)
        #: the round's time, the calendar then, and per pool the starts within the lead
        self._starts: tuple[float, Calendar, dict[str, list[float]]] | None = None
        #: Whether the re-cuts asked before a restart were taken up from the nodes' labels
        self._taken_up = False
        self.wake = asyncio.Event()
        self.loop = Loop("admission.recut", interval, self.round, wake=self.wake, first=0)

    def kick(self) -> None:
        self.wake.set()

    # --- what the planner reads ------------------------------------------------------------------

    def policies(self) -> list[tuple[str, RecutPolicy]]:
        registry = self.state.registry
        return [(p.name, p.recut) for p in registry.pools.values() if p.recut is not None]

    def asked(self) -> dict[str, Counter[str]]:
        """Per pool and shape id, the requests in line for it (one pass over the line; a
        request counts once per pool, for its first choice there; whole GPUs count as GPUs)."""
        base = self.state.admission_state()
        out: dict[str, Counter[str]] = {}
        for w in self.waiting():
            req = w.request
            if not req.gpus:
                continue
            seen: set[str] = set()
            for name, shape in req.choices(req.pools or pools_of(req, base)):
                if name not in seen:
                    seen.add(name)
                    out.setdefault(name, Counter())[shape or WHOLE] += 1 if shape else req.gpus
        return out

    def wanted(self, pool: str, asked: Counter[str] | None = None) -> Counter[str]:
        """Per shape id, the requests in line for it in ``pool`` (:meth:`asked`) beyond its
        free units, less what reservations hold."""
        if asked is None:
            asked = self.asked().get(pool, Counter())
        if not asked:
            return Counter()
        index, held = self.state.index, self.state.reservations
        free = Counter({c.shape.id: c.free for c in index.shape_counts(pool)})
        for node, units in held.pool_nodes(pool).items():  # admitted, their pods not seen yet
            count = index.node_gpu_shape(node)
            if count is not None:
                free[count.shape.id] -= units
        for (node, resource), units in held.pool_units(pool).items():
            found = index.node_unit_count(node, resource)
            if found is not None:
                free[found[0].shape.id] -= units
        return Counter({s: n - free[s] for s, n in asked.items() if n > free[s]})

    def node_cut(self, pool: str, name: str, now: float) -> NodeCut | None:
        index = self.state.index
        # the index's cheap lookups, not index.node(name): a round reads every node a policy
        # names, and a node's whole row (reasons, parts) is built for pages
        card = plain_cut(index, name)  # its card and config, as bookings' layouts read them
        if card is None:  # not a node the index knows
            return None
        labels = index.node_labels(name)
        reservations = self.state.reservations
        reserved = reservations.pool_nodes(pool).get(name, 0) + sum(
            n for (node, _), n in reservations.pool_units(pool).items() if node == name
        )
        pods = index.node_gpu_pods(name) + reserved
        last = _number(labels.get(RECUT_AT_LABEL))
        if pods:
            self._unused.pop(name, None)
            unused = None
        else:
            unused = max(self._unused.setdefault(name, now), last or float("-inf"))
        return replace(
            card,
            gpu_pods=pods,
            # a node the MIG manager is re-cutting takes no servers, but is not cordoned for it
            schedulable=index.node_group(name) is not None or (card.state or "") not in SETTLED,
            last_change=last,
            unused_since=unused,
        )

    def expected_seconds(self) -> float:
        """What the next re-cut should take: the mean of the last ones seen, else a default."""
        return sum(self._took) / len(self._took) if self._took else EXPECTED_SECONDS

    def coming(self, now: float) -> list[Coming]:
        """What re-cuts will bring, for the wait estimates: each under way (its node's labels
        say the config and the MIG manager's state) at its asking time plus
        :meth:`expected_seconds`, each the planner would ask for now at now plus that. A node
        that cannot be re-cut yet (a GPU pod on it, its interval not passed) brings nothing."""
        expected = self.expected_seconds()
        registry, index = self.state.registry, self.state.index
        out: list[Coming] = []
        asked: dict[str, Counter[str]] | None = None
        for name, policy in self.policies():
            pool = registry.pool(name)
            if pool is None:
                continue
            for r in recuts_under_way(pool, index, self.configs):
                at = (now if r["asked_at"] is None else r["asked_at"]) + expected
                out.extend(_coming(name, r["node"], r["brings"], at))
            if asked is None:
                asked = self.asked()
            if name not in asked:
                continue
            for cut in self.pool_plans(name, policy, asked[name], now):
                got = cut_units(index.node_labels(cut.node), cut.config, self.configs) or {}
                out.extend(_coming(name, cut.node, got, now + expected))
        return out

    def under_way(self, pool: str | None = None) -> list[RecutEvent]:
        """The re-cuts asked and not ended yet (of ``pool`` when given)."""
        return [e for e in self.events if e.state not in ENDED and (pool is None or e.pool == pool)]

    # --- the round -------------------------------------------------------------------------------

    def plans(self, now: float) -> list[tuple[str, Recut]]:
        """The re-cuts to ask for now, per pool (the planner's answers; nothing written)."""
        asked = self.asked()
        return [
            (pool, cut)
            for pool, policy in self.policies()
            for cut in self.pool_plans(pool, policy, asked.get(pool, Counter()), now)
        ]

    def pool_plans(
        self, pool: str, policy: RecutPolicy, asked: Counter[str], now: float
    ) -> list[Recut]:
        """One pool's re-cuts. A pool whose line wants nothing and whose nodes are all home is
        passed over at the cost of a label lookup per node."""
        index = self.state.index
        wanted = self.wanted(pool, asked)
        booked = self.booked(pool, now)
        if (
            not wanted
            and not booked
            and all(
                (index.node_labels(n).get(CONFIG_LABEL) or policy.home) == policy.home
                for n in policy.nodes
            )
        ):
            return []
        nodes = [n for name in policy.nodes if (n := self.node_cut(pool, name, now))]
        cuts, keep = self.booking_plans(pool, policy, nodes, booked, now) if booked else ([], ())
        return cuts + plan(policy, self.configs, nodes, wanted, now, keep=frozenset(keep))

    def booked(self, pool: str, now: float) -> dict[str, tuple[int, list[tuple[str, float]]]]:
        """Per shape id, the most units ``pool``'s bookings hold at once from now until the
        re-cut's expected duration and :data:`BOOKING_MARGIN` from now, with the bookings
        (name, start of their window)."""
        calendar = self.state.calendar
        if pool not in calendar.pools:
            return {}
        moments = [now, *self._starting(now).get(pool, [])]
        out: dict[str, tuple[int, list[tuple[str, float]]]] = {}
        for t in moments:
            held: Counter[str] = Counter()
            who: dict[str, list[tuple[str, float]]] = {}
            for w in calendar.in_force(pool, t):
                held[w.booking.shape] += w.booking.gpus
                who.setdefault(w.booking.shape, []).append((w.booking.name, w.occurrence.start))
            for shape, n in held.items():
                if n > out.get(shape, (0, []))[0]:
                    out[shape] = (n, who[shape])
        return out

    def _starting(self, now: float) -> dict[str, list[float]]:
        """Per pool, the starts of the windows starting within the lead from ``now``: listed
        once per round (the calendar's ``starting`` reads every window it holds)."""
        calendar = self.state.calendar
        if self._starts is None or self._starts[:2] != (now, calendar):
            lead = self.expected_seconds() + BOOKING_MARGIN
            found: dict[str, list[float]] = {}
            for w in calendar.starting(now, now + lead):
                found.setdefault(w.booking.pool, []).append(w.occurrence.start)
            self._starts = (now, calendar, found)
        return self._starts[2]

    def booking_plans(
        self,
        pool: str,
        policy: RecutPolicy,
        nodes: list[NodeCut],
        booked: dict[str, tuple[int, list[tuple[str, float]]]],
        now: float,
    ) -> tuple[list[Recut], list[str]]:
        """The re-cuts that bring ``pool`` to the layout its bookings need (``booked``): the
        nodes it cuts away from home, and those cut otherwise now that it needs at home; and
        the nodes the bookings hold, kept from the line's re-cuts and from going home (those
        it cuts, and those at home it could not do without)."""
        by_name = {n.name: n for n in nodes}
        layout = layout_of(
            self.state,
            pool,
            policy,
            self.configs,
            cut=by_name.get,
            free=lambda n: free_to_change(policy, n, now),
        )
        counts = self.state.index.shape_counts(pool)
        present = layout.present
        fixed = {c.shape.id: max(0, c.total - present.get(c.shape.id, 0)) for c in counts}
        equivalent = Capacity(equivalents={c.shape.id: c.shape.equivalent for c in counts})
        guaranteed = pool_guarantees(self.state.registry.pool_quotas).get(pool, 0)
        demand = {s: n for s, (n, _) in booked.items()}
        choice = choose_layout(layout, fixed, demand, guaranteed, equivalent.equivalent)

        def reason(units: Units) -> tuple[str, int, str]:
            shape = max(booked, key=lambda s: (units.get(s, 0), s))
            n, who = booked[shape]
            names = ", ".join(sorted({name for name, _ in who}))
            start = min(t for _, t in who)
            what = "whole GPUs" if shape == WHOLE else shape.removeprefix("mig-") + " instances"
            when = clock_words(start, now)
            return shape, n, f"for booking {names}: {n} {what} from {when}"

        cuts = booking_recuts(policy, layout, nodes, choice, now, reason)
        cuts += booking_homes(
            policy,
            layout,
            nodes,
            choice,
            fixed,
            demand,
            guaranteed,
            equivalent.equivalent,
            now,
            reason,
        )
        held = needed_at_home(layout, choice, demand, guaranteed, equivalent.equivalent)
        return cuts, [name for name, _ in choice.cuts] + held

    async def round(self) -> None:
        """Plan pool by pool outside the admission desk's lock, letting the event loop answer
        between two pools (a round over thousands of nodes takes a while); then, node by node
        under the lock, check again that the node is still free to change (no GPU pod, no
        reservation, nothing under way) and patch it: no admission lands on a node between
        that check and its patch, and none waits for a whole round."""
        self.wake.clear()
        now = clock.now()
        if not self._taken_up:
            self.take_up(now)
        self._follow(now)
        policies = self.policies()
        if not policies:
            return
        asked = self.asked()
        cuts: list[tuple[str, Recut]] = []
        for pool, policy in policies:
            cuts.extend(
                (pool, c) for c in self.pool_plans(pool, policy, asked.get(pool, Counter()), now)
            )
            await asyncio.sleep(0)
        for pool, cut in cuts:
            async with self.lock:
                again = self.node_cut(pool, cut.node, now)
                if again is None or again.gpu_pods or again.busy:
                    continue  # taken meanwhile: the next round plans again
                await self._recut(pool, cut, now)

    async def _recut(self, pool: str, cut: Recut, now: float) -> None:
        labels: dict[str, str | None] = {
            CONFIG_LABEL: cut.config,
            MIG_CONFIG_STATE_LABEL: "pending",
            RECUT_AT_LABEL: str(int(now)),
            RECUT_FOR_LABEL: cut.shape,
        }
        try:
            node = await self.patch(cut.node, labels)
        except Exception as e:  # the API server: tried again next round
            log.warning("cannot re-cut node %s to %s: %s", cut.node, cut.config, e)
            return
        if isinstance(node, dict) and node.get("metadata"):
            self.state.index.apply_node("MODIFIED", node)
        event = RecutEvent(now, pool, cut.node, cut.config, cut.shape, cut.reason)
        self.events.append(event)
        self._unused.pop(cut.node, None)
        log.info("Re-cutting node %s of %s to %s %s", cut.node, pool, cut.config, cut.reason)
        self.changes.record("service", "gpupool", event.words(now), via="re-cut")

    def take_up(self, now: float) -> None:
        """The re-cuts an earlier run of the service asked for (the labels it wrote on the
        policies' nodes: when, for what shape, and the MIG manager's state), followed as if
        asked now: one under way ends in the change log, one that failed stays a problem, and
        the last one's time keeps the node's ``interval``."""
        self._taken_up = True
        index, known = self.state.index, {e.node for e in self.events}
        for pool, policy in self.policies():
            for name in policy.nodes:
                labels = index.node_labels(name)
                at, config = _number(labels.get(RECUT_AT_LABEL)), labels.get(CONFIG_LABEL)
                state = labels.get(MIG_CONFIG_STATE_LABEL) or ""
                if name in known or at is None or not config or state == "success":
                    continue
                shape = labels.get(RECUT_FOR_LABEL) or ""
                taken = "taken up after the service restarted"
                reason = f"back to whole GPUs, {taken}" if shape == WHOLE else f"({taken})"
                event = RecutEvent(at, pool, name, config, shape, reason, state or "pending")
                self.events.append(event)
                log.info("Following the re-cut of node %s to %s (%s)", name, config, event.state)

    def _follow(self, now: float) -> None:
        """Each re-cut under way that the MIG manager ended: in the change log, once."""
        index = self.state.index
        for event in self.under_way():
            labels = index.node_labels(event.node)
            if labels.get(CONFIG_LABEL) != event.config:
                event.state, event.done_at = "superseded", now  # another config was asked since
                continue
            state = labels.get(MIG_CONFIG_STATE_LABEL) or ""
            if state == event.state or state not in ("pending", "rebooting", "success", "failed"):
                continue
            event.state = state
            if state in ("success", "failed"):
                event.done_at = now
                if state == "success":
                    self._took.append(now - event.at)
                    self.state.recut_seconds = self.expected_seconds()  # the pool rows' too
                self.changes.record("service", "gpupool", event.words(now), via="re-cut")
                log.log(
                    logging.INFO if state == "success" else logging.WARNING,
                    "%s",
                    event.words(now),
                )

    # --- what the pages and the health report show -----------------------------------------------

    def rows(
        self,
        now: float,
        iso: Callable[[float], str],
        pool: str | None = None,
        latest: bool = False,
    ) -> list[dict[str, Any]]:
        """The re-cuts asked for, newest first (``pool``'s only when given; with ``latest``,
        only each node's last)."""
        seen: set[str] = set()
        out = []
        for e in reversed(self.events):
            if (pool is not None and e.pool != pool) or (latest and e.node in seen):
                continue
            seen.add(e.node)
            out.append(e.row(now, iso))
        return out

    def problems(self, now: float) -> list[str]:
        """A node the service re-cut whose MIG manager failed, or that is pending too long."""
        out = []
        late = max(10 * self.expected_seconds(), 600.0)
        latest: dict[str, RecutEvent] = {}
        for e in self.events:
            latest[e.node] = e
        for e in latest.values():
            if e.state == "failed":
                out.append(
                    f"re-cutting {e.node} to {e.config} failed (nvidia.com/mig.config.state)"
                )
            elif e.done_at is None and now - e.at > late:
                out.append(
                    f"re-cutting {e.node} to {e.config} has not ended for {now - e.at:.0f} s"
                )
        return out


def _coming(pool: str, node: str, brings: Mapping[str, int], at: float) -> list[Coming]:
    out = []
    for shape, units in brings.items():
        if shape == WHOLE:
            out.append(Coming(pool, None, units, at, f"{node} goes back to whole GPUs", node))
        else:
            what = shape.removeprefix("mig-")
            out.append(Coming(pool, shape, units, at, f"{node} is re-cut into {what} instances"))
    return out


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
