"""The simulated kube-scheduler.

:func:`find_node` is the pure part: given a pod and the nodes with what is already requested on
them, it returns the chosen node or the reason message the real scheduler would record
("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node
affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for
incoming pod, 2 Preemption is not helpful for scheduling."). As in kube-scheduler v1.25, every
filter runs on every node and each failure is counted, so the counts may add up to more than the
node count; then the preemption pass says which nodes evicting pods could help (tests/sim/
test_real_scheduling.py holds the words read from a real cluster).

:class:`Scheduler` is the loop: whenever pods or nodes change it retries every pending pod, in
priority then creation order, binding the ones that fit and marking the others Unschedulable.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.kube.nodeaffinity import (
    node_selector_matches,
    preferred_affinity_score,
    required_affinity_matches,
)
from ..core.kube.quantities import cpu_millis, memory_bytes, parse_quantity
from ..core.kube.tolerations import tolerates, tolerates_taint
from .objects.defaults import now_iso
from .objects.resources import RESOURCES
from .objects.store import Store
from .objects.watches import WatchEvent

log = logging.getLogger(__name__)

GPU = "nvidia.com/gpu"

# What the node lifecycle controller taints a node with for each bad condition.
CONDITION_TAINTS = {
    ("Ready", False): "node.kubernetes.io/not-ready",
    ("MemoryPressure", True): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", True): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", True): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", True): "node.kubernetes.io/network-unavailable",
}


@dataclass
class Requests:
    cpu_m: int = 0
    memory: int = 0
    gpu: int = 0
    pods: int = 0
    other: dict[str, int] = field(default_factory=dict)

    def add(self, other: Requests, sign: int = 1) -> None:
        self.cpu_m += sign * other.cpu_m
        self.memory += sign * other.memory
        self.gpu += sign * other.gpu
        self.pods += sign * other.pods
        for name, n in other.other.items():
            self.other[name] = self.other.get(name, 0) + sign * n


def _extended(resources: Mapping[str, Any]) -> dict[str, int]:
    """Extended resources (a domain-prefixed name, such as ``nvidia.com/mig-1g.10gb``) other than
    ``nvidia.com/gpu``: whole counts, as kube-scheduler counts any scalar resource."""
    return {
        k: int(parse_quantity(v))
        for k, v in resources.items()
        if "/" in k and k != GPU and not k.startswith(("kubernetes.io/", "hugepages-"))
    }


def pod_requests(pod: Mapping[str, Any]) -> Requests:
    """Effective requests: the sum over containers, at least the largest init container."""
    spec = pod.get("spec") or {}

    def one(c: Mapping[str, Any]) -> Requests:
        res = c.get("resources") or {}
        req = dict(res.get("limits") or {})
        req.update(res.get("requests") or {})  # requests default to limits
        return Requests(
            cpu_m=cpu_millis(req["cpu"]) if "cpu" in req else 0,
            memory=memory_bytes(req["memory"]) if "memory" in req else 0,
            gpu=int(parse_quantity(req[GPU])) if GPU in req else 0,
            other=_extended(req),
        )

    total = Requests(pods=1)
    for c in spec.get("containers") or []:
        total.add(one(c))
    for c in spec.get("initContainers") or []:
        r = one(c)
        total.cpu_m = max(total.cpu_m, r.cpu_m)
        total.memory = max(total.memory, r.memory)
        total.gpu = max(total.gpu, r.gpu)
        for name, n in r.other.items():
            total.other[name] = max(total.other.get(name, 0), n)
    return total


@dataclass
class NodeInfo:
    """What the scheduler needs to know of one node."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    unschedulable: bool
    allocatable: Requests
    requested: Requests = field(default_factory=Requests)

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> NodeInfo:
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        taints = list(spec.get("taints") or [])
        conds = {c.get("type"): c.get("status") == "True" for c in status.get("conditions") or []}
        for (ctype, bad), key in CONDITION_TAINTS.items():
            if (
                ctype in conds
                and conds[ctype] == bad
                and not any(t.get("key") == key for t in taints)
            ):
                taints.append({"key": key, "effect": "NoSchedule"})
        # ... and a cordoned one with the unschedulable taint.
        if spec.get("unschedulable") and not any(
            t.get("key") == "node.kubernetes.io/unschedulable" for t in taints
        ):
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        return cls(
            name=node["metadata"]["name"],
            labels=dict(node["metadata"].get("labels") or {}),
            taints=taints,
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=Requests(
                cpu_m=cpu_millis(alloc.get("cpu", "0")),
                memory=memory_bytes(alloc.get("memory", "0")),
                gpu=int(parse_quantity(alloc.get(GPU, "0"))),
                pods=int(parse_quantity(alloc.get("pods", "110"))),
                other=_extended(alloc),
            ),
        )


