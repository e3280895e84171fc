"""What the usage index keeps of Kubernetes Nodes and Pods, read from the API objects.

Only what the index's answers need is kept, in slotted records, not the objects: a node's pool,
GPUs, GPU type, problems (as bits) and taints; a pod's GPUs, node, phase and our labels. How many
GPUs a pod uses follows the scheduler (:func:`pod_gpus`). :class:`PlacementGroup` counts a pool's
schedulable nodes per number of free GPUs, so admission's "does ONE node have n free GPUs" is a
scan over a few counters. The rows the index returns are in :mod:`.rows`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kube.quantities import quantity_int
from .amounts import Amount, parse_amount
from .labels import (
    DEFAULT_POOL,
    GFD_COUNT_LABEL,
    GFD_PRODUCT_LABEL,
    GPU_RESOURCE,
    GPU_TYPE_LABEL,
    HOSTNAME_LABEL,
    KUBESPAWNER_SERVER,
    KUBESPAWNER_USER,
    POD_ADMISSION,
    POD_CHARGED,
    POD_EQUIVALENTS,
    POD_OVER_QUOTA,
    POD_PLATFORM,
    POD_POOL,
    POD_SERVER,
    POD_SHAPE,
    POD_USER,
    POOL_LABEL,
)
from .shapes import MIG_RESOURCE_PREFIX, NO_OFFER, SHARED_RESOURCE, Shape, node_offer

# Node problems, as bits. The first six keep servers off the node.
NOT_READY = 1
MEMORY_PRESSURE = 2
DISK_PRESSURE = 4
PID_PRESSURE = 8
NETWORK_UNAVAILABLE = 16
CORDONED = 32
GPU_MISSING = 64
#: The node's GPUs are being re-partitioned (MIG), or what it offers cannot be read: its own
#: words are its offer's (:attr:`.shapes.Offer.repartitioning` or ``problem``).
OFFER_BLOCKED = 128
BLOCKING = (
    NOT_READY
    | MEMORY_PRESSURE
    | DISK_PRESSURE
    | PID_PRESSURE
    | NETWORK_UNAVAILABLE
    | CORDONED
    | OFFER_BLOCKED
)

#: Words for each problem, in the order they are reported (Run:ai's node status column).
REASONS: tuple[tuple[int, str], ...] = (
    (NOT_READY, "not ready"),
    (MEMORY_PRESSURE, "memory pressure"),
    (DISK_PRESSURE, "disk pressure"),
    (PID_PRESSURE, "PID pressure"),
    (NETWORK_UNAVAILABLE, "network unavailable"),
    (CORDONED, "cordoned (scheduling disabled)"),
    (OFFER_BLOCKED, "GPUs being re-partitioned"),  # the node's own words replace these
    (GPU_MISSING, "GPU resource missing (no device plugin)"),
)
_PRESSURE = {
    "MemoryPressure": MEMORY_PRESSURE,
    "DiskPressure": DISK_PRESSURE,
    "PIDPressure": PID_PRESSURE,
    "NetworkUnavailable": NETWORK_UNAVAILABLE,
}
_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
# Taints Kubernetes itself sets for conditions and cordon; the flags above already cover them.
_SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"

Taint = tuple[str, str, str]  # key, value, effect
# gpu type, label it came from, taints, and the shape of its nvidia.com/gpu (None: whole GPUs)
GroupKey = tuple[str, str | None, tuple[Taint, ...], "Shape | None"]


def _container_units(container: Mapping[str, Any], resource: str) -> int:
    res = container.get("resources")
    if not res:
        return 0
    limits = res.get("limits")
    value = limits.get(resource) if limits else None
    if value is None:
        requests = res.get("requests")
        value = requests.get(resource) if requests else None
    return 0 if value is None else quantity_int(value)


def pod_gpus(spec: Mapping[str, Any], resource: str = GPU_RESOURCE) -> int:
    """GPUs (units of ``resource``) the scheduler reserves for a pod spec (containers, init
    containers, sidecars)."""
    total = 0
    for c in spec.get("containers") or ():
        total += _container_units(c, resource)
    init_peak = 0
    sidecars = 0
    for c in spec.get("initContainers") or ():
        g = _container_units(c, resource)
        if c.get("restartPolicy") == "Always":  # a sidecar runs alongside everything after it
            sidecars += g
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + g)
    return max(total + sidecars, init_peak)


_SHAPE_PREFIXES = (MIG_RESOURCE_PREFIX, SHARED_RESOURCE)


def is_shape_resource(resource: str) -> bool:
    """Whether a pod resource is a shape's other than ``nvidia.com/gpu``: a MIG device of the
    mixed strategy, or the device plugin's renamed shared GPU."""
    return resource.startswith(MIG_RESOURCE_PREFIX) or resource == SHARED_RESOURCE


