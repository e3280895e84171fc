"""A day of sessions replayed on gpupool's pure core with a moved clock (``bench_density.py``).

No service, no HTTP, no sleeps: events (arrivals, ends, retries, users giving up, utilization
polls) are taken from a heap in time order, and each is applied the way the service applies
it. An admission is ``core.admission.walk.decide`` over a ``core.usage.index.UsageIndex`` fed the demo
cluster's Node objects and ``core.usage.reservations.Reservations``; the admitted server's pod then
appears in the index as the watch would show it (bound to the decided node, with the
decision's overrides' labels, annotations and resources), which drops its reservation; it
vanishes when the session ends or the idle policy stops it. A session on a slice runs on its
slice's clock (``Session.on_slice``: slower while it wants more than the slice), and a user whose
server the idle policy stopped asks again at their next busy moment (``Session.rest``;
``returns=True``), as ``density_workload.py`` says. The line is ``core.admission.queue``'s
order and passes, run as the service's line runs them (a pass whenever GPUs come free), and the
idle policy is ``core.time.idle``'s clock fed one measurement per server every ``poll`` seconds.

The replay keeps its own ledger, apart from the index: per node and resource, the units held
now and at most, against the node's allocatable (the smoke test checks no node was
over-committed), per session how it ended, and per return (a user back after an idle stop) how
that ended.

What the service does that is left out: reclaiming borrowed GPUs (requests ask with
``reclaim=False``, so every policy falls through to the next pool instead), budgets, the pod's
start time (a pod is bound the moment it is admitted) and the scheduler refusing a pod.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from density_workload import Session

from jupyter_gpupool.core.admission.holds import Holds
from jupyter_gpupool.core.admission.queue import (
    Pass,
    Waiting,
    holds_of,
    never_reason,
    order,
    standing,
)
from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, Decision, decide
from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.time.idle import IdleClock, IdlePolicy
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations
from jupyter_gpupool.core.usage.shapes import node_offer

#: The label that names the shape a server was admitted with (issue 29; absent: whole GPUs)
SHAPE_LABEL = L.PREFIX + "shape"

# Events at the same second: ends first (they free GPUs), then polls, then users.
END, POLL, GIVE_UP, RETRY, ARRIVE = range(5)

#: Builds a session's request for one attempt (the policy's choice of pools and shapes).
RequestFor = Callable[[Session, str], AdmissionRequest]


@dataclass
class Running:
    session: Session
    admission_id: str
    pod: dict[str, Any]
    node: str
    units: dict[str, int]  # resource -> units held on the node
    equivalents: Fraction  # GPU-equivalents held
    start: float
    pool: str
    timeline: Session  # the session as it runs where it was placed (slower on a small slice)


@dataclass
class Result:
    """How each session ended, and what was held."""

    outcome: dict[int, str] = field(default_factory=dict)  # served | abandoned | refused
    waits: list[float] = field(default_factory=list)  # seconds, served sessions
    held_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    idle_stopped: int = 0
    cut_short: int = 0  # stopped idle, though the user would have used the GPU again
    back_of: dict[int, int] = field(default_factory=dict)  # return -> the session it continues
    back_outcome: dict[int, str] = field(default_factory=dict)  # return -> served | abandoned...
    back_waits: list[float] = field(default_factory=list)  # seconds, returns served
    slowed: int = 0  # servers placed on a slice smaller than some of their session's use
    slowed_hours: float = 0.0  # what that adds to their sessions (run to their end)
    served_by_pool: dict[str, int] = field(default_factory=dict)
    served_by_shape: dict[str, int] = field(default_factory=dict)
    need: dict[int, str] = field(default_factory=dict)  # session -> its need's name
    peak: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> resource -> units
    capacity: dict[str, dict[str, int]] = field(default_factory=dict)
    passes: int = 0
    decisions: int = 0
    #: what a policy's own loop counted (policy 4's re-cuts, density_recut.py)
    extra: dict[str, Any] = field(default_factory=dict)


def is_gpu_resource(name: str) -> bool:
    return name == L.GPU_RESOURCE or name.startswith("nvidia.com/mig-") or name.endswith(".shared")


class Replay:
    #: Kinds of event that only keep a clock going: each pushes its next while other events are
    #: due, so the day ends when only clocks are left (two clocks that each saw the other in
    #: the heap would never stop)
    clocks: frozenset[int] = frozenset({POLL})

    def __init__(
        self,
        registry: Registry,
        nodes: Sequence[dict[str, Any]],
        request_for: RequestFor,
        *,
        queue: bool,
        idle: IdlePolicy | None,
        patience: float,
        retry: float,
        poll: float,
        returns: bool = False,
    ):
        """``returns``: a user whose server the idle policy stopped comes back at their next
        busy moment (bench_density's honest model; off, they are gone for good, as the replay
        had it before issue 38, which bench_estimate's figures were measured with)."""
        self.registry = registry
        self.returns = returns
        self.request_for = request_for
        self.queue, self.idle = queue, idle
        self.patience, self.retry, self.poll = patience, retry, poll
        self.reservations = Reservations()
        self.index = UsageIndex(on_admission=self.reservations.observe)
        self.result = Result()
        #: per node, each GPU resource's GPU-equivalents per unit (from the node's offer)
        self.per_unit: dict[str, dict[str, Fraction]] = {}
        self.held: dict[str, dict[str, int]] = {}
        for n in nodes:
            self.index.apply_node("ADDED", n)
            name = n["metadata"]["name"]
            alloc = n["status"]["allocatable"]
            self.result.capacity[name] = {
                r: int(v) for r, v in alloc.items() if is_gpu_resource(r) and int(v)
            }
            offer = node_offer(n["metadata"]["labels"], alloc)
            self.per_unit[name] = {o.shape.resource: o.shape.equivalent for o in offer.shapes}
            self.held[name] = {}
            self.result.peak[name] = {}
        self.now = 0.0
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.due = 0  # events in the heap that are not clocks
        self.running: dict[str, Running] = {}
        self.waiting: dict[str, Waiting] = {}
        self.waiting_session: dict[str, Session] = {}
        self.promised = Holds()
        self.attempts: dict[int, int] = {}
        self.clock = IdleClock()
        self.next_id = 0

    # --- the event loop --------------------------------------------------------------------------

    def push(self, at: float, kind: int, what: Any) -> None:
        self.seq += 1
        if kind not in self.clocks:
            self.due += 1
        heapq.heappush(self.heap, (at, kind, self.seq, what))

    def day_goes_on(self) -> bool:
        """Whether an event other than a clock's is still due (a clock stops when none is)."""
        return self.due > 0

    def run(self, sessions: Sequence[Session]) -> Result:
        for s in sessions:
            self.push(s.arrival, ARRIVE, s)
            self.result.need[s.id] = s.need.name
        self.next_id = max((s.id for s in sessions), default=-1) + 1
        if self.idle is not None:
            self.push(self.poll, POLL, None)
        handlers = self.handlers()
        while self.heap:
            at, kind, _, what = heapq.heappop(self.heap)
            if kind not in self.clocks:
                self.due -= 1
            self.now = at
            handlers[kind](what)
            self.stepped()
        assert not self.running and not self.waiting
        return self.result

    def handlers(self) -> dict[int, Callable[[Any], None]]:
        """What each kind of event does (a subclass adds its own kinds)."""
        return {
            END: self.on_end,
            POLL: self.on_poll,
            GIVE_UP: self.on_give_up,
            RETRY: self.on_attempt,
            ARRIVE: self.on_attempt,
        }

    def stepped(self) -> None:
        """After each event, as the service's loops run between watch events (the re-cutting
        replay, density_recut.py, schedules its re-cut rounds here)."""

    def state(self) -> AdmissionState:
        return AdmissionState(
            self.registry, self.index, self.reservations, now=self.now, promised=self.promised
        )

    # --- users asking -----------------------------------------------------------------------------

    def on_attempt(self, s: Session) -> None:
        n = self.attempts[s.id] = self.attempts.get(s.id, 0) + 1
        req = self.request_for(s, f"s{s.id}-{n}")
        self.result.decisions += 1
        decision = decide(req, self.state())
        if decision.admitted:
            self.start(s, decision)
            return
        if never_reason(req, self.state(), self.index.largest_node_gpus) is not None:
            self.settle(s, "refused")  # no pool could ever take it
        elif self.queue:
            w = Waiting(req, s.id, self.now)
            self.waiting[w.id] = w
            self.waiting_session[w.id] = s
            self.promised |= holds_of([(w, standing(w, self.state()))], self.state())
            self.push(s.arrival + self.patience, GIVE_UP, w.id)
        elif self.now + self.retry <= s.arrival + self.patience:
            self.push(self.now + self.retry, RETRY, s)  # refused now: the user tries again
        else:
            self.settle(s, "abandoned")

    def on_give_up(self, admission_id: str) -> None:
        if self.waiting.pop(admission_id, None) is not None:
            self.settle(self.waiting_session.pop(admission_id), "abandoned")

    def settle(self, s: Session, how: str) -> None:
        """How a session's request ended: the day's ledger, or the returns' for a user back."""
        if s.back_from is None:
            self.result.outcome[s.id] = how
        else:
            self.result.back_outcome[s.id] = how

    def line_pass(self) -> None:
        """The line's pass: in fair order, admit what fits (reclaim left out)."""
        if not self.waiting:
            return
        self.result.passes += 1
        self.promised = Holds()
        base = self.state()
        ranked = order(self.waiting.values(), base)
        p = Pass(base, self.index.pool_max_room, ranked)
        for w, st in ranked:
            if not p.worth_deciding(w, st, lambda pool: False):
                continue
            self.result.decisions += 1
            decision = decide(w.request, replace(self.state(), promised=p.promised))
            if decision.admitted:
                del self.waiting[w.id]
                self.start(self.waiting_session.pop(w.id), decision)
        self.promised = p.promised

    # --- servers running ---------------------------------------------------------------------------

    def start(self, s: Session, decision: Decision) -> None:
        assert decision.node is not None and decision.pool is not None
        self.reservations.add(decision.reservation(self.now + 300))
        pod = pod_object(s, decision)
        self.index.apply_pod("ADDED", pod)  # bound at once: the reservation is dropped
        assert decision.request.admission_id not in self.reservations
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        units = {r: int(v) for r, v in limits.items() if is_gpu_resource(r)}
        node = decision.node
        eq = Fraction(0)
        for r, u in units.items():
            held = self.held[node][r] = self.held[node].get(r, 0) + u
            peak = self.result.peak[node]
            peak[r] = max(peak.get(r, 0), held)
            eq += self.per_unit[node].get(r, Fraction(1)) * u
        # the core's own figure, where it gives one (issue 29's admission by shape)
        core_eq = getattr(decision, "equivalents", None)
        assert core_eq is None or Fraction(core_eq) == eq, (core_eq, eq, units, node)
        timeline = s.on_slice(float(eq) / s.need.gpus)  # a whole GPU's share is 1
        if timeline.duration > s.duration:
            self.result.slowed += 1
            self.result.slowed_hours += (timeline.duration - s.duration) / 3600
        aid = decision.request.admission_id
        self.running[aid] = Running(s, aid, pod, node, units, eq, self.now, decision.pool, timeline)
        self.settle(s, "served")
        self.push(self.now + timeline.duration, END, aid)
        if s.back_from is not None:
            self.result.back_waits.append(self.now - s.arrival)
            return  # the day's figures count each session once, when first served
        self.result.waits.append(self.now - s.arrival)
        shape = pod["metadata"]["labels"].get(SHAPE_LABEL, "whole")
        shapes = self.result.served_by_shape
        shapes[shape] = shapes.get(shape, 0) + 1
        pools = self.result.served_by_pool
        pools[decision.pool] = pools.get(decision.pool, 0) + 1

    def on_end(self, admission_id: str) -> None:
        r = self.running.pop(admission_id, None)
        if r is None:
            return  # stopped by the idle policy before
        self.index.apply_pod("DELETED", r.pod)
        for res, u in r.units.items():
            self.held[r.node][res] -= u
        ran = self.now - r.start
        below = self.idle.below_percent if self.idle else 5.0
        self.result.held_gpu_hours += float(r.equivalents) * ran / 3600
        self.result.idle_gpu_hours += (
            float(r.equivalents) * r.timeline.idle_seconds(ran, below) / 3600
        )
        self.clock.since.pop(admission_id, None)
        self.line_pass()

    def on_poll(self, _: None) -> None:
        assert self.idle is not None
        policy = self.idle
        for aid, r in list(self.running.items()):
            util = r.timeline.util_at(self.now - r.start)
            self.clock.observe(aid, util, self.now, policy.below_percent)
            st = self.clock.state(aid, policy)
            if st is not None and self.now >= st.due_at and policy.action == "stop":
                self.result.idle_stopped += 1
                back = r.timeline.next_busy(self.now - r.start, policy.below_percent)
                if back is not None:  # the user had not finished: back when next busy
                    self.result.cut_short += 1
                    if self.returns:
                        self.come_back(r, back)
                self.on_end(aid)
        if self.day_goes_on():
            self.push(self.now + self.poll, POLL, None)

    def come_back(self, r: Running, stretch: int) -> None:
        """The user of a server stopped as idle asks again at the start of its stretch
        ``stretch`` (its next busy one), for the rest of the session's work."""
        at = r.start + r.timeline.starts[stretch]
        back = r.session.rest(stretch, self.next_id, at)
        self.next_id += 1
        assert back.back_from is not None
        self.result.back_of[back.id] = back.back_from
        self.result.need[back.id] = back.need.name
        self.push(at, ARRIVE, back)


def pod_object(s: Session, decision: Decision) -> dict[str, Any]:
    """The server's pod as the watch shows it once bound: the decision's overrides applied."""
    o = decision.overrides
    req = decision.request
    resources = o.get("resources") or {}
    return {
        "metadata": {
            "name": f"jupyter-{s.user}-{req.admission_id}",
            "namespace": "jhub",
            "uid": f"uid-{req.admission_id}",
            "labels": dict(o.get("labels") or {}),
            "annotations": dict(o.get("annotations") or {}),
            "creationTimestamp": "2025-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": decision.node,
            "containers": [
                {
                    "name": "notebook",
                    "image": "quay.io/jupyter/base-notebook",
                    "resources": {
                        "limits": dict(resources.get("limits") or {}),
                        "requests": dict(resources.get("requests") or {}),
                    },
                }
            ],
        },
        "status": {"phase": "Running"},
    }