@dataclass
class FitResult:
    node: str | None
    message: str = ""
    feasible: int = 0


# What the preemption pass says of a node it would not look at: one that fails a filter no
# eviction can fix (a taint, the selector, a cordon).
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# ... and of a node short of resources: nothing of lower priority runs there (the simulator
# never preempts, see docs/sim.md).
NO_VICTIMS = "No preemption victims found for incoming pod"


def _failures(pod: Mapping[str, Any], req: Requests, n: NodeInfo) -> tuple[list[str], bool]:
    """Why ``n`` can't take the pod (empty if it fits), from every filter, as kube-scheduler
    v1.25 runs them all; and whether only resources are short (preemption might help)."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    out = []
    # NodeUnschedulable: a cordoned node, unless the pod tolerates the unschedulable taint.
    if n.unschedulable and not tolerates(
        tolerations, "node.kubernetes.io/unschedulable", "", "NoSchedule"
    ):
        out.append("node(s) were unschedulable")
    # TaintToleration: the first NoSchedule or NoExecute taint not tolerated.
    for t in n.taints:
        if t.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerates_taint(tolerations, t):
            value = t.get("value", "")
            out.append(f"node(s) had untolerated taint {{{t.get('key')}: {value}}}")
            break
    # NodeAffinity: nodeSelector and required node affinity.
    if not node_selector_matches(spec.get("nodeSelector"), n.labels) or not (
        required_affinity_matches(spec.get("affinity"), n.labels, n.name)
    ):
        out.append("node(s) didn't match Pod's node affinity/selector")
    unresolvable = bool(out)
    # NodeResourcesFit: every short resource is reported.
    if n.requested.pods + 1 > n.allocatable.pods:
        out.append("Too many pods")
    if req.cpu_m and n.requested.cpu_m + req.cpu_m > n.allocatable.cpu_m:
        out.append("Insufficient cpu")
    if req.memory and n.requested.memory + req.memory > n.allocatable.memory:
        out.append("Insufficient memory")
    if req.gpu and n.requested.gpu + req.gpu > n.allocatable.gpu:
        out.append(f"Insufficient {GPU}")
    for name, want in sorted(req.other.items()):
        if want and n.requested.other.get(name, 0) + want > n.allocatable.other.get(name, 0):
            out.append(f"Insufficient {name}")
    return out, not unresolvable


def _histogram(nodes: int, reasons: Counter[str]) -> str:
    """``0/N nodes are available: 1 a, 2 b.``: "count reason" strings sorted as strings."""
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{nodes} nodes are available: {', '.join(parts)}."


def _score(pod: Mapping[str, Any], req: Requests, n: NodeInfo) -> float:
    """Preferred affinity first, then least allocated (the default scheduler spreads)."""
    affinity = preferred_affinity_score((pod.get("spec") or {}).get("affinity"), n.labels, n.name)
    frac = []
    for used, add, cap in (
        (n.requested.cpu_m, req.cpu_m, n.allocatable.cpu_m),
        (n.requested.memory, req.memory, n.allocatable.memory),
    ):
        frac.append(1.0 - (used + add) / cap if cap else 0.0)
    return affinity * 1000 + 100 * sum(frac) / len(frac)


def find_node(pod: Mapping[str, Any], nodes: list[NodeInfo]) -> FitResult:
    """Choose a node for ``pod`` or say why none fits, in the real scheduler's words."""
    req = pod_requests(pod)
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    best: tuple[float, str] | None = None
    feasible = 0
    for n in nodes:
        fails, resolvable = _failures(pod, req, n)
        if fails:
            reasons.update(fails)
            preemption[NO_VICTIMS if resolvable else NOT_HELPFUL] += 1
            continue
        feasible += 1
        score = _score(pod, req, n)
        # Highest score wins; ties go to the first node by name, so runs are repeatable.
        if best is None or score > best[0] or (score == best[0] and n.name < best[1]):
            best = (score, n.name)
    if best is not None:
        return FitResult(best[1], feasible=feasible)
    if not nodes:
        return FitResult(None, "no nodes available to schedule pods")
    # The preemption pass (PostFilter) adds its own sentence.
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        after = "not eligible due to preemptionPolicy=Never."
    else:
        after = _histogram(len(nodes), preemption)
    return FitResult(None, f"{_histogram(len(nodes), reasons)} preemption: {after}")


