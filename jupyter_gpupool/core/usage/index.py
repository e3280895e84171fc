"""Live GPU usage per pool, node, user and group, kept up to date from watch events.

Kubernetes is the only record of usage: nodes say what they have (allocatable ``nvidia.com/gpu``,
labels, conditions, cordon, taints), pods say what they use (GPU requests, node, our labels). The
:class:`UsageIndex` is fed every Node and Pod event by the cluster view and answers the questions
of admission and of the service pages without ever rescanning all pods or nodes:

- a pod event touches one pod record, its node and its pool: O(1);
- a node event touches the node and the pods bound to it (a handful): O(pods on the node);
- admission's "does ONE node have n free GPUs" is answered from :class:`PlacementGroup` s: per pool,
  nodes are grouped by (GPU type, taints) and counted per number of free GPUs. GPUs per node are
  small integers, so the largest free block is a scan over at most a few counters.

Only what these answers need is stored per pod and per node (slotted records, read from the
objects in :mod:`.records`), not the objects; the rows it returns are in :mod:`.rows`.
The index keeps its counts in two layers, nodes and pools (:mod:`.nodes`) under pods and the
watch feed (:mod:`.pods`); a relist is fed through :mod:`.relist`. This module answers.

Accounting rules (the ones the issue left open are marked *decided*):

- A pod uses the GPUs of its containers (limits, else requests, ``nvidia.com/gpu``), or the
  largest init container's if more, as the scheduler computes it (sidecars included).
- Pods use node GPUs once bound (``spec.nodeName``). Pending pods are listed as pending servers
  and count towards their user's and charged subject's quota, but not towards any node.
- Succeeded and Failed pods free their GPUs.
- *Decided:* pods being deleted (``deletionTimestamp``) keep their GPUs until they are gone: the
  kubelet has not released the devices yet and the scheduler still counts them, so admitting
  against them would only produce an Unschedulable pod. They are listed as terminating.
- Pods without our labels (other workloads) use node GPUs like any other.
- A node's pool is its pool label's value; else the first pool whose ``selector`` matches the
  node's labels; else ``default``. A node that changes pool takes its pods' usage with it.
- A node takes new servers only when Ready, not cordoned, and free of memory, disk or PID
  pressure and network trouble, and while its GPUs are not being re-partitioned
  (``nvidia.com/mig.config.state`` pending, rebooting or failed) and what it offers can be read
  (:func:`.shapes.node_offer`); those two are reported in the offer's words. A node with GPU
  labels but no GPU resource at all (device plugin missing) is reported with that reason and
  offers no GPUs.
- *Shapes* (:mod:`.shapes`): each node's offer is kept, and each pool counts every shape its
  nodes offer: units on all its nodes, and per schedulable node the units free, so "the most
  free on one node" is a scan of a few counters. A pod uses the units it asks of each shape
  resource (``nvidia.com/mig-3g.40gb: 1``), counted as its GPUs are; ``nvidia.com/gpu`` stays
  the GPUs above, whatever it stands for on the node (whole GPUs, single-strategy MIG devices,
  shared replicas, HAMi slices).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .amounts import Amount
from .labels import POOL_LABEL
from .nodes import gpu_unit_shape, node_parts, pool_parts
from .pods import AdmissionListener, PodBook
from .records import (
    CORDONED,
    NOT_READY,
    NodeRecord,
    PlacementGroup,
    PodRecord,
    ShapeCount,
    node_reasons,
)
from .relist import Relist

# The service imports the rows from here; they live in .rows.
from .rows import NodeUsage, PoolUsage, ServerUsage
from .shapes import Shape

__all__ = ["NodeUsage", "PoolUsage", "ServerUsage", "UsageIndex"]


class UsageIndex(PodBook):
    """Incremental usage, fed by :meth:`apply_node` / :meth:`apply_pod` / :meth:`reset`.

    ``pool_label`` is the node label that names a node's pool (gpuctl's by default).
    ``selectors`` are ``(pool, {label: value})`` pairs for pools defined by other labels.
    ``on_admission`` is told when pods carrying an admission label appear, bind or end.
    """

    def __init__(
        self,
        pool_label: str = POOL_LABEL,
        selectors: Sequence[tuple[str, Mapping[str, str]]] = (),
        on_admission: AdmissionListener | None = None,
    ):
        super().__init__(pool_label, selectors, on_admission)

    # --- lists -----------------------------------------------------------------------------------

    def relist(self, kind: str) -> Relist:
        """A fresh list of ``kind`` (``"nodes"`` or ``"pods"``), to feed in page by page as it
        arrives (:meth:`Relist.add`), then :meth:`Relist.finish` to drop what it no longer has.
        Each object is applied as an update when it comes, so between pages the index holds
        some objects of the new list and some of the old, each one whole."""
        if kind not in ("nodes", "pods"):
            raise ValueError(f"cannot list {kind!r}")
        return Relist(self, kind)

    def reset(
        self,
        nodes: Iterable[Mapping[str, Any]] | None = None,
        pods: Iterable[Mapping[str, Any]] | None = None,
    ) -> None:
        """Make the index match a fresh list (after a relist). ``None`` keeps that kind as is."""
        for kind, objects in (("nodes", nodes), ("pods", pods)):
            if objects is not None:
                relist = self.relist(kind)
                relist.add(objects)
                relist.finish()

    # --- reading: admission ----------------------------------------------------------------------

    def placement_groups(self, pool: str) -> Iterable[PlacementGroup]:
        """The pool's schedulable nodes, grouped by GPU type and taints."""
        ps = self._pools.get(pool)
        return ps.groups.values() if ps is not None else ()

    def pool_max_free(self, pool: str) -> int:
        """The most free GPUs on one schedulable node of ``pool`` (reservations not counted)."""
        ps = self._pools.get(pool)
        return max((g.max_free() for g in ps.groups.values()), default=0) if ps else 0

    def pool_max_room(self, pool: str) -> int:
        """The most free units of any one kind on one schedulable node of ``pool``: free GPUs
        (:meth:`pool_max_free`) or free units of a shape (a MIG device, a renamed shared GPU);
        reservations not counted. An upper bound for "could a request of the line fit here"."""
        ps = self._pools.get(pool)
        if ps is None:
            return 0
        return max(
            self.pool_max_free(pool), max((c.max_free() for c in ps.shapes.values()), default=0)
        )

    def largest_node_gpus(self, pool: str) -> int:
        """The most whole GPUs one node of ``pool`` holds, free or not, schedulable or not (a
        node whose ``nvidia.com/gpu`` units are replicas or MIG devices holds none)."""
        ps = self._pools.get(pool)
        if ps is None:
            return 0
        nodes = (self._nodes[n] for n in ps.nodes)
        return max((n.gpu_total for n in nodes if gpu_unit_shape(n) is None), default=0)

    def node_gpus_whole(self, node: str) -> bool:
        """Whether the node's ``nvidia.com/gpu`` units are whole GPUs (not replicas of a shared
        GPU, single-strategy MIG devices or HAMi slices); True for an unknown node."""
        n = self._nodes.get(node)
        return n is None or gpu_unit_shape(n) is None

    def node_free(self, node: str) -> int:
        n = self._nodes.get(node)
        return n.free if n is not None else 0

    def node_gpus(self, node: str) -> int:
        """The ``nvidia.com/gpu`` units the node holds, free or not (0 for an unknown node)."""
        n = self._nodes.get(node)
        return n.gpu_total if n is not None else 0

    def node_gpu_pods(self, node: str) -> int:
        """The pods on the node that hold a GPU resource of any kind (whole GPUs, MIG
        instances, shared replicas), whatever their phase."""
        n = self._nodes.get(node)
        if n is None:
            return 0
        pods = (self._pods.get(key) for key in n.pods)
        return sum(1 for p in pods if p is not None and (p.gpus or p.shapes))

    def placed(self, nodes: Iterable[str]) -> Iterator[tuple[str, PlacementGroup, int]]:
        """``(node, placement group, free GPUs)`` of each of ``nodes`` that takes servers (in
        a group): what :meth:`node_group` and :meth:`node_free` say, in one look per node
        (admission asks it of every reserved node of a pool)."""
        get = self._nodes.get
        for node in nodes:
            n = get(node)
            if n is not None and n.group is not None:
                yield node, n.group, n.free

    def node_group(self, node: str) -> PlacementGroup | None:
        """The placement group a schedulable node is in (None when it takes no servers)."""
        n = self._nodes.get(node)
        return n.group if n is not None else None

    def node_gpu_type(self, node: str) -> str | None:
        """The GPU type of a known node ("" when it has none), None for an unknown node."""
        n = self._nodes.get(node)
        return n.gpu_type if n is not None else None

    def node_shape(self, node: str, shape_id: str) -> Shape | None:
        """The shape with this id the node offers (as it offers it now), None if it does not."""
        n = self._nodes.get(node)
        if n is None:
            return None
        return next((o.shape for o in n.offer.shapes if o.shape.id == shape_id), None)

    def node_hostname(self, node: str) -> str:
        n = self._nodes.get(node)
        return n.hostname if n is not None else node

    def shape_counts(self, pool: str) -> list[ShapeCount]:
        """Each shape the pool's nodes offer, counted (in no particular order); read them
        before the index changes again."""
        ps = self._pools.get(pool)
        return list(ps.shapes.values()) if ps is not None else []

    def node_gpu_shape(self, node: str) -> ShapeCount | None:
        """The pool's count of the shape a schedulable node offers as ``nvidia.com/gpu`` (the
        one its free GPUs, :meth:`node_free`, are of), None when it takes no servers."""
        n = self._nodes.get(node)
        return n.gpu_shape if n is not None else None

    def node_unit_count(self, node: str, resource: str) -> tuple[ShapeCount, int] | None:
        """For a schedulable node's shape resource other than ``nvidia.com/gpu``: its pool's
        count of that shape and the units free on the node; None otherwise."""
        n = self._nodes.get(node)
        held = n.shape_counts.get(resource) if n is not None and n.shape_counts else None
        if n is None or held is None:
            return None
        offered, count = held
        return count, n.shape_free(resource, offered)

    def has_pool(self, pool: str) -> bool:
        return pool in self._pools

    def repartitioning(self, pool: str) -> list[str]:
        """``"NODE: words"`` for each node of ``pool`` that takes nothing new because NVIDIA's
        MIG manager is re-partitioning it (or failed to), sorted."""
        ps = self._pools.get(pool)
        if ps is None:
            return []
        return [
            f"{name}: {self._nodes[name].offer.repartitioning}"
            for name in sorted(ps.repartitioning)
        ]

    def pool_totals(self, pool: str) -> tuple[int, int, int]:
        """``(GPUs, nodes, schedulable nodes)`` of a pool."""
        ps = self._pools.get(pool)
        if ps is None:
            return 0, 0, 0
        return ps.gpu_total, len(ps.nodes), ps.eligible_nodes

    def subject_used(self, pool: str, subject: str) -> Amount:
        """GPU-equivalents charged to ``subject`` (``group:NAME`` / ``user:NAME``) in ``pool``."""
        ps = self._pools.get(pool)
        return ps.subject_used.get(subject, 0) if ps is not None else 0

    def booking_subjects(self, pool: str) -> Iterable[str]:
        """The subjects of bookings (``booking:NAME``) charged in ``pool`` since the index
        began (some may be charged 0 now)."""
        ps = self._pools.get(pool)
        return ps.booked.keys() if ps is not None else ()

    def user_used(self, pool: str, user: str) -> Amount:
        """All of ``user``'s GPU-equivalents in ``pool``, whoever they are charged to."""
        ps = self._pools.get(pool)
        return ps.user_used.get(user, 0) if ps is not None else 0

    def subject_used_total(self, subject: str) -> Amount:
        return self._subject_total.get(subject, 0)

    def user_used_total(self, user: str) -> Amount:
        return self._user_total.get(user, 0)

    def over_quota_servers(self, pool: str) -> list[ServerUsage]:
        """Bound servers in ``pool`` that borrow GPUs: the candidates for reclaim."""
        ps = self._pools.get(pool)
        if ps is None:
            return []
        return [self._server(self._pods[k]) for k in ps.over_quota]

    def borrowed_gpus(self, pool: str) -> int:
        """Whole GPUs of the bound servers in ``pool`` that borrow beyond their quota (a
        borrowed replica or MIG device is in the pool's shapes, not its GPUs)."""
        ps = self._pools.get(pool)
        if ps is None:
            return 0
        pods = (self._pods[k] for k in ps.over_quota)
        return sum(p.gpus for p in pods if p.node is None or self.node_gpus_whole(p.node))

    def admission_state(self, admission_id: str) -> str | None:
        """``"pending"`` or ``"bound"`` for a live pod with this admission id, else None."""
        key = self._by_admission.get(admission_id)
        if key is None:
            return None
        return "bound" if self._pods[key].node else "pending"

    # --- reading: pages --------------------------------------------------------------------------

    def pool_names(self) -> list[str]:
        """Pools that have nodes or servers right now (the registry may know more)."""
        return sorted(self._pools)

    def pool_usage(self, pool: str) -> PoolUsage:
        ps = self._pools.get(pool)
        if ps is None:
            return PoolUsage(pool, "empty", 0, 0, 0, 0, 0, 0, 0, (), 0, 0)
        types: dict[str, None] = {}
        for name in ps.nodes:
            t = self._nodes[name].gpu_type
            if t:
                types[t] = None
        pending = sum(1 for k in ps.servers if self._pods[k].node is None)
        if not ps.nodes:
            status = "empty"
        elif ps.eligible_nodes == 0:
            status = "unavailable"
        elif any(self._nodes[n].flags for n in ps.nodes):
            status = "degraded"
        else:
            status = "active"
        return PoolUsage(
            name=pool,
            status=status,
            gpu_total=ps.gpu_total,
            gpu_used=ps.gpu_used,
            gpu_free=max(0, ps.gpu_total - ps.gpu_used),
            gpu_free_schedulable=ps.eligible_free,
            largest_free_block=max(
                (g.max_free() for g in ps.groups.values() if g.shape is None), default=0
            ),
            node_count=len(ps.nodes),
            schedulable_nodes=ps.eligible_nodes,
            gpu_types=tuple(sorted(types)),
            servers=len(ps.servers),
            pending_servers=pending,
            parts=pool_parts(ps, self._nodes),
        )

    def pools(self) -> list[PoolUsage]:
        return [self.pool_usage(name) for name in sorted(self._pools)]

    def _node_usage(self, n: NodeRecord) -> NodeUsage:
        ready = "NotReady" if n.flags & NOT_READY else "Ready"
        return NodeUsage(
            name=n.name,
            pool=n.pool,
            gpu_type=n.gpu_type,
            gpu_total=n.gpu_total,
            gpu_used=n.gpu_used,
            gpu_free=n.free,
            status=ready + (",SchedulingDisabled" if n.flags & CORDONED else ""),
            reasons=node_reasons(n),
            schedulable=n.group is not None,
            pods=len(n.pods) + self._others_on.get(n.name, 0),
            parts=node_parts(n),
        )

    def node(self, name: str) -> NodeUsage | None:
        n = self._nodes.get(name)
        return self._node_usage(n) if n is not None else None

    def node_names(self, pool: str | None = None) -> list[str]:
        """Names of every node, or of one pool's, sorted (cheap: no rows are built)."""
        if pool is None:
            return sorted(self._nodes)
        ps = self._pools.get(pool)
        return sorted(ps.nodes) if ps is not None else []

    def node_offer_units(self, name: str) -> dict[str, int]:
        """What the node offers now, units by shape id, as its pool's shape rows count them
        (empty for an unknown node)."""
        n = self._nodes.get(name)
        if n is None:
            return {}
        out: dict[str, int] = {}
        for o in n.offer.shapes:
            out[o.shape.id] = out.get(o.shape.id, 0) + o.count
        return out

    def node_labels(self, name: str) -> Mapping[str, str]:
        n = self._nodes.get(name)
        return n.labels if n is not None else {}

    def nodes(self, pool: str | None = None) -> list[NodeUsage]:
        if pool is None:
            names: Iterable[str] = sorted(self._nodes)
        else:
            ps = self._pools.get(pool)
            names = sorted(ps.nodes) if ps is not None else []
        return [self._node_usage(self._nodes[n]) for n in names]

    def _server(self, p: PodRecord) -> ServerUsage:
        return ServerUsage(
            namespace=p.namespace,
            name=p.name,
            user=p.user or "",
            server=p.server,
            pool=p.linked_pool,
            node=p.node,
            gpus=p.gpus,
            state=_state(p),
            over_quota=p.over_quota,
            charged=p.charged,
            admission=p.admission,
            platform=p.platform,
            created=p.created,
            uid=p.uid,
            shape=p.shape,
            units=p.gpus + sum(n for _, n in p.shapes),
            equivalents=p.quota,
        )

    def server(self, namespace: str, name: str) -> ServerUsage | None:
        """The server pod ``namespace/name``, if it is one the index counts."""
        p = self._pods.get(f"{namespace}/{name}")
        return self._server(p) if p is not None and p.user is not None else None

    def servers(self, pool: str | None = None, user: str | None = None) -> list[ServerUsage]:
        """Server pods (ours, or KubeSpawner's), by pool and/or user, oldest first."""
        pods = self._pods
        if pool is None:
            keys: list[str] = [k for k, p in pods.items() if p.user is not None]
        else:
            ps = self._pools.get(pool)
            keys = list(ps.servers) if ps is not None else []
        if user is not None:  # before building rows: one user's out of 20,000 pods is cheap
            keys = [k for k in keys if pods[k].user == user]
        out = [self._server(pods[k]) for k in keys]
        out.sort(key=lambda s: (s.created, s.namespace, s.name))
        return out

    def server_uids(self, *states: str) -> set[str]:
        """The uids of the servers in any of ``states`` (``"running"``, ``"terminating"``,
        ``"pending"``, ``"starting"``), without building their rows."""
        return {p.uid for p in self._pods.values() if p.user is not None and _state(p) in states}

    def servers_in(self, *states: str, skip_uids: Container[str] = ()) -> list[ServerUsage]:
        """The servers in any of ``states`` whose uid is not in ``skip_uids``, in no order: rows
        are built only for those (the ledger asks every minute which servers it has not seen
        yet; at 20,000 servers, sorting and building every row was most of that)."""
        return [
            self._server(p)
            for p in self._pods.values()
            if p.user is not None and p.uid not in skip_uids and _state(p) in states
        ]

    def usage_by_subject(self, pool: str | None = None) -> dict[str, Amount]:
        """GPU-equivalents per charged subject, in one pool or across all."""
        if pool is None:
            return {k: v for k, v in self._subject_total.items() if v}
        ps = self._pools.get(pool)
        return {k: v for k, v in ps.subject_used.items() if v} if ps is not None else {}

    def usage_by_user(self, pool: str | None = None) -> dict[str, Amount]:
        if pool is None:
            return {k: v for k, v in self._user_total.items() if v}
        ps = self._pools.get(pool)
        return {k: v for k, v in ps.user_used.items() if v} if ps is not None else {}

    def __len__(self) -> int:
        """Active pods known, servers or not."""
        return len(self._pods) + len(self._others)

    @property
    def node_count(self) -> int:
        return len(self._nodes)


def _state(p: PodRecord) -> str:
    """A server's state, as :class:`ServerUsage` gives it."""
    if p.terminating:
        return "terminating"
    if p.node is None:
        return "pending"
    return "running" if p.phase == "Running" else "starting"
