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
objects in :mod:`.usagerecords`), not the objects; the rows it returns are in :mod:`.usagerows`.

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
  pressure and network trouble. A node with GPU labels but no allocatable ``nvidia.com/gpu``
  (device plugin missing) is reported with that reason and offers no GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from .labels import POOL_LABEL
from .pools import DEFAULT_POOL
from .usagerecords import (
    BLOCKING,
    CORDONED,
    NOT_READY,
    GroupKey,
    NodeRecord,
    PlacementGroup,
    PodRecord,
    intern,
    is_other,
    pod_gpus,
    pod_key,
    read_node,
    read_pod,
    reasons_of,
    same_pod,
)
from .usagerows import NodeUsage, PoolUsage, ServerUsage

__all__ = [
    "AdmissionListener",
    "NodeUsage",
    "PlacementGroup",
    "PoolUsage",
    "Relist",
    "ServerUsage",
    "UsageIndex",
    "pod_gpus",
]

#: Called with (admission id, "pending" | "bound" | "gone") when a pod carrying an admission
#: label appears, is bound, or ends; :meth:`.reservations.Reservations.observe`.
AdmissionListener = Callable[[str, str], None]


class _PoolState:
    __slots__ = (
        "eligible_free",
        "eligible_nodes",
        "gpu_total",
        "gpu_used",
        "groups",
        "name",
        "nodes",
        "over_quota",
        "servers",
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
        self.servers: dict[str, None] = {}
        self.over_quota: dict[str, None] = {}
        self.subject_used: dict[str, int] = {}
        self.user_used: dict[str, int] = {}


class UsageIndex:
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
        self.pool_label = pool_label
        self._selectors: tuple[tuple[str, Mapping[str, str]], ...] = tuple(selectors)
        self.on_admission = on_admission
        self._nodes: dict[str, NodeRecord] = {}
        self._pods: dict[str, PodRecord] = {}
        self._pools: dict[str, _PoolState] = {}
        self._orphans: dict[str, dict[str, None]] = {}  # node name -> pods bound to unknown node
        self._unpooled: dict[str, None] = {}  # servers with no pool yet (unbound, no label)
        self._subject_total: dict[str, int] = {}
        self._user_total: dict[str, int] = {}
        self._by_admission: dict[str, str] = {}
        # Pods with no GPUs that are not servers: key -> node (None while unbound), and how
        # many are bound to each node.
        self._others: dict[str, str | None] = {}
        self._others_on: dict[str, int] = {}

    # --- feeding ---------------------------------------------------------------------------------

    def set_selectors(self, selectors: Sequence[tuple[str, Mapping[str, str]]]) -> None:
        """Change the label selectors of pools (registry reload) and re-place every node."""
        self._selectors = tuple(selectors)
        for node in list(self._nodes.values()):
            self._replace_node(node.name, self._pool_of(node.labels), node)

    def apply_node(self, event_type: str, node: Mapping[str, Any]) -> None:
        """One Node watch event (``ADDED``, ``MODIFIED``, ``DELETED``; others are ignored)."""
        meta = node.get("metadata") or {}
        name = meta.get("name")
        if not name:
            return
        if event_type == "DELETED":
            self._delete_node(name)
        elif event_type in ("ADDED", "MODIFIED"):
            self._upsert_node(name, meta, node)

    def apply_pod(self, event_type: str, pod: Mapping[str, Any]) -> None:
        """One Pod watch event (``ADDED``, ``MODIFIED``, ``DELETED``; others are ignored)."""
        meta = pod.get("metadata") or {}
        self._apply_pod(event_type, pod, meta, pod_key(meta))

    def _apply_pod(
        self, event_type: str, pod: Mapping[str, Any], meta: Mapping[str, Any], key: str
    ) -> None:
        if event_type == "DELETED":
            old = self._pods.pop(key, None)
            if old is not None:
                self._unlink(old)
                self._notify(old, "gone")
            else:
                self._forget_other(key)
            return
        if event_type not in ("ADDED", "MODIFIED"):
            return
        old = self._pods.get(key)
        if old is None and is_other(meta, pod):
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Succeeded" or phase == "Failed":
                self._forget_other(key)
            else:
                node = (pod.get("spec") or {}).get("nodeName")
                self._count_other(key, intern(node) if node else None)
            return
        new = read_pod(key, meta, pod, old)
        if new is None:  # finished: frees everything
            if old is not None:
                del self._pods[key]
                self._unlink(old)
                self._notify(old, "gone")
            else:
                self._forget_other(key)
            return
        if old is None:
            self._forget_other(key)  # it may have been one, and now counts
        elif same_pod(old, new):
            old.phase = new.phase  # phase alone changes nothing that is counted
            return
        else:
            self._unlink(old)
        self._pods[key] = new
        self._link(new)

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

    # --- pods that count for nothing but their node's number of pods -----------------------------

    def _count_other(self, key: str, node: str | None) -> None:
        """A pod with no GPUs that is not a server: only its key and node are kept (most pods of
        a large cluster are such; a full record for each would be most of the service's
        memory)."""
        others = self._others
        if key in others:
            before = others[key]
            if before == node:
                return
            if before is not None:
                _add(self._others_on, before, -1)
        others[key] = node
        if node is not None:
            _add(self._others_on, node, 1)

    def _forget_other(self, key: str) -> None:
        if key in self._others:
            node = self._others.pop(key)
            if node is not None:
                _add(self._others_on, node, -1)

    # --- nodes -----------------------------------------------------------------------------------

    def _pool_of(self, labels: Mapping[str, str]) -> str:
        pool = labels.get(self.pool_label)
        if pool:
            return pool
        for name, selector in self._selectors:
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                return name
        return DEFAULT_POOL

    def _upsert_node(self, name: str, meta: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        labels = meta.get("labels") or {}
        new = read_node(name, self._pool_of(labels), meta, obj)
        old = self._nodes.get(name)
        if old is not None and old.signature() == new.signature():
            old.labels = new.labels
            return
        self._replace_node(name, new.pool, old, new)

    def _replace_node(
        self, name: str, pool: str, old: NodeRecord | None, new: NodeRecord | None = None
    ) -> None:
        """Swap a node record, moving its pods' usage along (pool or capacity may have changed)."""
        if new is None:  # same node, new pool (selectors changed)
            assert old is not None
            if old.pool == pool:
                return
            new = NodeRecord(name)
            for attr in ("labels", "gpu_total", "gpu_type", "type_key", "flags", "taints"):
                setattr(new, attr, getattr(old, attr))
            new.hostname = old.hostname
            new.pool = pool
        pods: list[PodRecord] = []
        if old is not None:
            pods = [self._pods[k] for k in old.pods]
            for p in pods:
                self._unlink(p)
            self._remove_node(old)
        orphans = self._orphans.pop(name, {})
        for k in orphans:
            p = self._pods[k]
            self._unlink(p)
            pods.append(p)
        self._add_node(new)
        for p in pods:
            self._link(p)

    def _delete_node(self, name: str) -> None:
        old = self._nodes.get(name)
        if old is None:
            return
        pods = [self._pods[k] for k in old.pods]
        for p in pods:
            self._unlink(p)
        self._remove_node(old)
        for p in pods:
            self._link(p)  # bound to a node we no longer know: kept as orphans

    def _pool_state(self, name: str) -> _PoolState:
        ps = self._pools.get(name)
        if ps is None:
            ps = self._pools[name] = _PoolState(name)
        return ps

    def _add_node(self, node: NodeRecord) -> None:
        self._nodes[node.name] = node
        ps = self._pool_state(node.pool)
        ps.nodes[node.name] = None
        ps.gpu_total += node.gpu_total
        ps.gpu_used += node.gpu_used
        if not node.flags & BLOCKING:
            key: GroupKey = (node.gpu_type, node.type_key, node.taints)
            group = ps.groups.get(key)
            if group is None:
                group = ps.groups[key] = PlacementGroup(node.gpu_type, node.type_key, node.taints)
            node.group = group
            group._add(node.name, node.free)
            ps.eligible_nodes += 1
            ps.eligible_free += node.free

    def _remove_node(self, node: NodeRecord) -> None:
        del self._nodes[node.name]
        ps = self._pools[node.pool]
        del ps.nodes[node.name]
        ps.gpu_total -= node.gpu_total
        ps.gpu_used -= node.gpu_used
        if node.group is not None:
            node.group._remove(node.name, node.free)
            ps.eligible_nodes -= 1
            ps.eligible_free -= node.free
            if not len(node.group):
                del ps.groups[(node.group.gpu_type, node.group.type_key, node.group.taints)]
            node.group = None
        self._drop_if_empty(ps)

    def _drop_if_empty(self, ps: _PoolState) -> None:
        if not ps.nodes and not ps.servers and not ps.subject_used and not ps.user_used:
            del self._pools[ps.name]

    def _node_used(self, node: NodeRecord, delta: int) -> None:
        ps = self._pools[node.pool]
        if node.group is not None:
            before = node.free
            node.group._remove(node.name, before)
            node.gpu_used += delta
            node.group._add(node.name, node.free)
            ps.eligible_free += node.free - before
        else:
            node.gpu_used += delta
        ps.gpu_used += delta

    # --- pods ------------------------------------------------------------------------------------
    def _link(self, p: PodRecord) -> None:
        node = self._nodes.get(p.node) if p.node else None
        if p.node and node is None:
            self._orphans.setdefault(p.node, {})[p.key] = None
        if node is not None:
            node.pods[p.key] = None
            if p.gpus:
                self._node_used(node, p.gpus)
        pool = node.pool if node is not None else p.pool_label
        p.linked_pool = pool
        if p.user is not None:
            if pool is None:
                self._unpooled[p.key] = None
            else:
                ps = self._pool_state(pool)
                ps.servers[p.key] = None
                if p.over_quota and node is not None:
                    ps.over_quota[p.key] = None
                if p.gpus:
                    _add(ps.user_used, p.user, p.gpus)
                    if p.charged:
                        _add(ps.subject_used, p.charged, p.gpus)
            if p.gpus:
                _add(self._user_total, p.user, p.gpus)
                if p.charged:
                    _add(self._subject_total, p.charged, p.gpus)
        if p.admission:
            self._by_admission[p.admission] = p.key
            self._notify(p, "bound" if p.node else "pending")

    def _unlink(self, p: PodRecord) -> None:
        node = self._nodes.get(p.node) if p.node else None
        if p.node and node is None:
            orphans = self._orphans.get(p.node)
            if orphans is not None:
                orphans.pop(p.key, None)
                if not orphans:
                    del self._orphans[p.node]
        if node is not None:
            node.pods.pop(p.key, None)
            if p.gpus:
                self._node_used(node, -p.gpus)
        pool = p.linked_pool
        if p.user is not None:
            if pool is None:
                self._unpooled.pop(p.key, None)
            else:
                ps = self._pools[pool]
                ps.servers.pop(p.key, None)
                ps.over_quota.pop(p.key, None)
                if p.gpus:
                    _add(ps.user_used, p.user, -p.gpus)
                    if p.charged:
                        _add(ps.subject_used, p.charged, -p.gpus)
                self._drop_if_empty(ps)
            if p.gpus:
                _add(self._user_total, p.user, -p.gpus)
                if p.charged:
                    _add(self._subject_total, p.charged, -p.gpus)
        if p.admission and self._by_admission.get(p.admission) == p.key:
            del self._by_admission[p.admission]
        p.linked_pool = None

    def _notify(self, p: PodRecord, state: str) -> None:
        if p.admission and self.on_admission is not None:
            self.on_admission(p.admission, state)

    # --- reading: admission ----------------------------------------------------------------------

    def placement_groups(self, pool: str) -> Iterable[PlacementGroup]:
        """The pool's schedulable nodes, grouped by GPU type and taints."""
        ps = self._pools.get(pool)
        return ps.groups.values() if ps is not None else ()

    def pool_max_free(self, pool: str) -> int:
        """The most free GPUs on one schedulable node of ``pool`` (reservations not counted)."""
        ps = self._pools.get(pool)
        return max((g.max_free() for g in ps.groups.values()), default=0) if ps else 0

    def largest_node_gpus(self, pool: str) -> int:
        """The most GPUs one node of ``pool`` holds, free or not, schedulable or not."""
        ps = self._pools.get(pool)
        return max((self._nodes[n].gpu_total for n in ps.nodes), default=0) if ps else 0

    def node_free(self, node: str) -> int:
        n = self._nodes.get(node)
        return n.free if n is not None else 0

    def node_group(self, node: str) -> PlacementGroup | None:
        """The placement group a schedulable node is in (None when it takes no servers)."""
        n = self._nodes.get(node)
        return n.group if n is not None else None

    def node_gpu_type(self, node: str) -> str | None:
        """The GPU type of a known node ("" when it has none), None for an unknown node."""
        n = self._nodes.get(node)
        return n.gpu_type if n is not None else None

    def node_hostname(self, node: str) -> str:
        n = self._nodes.get(node)
        return n.hostname if n is not None else node

    def has_pool(self, pool: str) -> bool:
        return pool in self._pools

    def pool_totals(self, pool: str) -> tuple[int, int, int]:
        """``(GPUs, nodes, schedulable nodes)`` of a pool."""
        ps = self._pools.get(pool)
        if ps is None:
            return 0, 0, 0
        return ps.gpu_total, len(ps.nodes), ps.eligible_nodes

    def subject_used(self, pool: str, subject: str) -> int:
        """GPUs charged to ``subject`` (``group:NAME`` / ``user:NAME``) in ``pool``."""
        ps = self._pools.get(pool)
        return ps.subject_used.get(subject, 0) if ps is not None else 0

    def user_used(self, pool: str, user: str) -> int:
        """All of ``user``'s GPUs in ``pool``, whoever they are charged to."""
        ps = self._pools.get(pool)
        return ps.user_used.get(user, 0) if ps is not None else 0

    def subject_used_total(self, subject: str) -> int:
        return self._subject_total.get(subject, 0)

    def user_used_total(self, user: str) -> int:
        return self._user_total.get(user, 0)

    def over_quota_servers(self, pool: str) -> list[ServerUsage]:
        """Bound servers in ``pool`` that borrow GPUs: the candidates for reclaim."""
        ps = self._pools.get(pool)
        if ps is None:
            return []
        return [self._server(self._pods[k]) for k in ps.over_quota]

    def borrowed_gpus(self, pool: str) -> int:
        """GPUs of the bound servers in ``pool`` that borrow beyond their quota."""
        ps = self._pools.get(pool)
        return sum(self._pods[k].gpus for k in ps.over_quota) if ps is not None else 0

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
            largest_free_block=max((g.max_free() for g in ps.groups.values()), default=0),
            node_count=len(ps.nodes),
            schedulable_nodes=ps.eligible_nodes,
            gpu_types=tuple(sorted(types)),
            servers=len(ps.servers),
            pending_servers=pending,
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
            reasons=reasons_of(n.flags),
            schedulable=n.group is not None,
            pods=len(n.pods) + self._others_on.get(n.name, 0),
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

    def usage_by_subject(self, pool: str | None = None) -> dict[str, int]:
        """GPUs per charged subject, in one pool or across all."""
        if pool is None:
            return {k: v for k, v in self._subject_total.items() if v}
        ps = self._pools.get(pool)
        return {k: v for k, v in ps.subject_used.items() if v} if ps is not None else {}

    def usage_by_user(self, pool: str | None = None) -> dict[str, int]:
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


class Relist:
    """One fresh list of nodes or pods being fed into a :class:`UsageIndex`
    (:meth:`UsageIndex.relist`)."""

    def __init__(self, index: UsageIndex, kind: str):
        self.index = index
        self.kind = kind
        self.seen: set[str] = set()

    def add(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Some of the list's objects (a page), applied as updates."""
        index, seen = self.index, self.seen
        if self.kind == "nodes":
            for n in objects:
                name = (n.get("metadata") or {}).get("name")
                if name:
                    seen.add(name)
                    index.apply_node("MODIFIED", n)
            return
        for p in objects:
            meta = p.get("metadata") or {}
            key = pod_key(meta)
            seen.add(key)
            index._apply_pod("MODIFIED", p, meta, key)

    def finish(self) -> None:
        """The list is whole: what it did not have is gone."""
        index, seen = self.index, self.seen
        if self.kind == "nodes":
            for name in [n for n in index._nodes if n not in seen]:
                index._delete_node(name)
            return
        for key in [k for k in index._pods if k not in seen]:
            old = index._pods.pop(key)
            index._unlink(old)
            index._notify(old, "gone")
        for key in [k for k in index._others if k not in seen]:
            index._forget_other(key)
        self.seen = set()


def _add(counter: dict[str, int], key: str, delta: int) -> None:
    value = counter.get(key, 0) + delta
    if value:
        counter[key] = value
    else:
        del counter[key]
