"""The nodes and pools of the usage index: which pool each node is in, and each pool's counts.

A node's pool is its pool label's value; else the first pool whose ``selector`` matches the
node's labels; else ``default``. Per pool, the schedulable nodes are grouped by (GPU type,
taints) in :class:`~.records.PlacementGroup` s, counted per number of free GPUs, so that
admission's "does ONE node have n free GPUs" is a scan over a few counters. The pods' side, which
moves GPUs in and out of these counts, is :class:`.pods.PodBook`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .amounts import Amount, whole_if_whole
from .labels import DEFAULT_POOL, GPU_RESOURCE
from .records import BLOCKING, GroupKey, NodeRecord, PlacementGroup, ShapeCount
from .rows import GPUPart
from .shapes import KINDS, WHOLE, Shape


class PoolState:
    """One pool's nodes, servers and GPU counts in the usage index; ``shapes`` counts each shape
    its nodes offer (:class:`~.records.ShapeCount`).

    ``gpu_total``, ``gpu_used`` and ``eligible_free`` count whole GPUs only: a node whose
    ``nvidia.com/gpu`` units are replicas of a shared GPU, single-strategy MIG devices or HAMi
    slices (:func:`gpu_unit_shape`) adds its units to ``shapes`` alone, so that a time-sliced
    A10 in 4 is not 4 GPUs on the pools page.
    """

    __slots__ = (
        "booked",
        "eligible_free",
        "eligible_nodes",
        "gpu_total",
        "gpu_used",
        "groups",
        "name",
        "nodes",
        "over_quota",
        "parted",
        "repartitioning",
        "servers",
        "shapes",
        "subject_used",
        "user_used",
    )

    def __init__(self, name: str):
        self.name = name
        self.nodes: dict[str, None] = {}
        self.gpu_total = 0
        self.gpu_used = 0
        self.eligible_nodes = 0
        self.eligible_free = 0
        self.groups: dict[GroupKey, PlacementGroup] = {}
        self.shapes: dict[Shape, ShapeCount] = {}
        self.servers: dict[str, None] = {}
        self.over_quota: dict[str, None] = {}
        self.subject_used: dict[str, Amount] = {}
        self.user_used: dict[str, Amount] = {}
        #: the subjects of bookings ever charged here (``booking:NAME``), for reclaim
        self.booked: dict[str, None] = {}
        #: its nodes that offer parts of GPUs (MIG instances, shared GPUs, HAMi slices): a
        #: pool's parts are counted over these alone, its whole GPUs are ``gpu_total``
        self.parted: dict[str, None] = {}
        #: its nodes NVIDIA's MIG manager is re-partitioning (or failed to): their offer's
        #: ``repartitioning`` words, kept here so a refusal's reason need not walk every node
        self.repartitioning: dict[str, None] = {}


class NodeBook:
    """The usage index's nodes and pools (:class:`~.index.UsageIndex` is one)."""

    def __init__(self, pool_label: str, selectors: Sequence[tuple[str, Mapping[str, str]]]):
        self.pool_label = pool_label
        self._selectors: tuple[tuple[str, Mapping[str, str]], ...] = tuple(selectors)
        self._nodes: dict[str, NodeRecord] = {}
        self._pools: dict[str, PoolState] = {}
        #: Per pool, how many times its nodes or servers changed (never reset): whatever
        #: was worked out from a pool's usage still holds while its count is the same
        self.pool_changes: dict[str, int] = {}
        #: How many changes of any pool (never reset)
        self.changes = 0

    def _pool_of(self, labels: Mapping[str, str]) -> str:
        pool = labels.get(self.pool_label)
        if pool:
            return pool
        for name, selector in self._selectors:
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                return name
        return DEFAULT_POOL

    def _pool_state(self, name: str) -> PoolState:
        ps = self._pools.get(name)
        if ps is None:
            ps = self._pools[name] = PoolState(name)
        return ps

    def _changed(self, pool: str | None) -> None:
        self.changes += 1
        if pool is not None:
            self.pool_changes[pool] = self.pool_changes.get(pool, 0) + 1

    def _add_node(self, node: NodeRecord) -> None:
        self._changed(node.pool)
        self._nodes[node.name] = node
        ps = self._pool_state(node.pool)
        ps.nodes[node.name] = None
        unit = gpu_unit_shape(node)
        if unit is None:
            ps.gpu_total += node.gpu_total
            ps.gpu_used += node.gpu_used
        if any(o.shape.kind != WHOLE for o in node.offer.shapes):
            ps.parted[node.name] = None
        if node.offer.repartitioning:
            ps.repartitioning[node.name] = None
        if not node.flags & BLOCKING:
            key: GroupKey = (node.gpu_type, node.type_key, node.taints, unit)
            group = ps.groups.get(key)
            if group is None:
                group = ps.groups[key] = PlacementGroup(*key)
            node.group = group
            group._add(node.name, node.free)
            ps.eligible_nodes += 1
            if unit is None:
                ps.eligible_free += node.free
        for offered in node.offer.shapes:
            count = ps.shapes.get(offered.shape)
            if count is None:
                count = ps.shapes[offered.shape] = ShapeCount(offered.shape)
            count.total += offered.count
            count.nodes += 1
            if node.group is None:
                continue
            resource = offered.shape.resource
            if resource == GPU_RESOURCE:  # offered.count is gpu_total
                node.gpu_shape = count
                count._add(node.name, node.free)
            else:
                if node.shape_counts is None:
                    node.shape_counts = {}
                node.shape_counts[resource] = (offered.count, count)
                count._add(node.name, node.shape_free(resource, offered.count))

    def _remove_node(self, node: NodeRecord) -> None:
        self._changed(node.pool)
        del self._nodes[node.name]
        ps = self._pools[node.pool]
        del ps.nodes[node.name]
        ps.parted.pop(node.name, None)
        ps.repartitioning.pop(node.name, None)
        whole = gpu_unit_shape(node) is None
        if whole:
            ps.gpu_total -= node.gpu_total
            ps.gpu_used -= node.gpu_used
        for offered in node.offer.shapes:
            count = ps.shapes[offered.shape]
            count.total -= offered.count
            count.nodes -= 1
            if node.group is not None:
                resource = offered.shape.resource
                if resource == GPU_RESOURCE:
                    count._remove(node.name, node.free)
                else:
                    count._remove(node.name, node.shape_free(resource, offered.count))
            if not count.nodes:
                del ps.shapes[offered.shape]
        node.gpu_shape = node.shape_counts = None
        if node.group is not None:
            node.group._remove(node.name, node.free)
            ps.eligible_nodes -= 1
            if whole:
                ps.eligible_free -= node.free
            if not len(node.group):
                del ps.groups[node.group.key]
            node.group = None
        self._drop_if_empty(ps)

    def _drop_if_empty(self, ps: PoolState) -> None:
        if not ps.nodes and not ps.servers and not ps.subject_used and not ps.user_used:
            del self._pools[ps.name]

    def _node_used(self, node: NodeRecord, delta: int) -> None:
        ps = self._pools[node.pool]
        whole = gpu_unit_shape(node) is None
        if node.group is not None:
            before = node.free
            node.group._remove(node.name, before)
            node.gpu_used += delta
            after = node.free
            node.group._add(node.name, after)
            if whole:
                ps.eligible_free += after - before
            shape = node.gpu_shape
            if shape is not None:
                shape._move(node.name, before, after)
        else:
            node.gpu_used += delta
        if whole:
            ps.gpu_used += delta

    def _node_shapes_used(
        self, node: NodeRecord, units: tuple[tuple[str, int], ...], sign: int
    ) -> None:
        """A pod's units of shape resources other than ``nvidia.com/gpu`` taken (``sign`` 1) or
        given back (-1) on its node, and on its pool's shape counts while the node is
        schedulable."""
        used = node.shape_used
        if used is None:
            used = node.shape_used = {}
        counts = node.shape_counts
        for resource, n in units:
            held = counts.get(resource) if counts is not None else None
            if held is None:
                add_count(used, resource, sign * n)
                continue
            offered, count = held
            before = node.shape_free(resource, offered)
            add_count(used, resource, sign * n)
            count._move(node.name, before, node.shape_free(resource, offered))