def pod_shape_units(spec: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``(resource, units)`` the scheduler reserves for a pod spec, for each shape resource other
    than ``nvidia.com/gpu`` it asks for (``nvidia.com/mig-3g.40gb``, ``nvidia.com/gpu.shared``),
    sorted; ``()`` for almost every pod, found in one pass over the containers' limits (an
    extended resource must have a limit; requests are read only where there are none)."""
    found: list[str] | None = None
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            res = c.get("resources")
            if not res:
                continue
            names = res.get("limits") or res.get("requests")
            if not names:
                continue
            for name in names:
                if name.startswith(_SHAPE_PREFIXES) and is_shape_resource(name):
                    if found is None:
                        found = []
                    found.append(name)
    if found is None:
        return ()
    units = ((r, pod_gpus(spec, r)) for r in sorted(set(found)))
    return tuple((intern(r), n) for r, n in units if n)


class ShapeCount:
    """One shape in one pool: its units on all the pool's nodes (``total``), and its schedulable
    nodes counted by free units (``counts[f]`` nodes with exactly ``f`` free), as
    :class:`PlacementGroup` counts GPUs, so "the most free on one node" is a scan of a few
    counters. ``free`` is the sum over the schedulable nodes."""

    __slots__ = ("counts", "free", "members", "nodes", "shape", "total")

    def __init__(self, shape: Shape):
        self.shape = shape
        self.total = 0
        self.nodes = 0
        self.free = 0
        self.counts: list[int] = []
        #: ``members[f]``: the schedulable nodes with exactly ``f`` free units, in the order they
        #: got there (as :class:`PlacementGroup`'s), so admission picks one without a scan
        self.members: list[dict[str, None]] = []

    def _add(self, node: str, free: int) -> None:
        while len(self.counts) <= free:
            self.counts.append(0)
            self.members.append({})
        self.counts[free] += 1
        self.members[free][node] = None
        self.free += free

    def _remove(self, node: str, free: int) -> None:
        self.counts[free] -= 1
        del self.members[free][node]
        self.free -= free

    def _move(self, node: str, before: int, after: int) -> None:
        """A node's free units went from ``before`` to ``after`` (one pod's event)."""
        self._remove(node, before)
        self._add(node, after)

    def max_free(self) -> int:
        for f in range(len(self.counts) - 1, -1, -1):
            if self.counts[f]:
                return f
        return 0


class PlacementGroup:
    """Schedulable nodes of one pool with the same GPU type, taints and ``nvidia.com/gpu`` shape,
    counted by free GPUs (units of that shape).

    ``members[f]`` holds the nodes with exactly ``f`` free GPUs, in the order they got there (a
    dict used as an ordered set, so choices are deterministic).
    """

    __slots__ = ("counts", "gpu_type", "members", "shape", "taints", "type_key")

    def __init__(
        self,
        gpu_type: str,
        type_key: str | None,
        taints: tuple[Taint, ...],
        shape: Shape | None = None,
    ):
        self.gpu_type = gpu_type
        self.type_key = type_key
        self.taints = taints
        #: What its nodes' ``nvidia.com/gpu`` units are when not whole GPUs: time-sliced or MPS
        #: replicas, MIG devices (single strategy), HAMi slices. None: whole GPUs.
        self.shape = shape
        self.counts: list[int] = []
        self.members: list[dict[str, None]] = []

    @property
    def key(self) -> GroupKey:
        return (self.gpu_type, self.type_key, self.taints, self.shape)

    def _add(self, node: str, free: int) -> None:
        while len(self.counts) <= free:
            self.counts.append(0)
            self.members.append({})
        self.counts[free] += 1
        self.members[free][node] = None

    def _remove(self, node: str, free: int) -> None:
        self.counts[free] -= 1
        del self.members[free][node]

    def __len__(self) -> int:
        return sum(self.counts)

    def max_free(self) -> int:
        for f in range(len(self.counts) - 1, -1, -1):
            if self.counts[f]:
                return f
        return 0

    def count_at_least(self, n: int) -> int:
        return sum(self.counts[n:])

    def nodes_with(self, free: int) -> Mapping[str, None]:
        return self.members[free] if free < len(self.members) else {}


class NodeRecord:
    """A node as the index keeps it. ``offer`` is what it offers (:func:`.shapes.node_offer`);
    ``shape_used`` the units pods use of each shape resource other than ``nvidia.com/gpu``
    (whose are ``gpu_used``). While the node is schedulable, ``gpu_shape`` is its pool's count
    of the shape it offers as ``nvidia.com/gpu`` and ``shape_counts`` maps its other shape
    resources to ``(units on the node, the pool's count)``."""

    __slots__ = (
        "flags",
        "gpu_shape",
        "gpu_total",
        "gpu_type",
        "gpu_used",
        "group",
        "hostname",
        "labels",
        "name",
        "offer",
        "parts_cache",
        "pods",
        "pool",
        "shape_counts",
        "shape_used",
        "taints",
        "type_key",
    )

    def __init__(self, name: str):
        self.name = name
        self.pool = DEFAULT_POOL
        self.labels: Mapping[str, str] = {}
        self.gpu_total = 0
        self.gpu_used = 0
        self.gpu_type = ""
        self.type_key: str | None = None
        self.flags = 0
        self.taints: tuple[Taint, ...] = ()
        self.hostname = name
        self.group: PlacementGroup | None = None
        self.pods: dict[str, None] = {}
        self.offer = NO_OFFER
        self.shape_used: dict[str, int] | None = None
        self.gpu_shape: ShapeCount | None = None
        self.shape_counts: dict[str, tuple[int, ShapeCount]] | None = None
        #: its GPU parts (:func:`.nodes.node_parts`) with what they were counted from
        self.parts_cache: tuple[Any, Any] | None = None

    def signature(self) -> tuple[Any, ...]:
        return (
            self.pool,
            self.gpu_total,
            self.gpu_type,
            self.type_key,
            self.flags,
            self.taints,
            self.hostname,
            self.offer,
        )

    @property
    def free(self) -> int:
        free = self.gpu_total - self.gpu_used
        return free if free > 0 else 0

    def shape_free(self, resource: str, count: int) -> int:
        """Free units of a shape resource other than ``nvidia.com/gpu`` (``count`` offered)."""
        used = self.shape_used.get(resource, 0) if self.shape_used else 0
        return count - used if count > used else 0


class PodRecord:
    __slots__ = (
        "admission",
        "charged",
        "created",
        "gpus",
        "key",
        "linked_pool",
        "node",
        "over_quota",
        "phase",
        "platform",
        "pool_label",
        "quota",
        "server",
        "shape",
        "shapes",
        "terminating",
        "uid",
        "user",
    )

    key: str  # "namespace/name"
    uid: str
    node: str | None
    gpus: int
    shapes: tuple[tuple[str, int], ...]  # units of shape resources other than nvidia.com/gpu
    quota: Amount  # what it counts against quotas, in GPU-equivalents
    shape: str | None  # the shape id it was admitted with (our pods), else None
    user: str | None
    server: str
    charged: str | None
    over_quota: bool
    admission: str | None
    pool_label: str | None
    created: str
    phase: str
    terminating: bool
    platform: str | None
    linked_pool: str | None

    # Read off the key rather than kept twice (30,000 servers' names are a few MB).
    @property
    def namespace(self) -> str:
        return self.key.partition("/")[0]

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]