def _is_pending_unbound(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        and not pod["metadata"].get("deletionTimestamp")
        and spec.get("schedulerName", "default-scheduler") == "default-scheduler"
        and not spec.get("schedulingGates")
    )


def holds_resources(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


class Scheduler:
    """Binds pending pods as the cluster changes; records events as kube-scheduler does."""

    def __init__(self, store: Store):
        self.store = store
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self.store.listeners.append(self._on_event)
        self._wake.set()
        self._task = asyncio.create_task(self._run(), name="sim-scheduler")

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.listeners.remove(self._on_event)
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.resource == "nodes":
            self._wake.set()
        elif ev.resource == "pods":
            old = ev.old
            # New pending pods, and anything that frees capacity.
            if (ev.type == "ADDED" and _is_pending_unbound(ev.obj)) or (
                old is not None
                and holds_resources(old)
                and (ev.type == "DELETED" or not holds_resources(ev.obj))
            ):
                self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                self.schedule_pending()
            except Exception:  # keep the loop alive; a bug must not freeze the cluster
                log.exception("scheduler pass failed")
            await asyncio.sleep(0)

    def schedule_pending(self) -> int:
        """One pass over every pending pod; returns how many were bound."""
        nodes = {n["metadata"]["name"]: NodeInfo.from_node(n) for n in self.store.iter("nodes")}
        pending = []
        for pod in self.store.iter("pods"):
            if holds_resources(pod):
                info = nodes.get(pod["spec"]["nodeName"])
                if info is not None:
                    info.requested.add(pod_requests(pod))
            elif _is_pending_unbound(pod):
                pending.append(pod)
        pending.sort(
            key=lambda p: (
                -int((p.get("spec") or {}).get("priority") or 0),
                p["metadata"]["creationTimestamp"],
                int(p["metadata"]["resourceVersion"]),
            )
        )
        node_list = sorted(nodes.values(), key=lambda n: n.name)
        bound = 0
        for pod in pending:
            md = pod["metadata"]
            result = find_node(pod, node_list)
            if result.node is not None:
                self.store.bind(md["namespace"], md["name"], result.node)
                nodes[result.node].requested.add(pod_requests(pod))
                self._event(
                    pod,
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {md['namespace']}/{md['name']} to {result.node}",
                )
                bound += 1
            else:
                self._unschedulable(pod, result.message)
        return bound

    def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        conds = pod.get("status", {}).get("conditions") or []
        current = next((c for c in conds if c.get("type") == "PodScheduled"), None)
        if (
            current
            and current.get("reason") == "Unschedulable"
            and current.get("message") == message
        ):
            return  # nothing new to say
        new = copy.deepcopy(pod)
        new_conds = [c for c in conds if c.get("type") != "PodScheduled"]
        new_conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": now_iso(self.store.clock()),
            }
        )
        new["status"]["conditions"] = new_conds
        md = pod["metadata"]
        self.store.write_internal(RESOURCES["pods"], (md["namespace"], md["name"]), pod, new)
        self._event(new, "Warning", "FailedScheduling", message)

    def _event(self, pod: dict[str, Any], etype: str, reason: str, message: str) -> None:
        self.store.record_pod_event(pod, etype, reason, message, "default-scheduler")