def gpu_unit_shape(node: NodeRecord) -> Shape | None:
    """The shape of the node's ``nvidia.com/gpu`` units when they are not whole GPUs."""
    for offered in node.offer.shapes:
        if offered.shape.resource == GPU_RESOURCE:
            return None if offered.shape.kind == WHOLE else offered.shape
    return None


def node_parts(node: NodeRecord) -> tuple[GPUPart, ...]:
    """What the node holds of each kind of GPU (:class:`~.rows.GPUPart`): each shape it offers,
    its units and the units its pods use (``gpu_used`` for ``nvidia.com/gpu``, ``shape_used``
    for the others), in GPU-equivalents by :attr:`.shapes.Shape.equivalent`."""
    used_of = node.shape_used or {}
    counted = (node.gpu_used, tuple(used_of.items()), node.offer)
    cached = node.parts_cache
    if cached is not None and cached[0] == counted:
        parts: tuple[GPUPart, ...] = cached[1]
        return parts
    found: dict[tuple[str, int], list[Amount]] = {}
    for offered in node.offer.shapes:
        shape = offered.shape
        resource = shape.resource
        used = node.gpu_used if resource == GPU_RESOURCE else used_of.get(resource, 0)
        used = min(used, offered.count)
        key = (shape.kind, shape.replicas if shape.kind != WHOLE else 1)
        sums = found.setdefault(key, [0, 0, 0, 0])
        sums[0] += offered.count
        sums[1] += used
        sums[2] += shape.equivalent * offered.count
        sums[3] += shape.equivalent * used
    parts = sum_parts([_part(k, v) for k, v in found.items()])
    node.parts_cache = (counted, parts)
    return parts