def reasons_of(flags: int) -> tuple[str, ...]:
    """The words for a node's problem bits, in :data:`REASONS` order."""
    return tuple(words for bit, words in REASONS if flags & bit)


def node_reasons(node: NodeRecord) -> tuple[str, ...]:
    """A node's problems in words, its offer's own words for :data:`OFFER_BLOCKED`
    ("MIG re-partition pending", "rebooting to change MIG mode"...)."""
    if not node.flags & OFFER_BLOCKED:
        return reasons_of(node.flags)
    own = node.offer.repartitioning or node.offer.problem or ""
    return tuple(
        (own or words) if bit == OFFER_BLOCKED else words
        for bit, words in REASONS
        if node.flags & bit
    )


def read_node(name: str, pool: str, meta: Mapping[str, Any], obj: Mapping[str, Any]) -> NodeRecord:
    """What the index keeps of a Node object, ``pool`` being the pool its labels put it in."""
    # most label values (pool, GPU type, zone, OS...) are the same on many nodes: kept once
    labels = {_intern(k): _intern(v) for k, v in (meta.get("labels") or {}).items()}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    new = NodeRecord(name)
    new.labels = labels
    new.pool = pool
    allocatable = status.get("allocatable") or {}
    new.gpu_total = quantity_int(allocatable.get(GPU_RESOURCE, 0))
    new.offer = node_offer(labels, allocatable)
    gpu_type = labels.get(GPU_TYPE_LABEL)
    if gpu_type:
        new.gpu_type, new.type_key = gpu_type, GPU_TYPE_LABEL
    elif labels.get(GFD_PRODUCT_LABEL):
        new.gpu_type, new.type_key = labels[GFD_PRODUCT_LABEL], GFD_PRODUCT_LABEL
    flags = NOT_READY
    for cond in status.get("conditions") or ():
        ctype = cond.get("type")
        if ctype == "Ready":
            if cond.get("status") == "True":
                flags &= ~NOT_READY
        elif ctype in _PRESSURE and cond.get("status") == "True":
            flags |= _PRESSURE[ctype]
    if spec.get("unschedulable"):
        flags |= CORDONED
    if not new.offer.admits:
        flags |= OFFER_BLOCKED
    if (
        new.gpu_total == 0
        and not new.offer.shapes  # a node all in MIG devices has no nvidia.com/gpu left
        and (new.gpu_type or quantity_int(labels.get(GFD_COUNT_LABEL, 0)) > 0)
    ):
        flags |= GPU_MISSING
    new.flags = flags
    new.taints = tuple(
        sorted(
            (t.get("key") or "", t.get("value") or "", t.get("effect") or "")
            for t in spec.get("taints") or ()
            if t.get("effect") in _TAINT_EFFECTS
            and not (t.get("key") or "").startswith(_SYSTEM_TAINT_PREFIX)
        )
    )
    new.hostname = labels.get(HOSTNAME_LABEL, name)
    return new