def _part(key: tuple[str, int], sums: list[Amount]) -> GPUPart:
    return GPUPart(
        kind=key[0],
        replicas=key[1],
        units=int(sums[0]),
        units_used=int(sums[1]),
        equivalents=whole_if_whole(sums[2]),
        equivalents_used=whole_if_whole(sums[3]),
    )


def _part_order(part: GPUPart) -> tuple[int, int]:
    return (KINDS.index(part.kind) if part.kind in KINDS else len(KINDS), -part.replicas)


def pool_parts(ps: PoolState, nodes: Mapping[str, NodeRecord]) -> tuple[GPUPart, ...]:
    """A pool's parts: its whole GPUs from its counters (``gpu_total``, ``gpu_used``), and the
    parts of GPUs of its nodes that offer them (``parted``), so that a pool of thousands of
    nodes of whole GPUs costs nothing more."""
    parts: list[GPUPart] = []
    if ps.gpu_total:
        parts.append(GPUPart(WHOLE, 1, ps.gpu_total, ps.gpu_used, ps.gpu_total, ps.gpu_used))
    for name in ps.parted:
        parts.extend(p for p in node_parts(nodes[name]) if p.kind != WHOLE)
    return sum_parts(parts)


def sum_parts(parts: Sequence[GPUPart]) -> tuple[GPUPart, ...]:
    """Parts of the same kind (and replicas) added up, whole GPUs first (a pool's, from its
    nodes')."""
    found: dict[tuple[str, int], list[Amount]] = {}
    for p in parts:
        sums = found.setdefault((p.kind, p.replicas), [0, 0, 0, 0])
        sums[0] += p.units
        sums[1] += p.units_used
        sums[2] += p.equivalents
        sums[3] += p.equivalents_used
    return tuple(sorted((_part(k, v) for k, v in found.items()), key=_part_order))


def add_count(counter: dict[str, int], key: str, delta: int) -> None:
    """Add ``delta`` to ``counter[key]``, dropping the key at zero."""
    value = counter.get(key, 0) + delta
    if value:
        counter[key] = value
    else:
        del counter[key]


def add_amount(counter: dict[str, Amount], key: str, delta: Amount) -> None:
    """:func:`add_count` for GPU-equivalents: an ``int`` again once the sum is whole."""
    value = whole_if_whole(counter.get(key, 0) + delta)
    if value:
        counter[key] = value
    else:
        del counter[key]