def read_pod(
    key: str, meta: Mapping[str, Any], obj: Mapping[str, Any], old: PodRecord | None
) -> PodRecord | None:
    """What the index keeps of a Pod object; None when it has finished (frees everything).

    ``old`` is the record of the same pod before this event, if any.
    """
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase == "Succeeded" or phase == "Failed":
        return None
    spec = obj.get("spec") or {}
    uid = meta.get("uid") or ""
    # Values many pods share (a namespace, a node, a user...) are kept once, not once per pod.
    p = PodRecord()
    p.key = key
    p.uid = uid
    node = spec.get("nodeName")
    p.node = intern(node) if node else None
    # Container resources of a pod never change, so a known pod's count is reused.
    if old is not None and old.uid == uid:
        p.gpus, p.shapes = old.gpus, old.shapes
    else:
        p.gpus, p.shapes = pod_gpus(spec), pod_shape_units(spec)
    p.phase = intern(phase)
    p.terminating = bool(meta.get("deletionTimestamp"))
    p.created = meta.get("creationTimestamp") or ""
    labels = meta.get("labels") or {}
    ann = meta.get("annotations") or {}
    user = user_of(labels, ann)
    p.user = _intern(user)
    p.server = intern(ann.get(POD_SERVER) or ann.get(KUBESPAWNER_SERVER) or "")
    p.charged = _intern(ann.get(POD_CHARGED) or (f"user:{user}" if user else None))
    p.over_quota = labels.get(POD_OVER_QUOTA) == "true"
    p.admission = labels.get(POD_ADMISSION)
    p.pool_label = _intern(labels.get(POD_POOL) or labels.get(POOL_LABEL))
    p.platform = _intern(labels.get(POD_PLATFORM))
    p.shape = _intern(labels.get(POD_SHAPE))
    # what the pod counts against quotas is written once, at admission: a known pod's is reused
    if old is not None and old.uid == uid:
        p.quota = old.quota
    else:
        p.quota = pod_equivalents(ann.get(POD_EQUIVALENTS), p.gpus)
    p.linked_pool = None
    return p


def pod_equivalents(annotation: str | None, gpus: int) -> Amount:
    """What a pod counts against quotas: its ``gpu-equivalents`` annotation (written at admission:
    ``1/7`` for a MIG 1g instance of an A100), else its ``nvidia.com/gpu`` count. A pod we did not
    admit, on a MIG device of its own asking, counts nothing against quotas, as before shapes."""
    if annotation:
        value = parse_amount(annotation)
        if value is not None:
            return value
    return gpus


#: One copy of each value many pods share (namespaces, nodes, users, subjects, pools, phases):
#: as ``sys.intern``, without the core reaching for ``sys``. Bounded by the cluster's names.
_SHARED: dict[str, str] = {}


def intern(value: str) -> str:
    return _SHARED.setdefault(value, value)


def _intern(value: Any) -> Any:
    return _SHARED.setdefault(value, value) if isinstance(value, str) else value


def pod_key(meta: Mapping[str, Any]) -> str:
    """``namespace/name``: how the index knows a pod."""
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def user_of(labels: Mapping[str, str], ann: Mapping[str, str]) -> str | None:
    """The user whose server a pod is (ours, or KubeSpawner's), else None."""
    return ann.get(POD_USER) or labels.get(POD_USER) or ann.get(KUBESPAWNER_USER)


def is_other(meta: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether a pod counts for nothing but its node's number of pods: no GPUs, no server of
    a user, no admission (most pods of a large cluster; read without building a record, as
    :func:`read_pod` would read it)."""
    labels = meta.get("labels") or {}
    if labels.get(POD_ADMISSION) or user_of(labels, meta.get("annotations") or {}):
        return False
    spec = obj.get("spec") or {}
    return pod_gpus(spec) == 0 and not pod_shape_units(spec)


def same_pod(a: PodRecord, b: PodRecord) -> bool:
    """Whether two records of a pod count the same (so an event can be skipped)."""
    return (
        a.node == b.node
        and a.gpus == b.gpus
        and a.shapes == b.shapes
        and a.uid == b.uid
        and a.terminating == b.terminating
        and a.user == b.user
        and a.charged == b.charged
        and a.over_quota == b.over_quota
        and a.admission == b.admission
        and a.pool_label == b.pool_label
        and a.server == b.server
        and a.platform == b.platform
    )
