"""The pods of the usage index: each pod's GPUs counted on its node, pool, user and subject.

A pod event links the pod's new record and unlinks its old one (:meth:`PodBook._link`,
:meth:`PodBook._unlink`); a node event does the same to the node's pods, since a node that
changes pool or capacity takes its pods' usage with it, so the node feed is here too. The counts
per node and pool are :class:`.nodes.NodeBook`'s; the accounting rules are in
:mod:`.index`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .amounts import Amount
from .labels import BOOKING_SUBJECT_PREFIX
from .nodes import NodeBook, add_amount, add_count
from .records import (
    NodeRecord,
    PodRecord,
    intern,
    is_other,
    pod_key,
    read_node,
    read_pod,
    same_pod,
)

#: Called with (admission id, "pending" | "bound" | "gone") when a pod carrying an admission
#: label appears, is bound, or ends; :meth:`.reservations.Reservations.observe`.
AdmissionListener = Callable[[str, str], None]


class PodBook(NodeBook):
    """The usage index's pods, fed by watch events (:class:`~.index.UsageIndex` is one)."""

    def __init__(
        self,
        pool_label: str,
        selectors: Sequence[tuple[str, Mapping[str, str]]],
        on_admission: AdmissionListener | None,
    ):
        super().__init__(pool_label, selectors)
        self.on_admission = on_admission
        self._pods: dict[str, PodRecord] = {}
        self._orphans: dict[str, dict[str, None]] = {}  # node name -> pods bound to unknown node
        self._unpooled: dict[str, None] = {}  # servers with no pool yet (unbound, no label)
        self._subject_total: dict[str, Amount] = {}
        self._user_total: dict[str, Amount] = {}
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
                add_count(self._others_on, before, -1)
        others[key] = node
        if node is not None:
            add_count(self._others_on, node, 1)

    def _forget_other(self, key: str) -> None:
        if key in self._others:
            node = self._others.pop(key)
            if node is not None:
                add_count(self._others_on, node, -1)

    # --- nodes, which take their pods along ------------------------------------------------------

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
            for attr in ("labels", "gpu_total", "gpu_type", "type_key", "flags", "taints", "offer"):
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

    # --- pods ------------------------------------------------------------------------------------

    def _link(self, p: PodRecord) -> None:
        node = self._nodes.get(p.node) if p.node else None
        if p.node and node is None:
            self._orphans.setdefault(p.node, {})[p.key] = None
        if node is not None:
            node.pods[p.key] = None
            if p.gpus:
                self._node_used(node, p.gpus)
            if p.shapes:
                self._node_shapes_used(node, p.shapes, 1)
        pool = node.pool if node is not None else p.pool_label
        p.linked_pool = pool
        self._changed(pool)
        if p.user is not None:
            if pool is None:
                self._unpooled[p.key] = None
            else:
                ps = self._pool_state(pool)
                ps.servers[p.key] = None
                if p.over_quota and node is not None:
                    ps.over_quota[p.key] = None
                if p.quota:
                    add_amount(ps.user_used, p.user, p.quota)
                    if p.charged:
                        add_amount(ps.subject_used, p.charged, p.quota)
                        if p.charged.startswith(BOOKING_SUBJECT_PREFIX):
                            ps.booked[p.charged] = None
            if p.quota:
                add_amount(self._user_total, p.user, p.quota)
                if p.charged:
                    add_amount(self._subject_total, p.charged, p.quota)
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
            if p.shapes:
                self._node_shapes_used(node, p.shapes, -1)
        pool = p.linked_pool
        self._changed(pool)
        if p.user is not None:
            if pool is None:
                self._unpooled.pop(p.key, None)
            else:
                ps = self._pools[pool]
                ps.servers.pop(p.key, None)
                ps.over_quota.pop(p.key, None)
                if p.quota:
                    add_amount(ps.user_used, p.user, -p.quota)
                    if p.charged:
                        add_amount(ps.subject_used, p.charged, -p.quota)
                self._drop_if_empty(ps)
            if p.quota:
                add_amount(self._user_total, p.user, -p.quota)
                if p.charged:
                    add_amount(self._subject_total, p.charged, -p.quota)
        if p.admission and self._by_admission.get(p.admission) == p.key:
            del self._by_admission[p.admission]
        p.linked_pool = None

    def _notify(self, p: PodRecord, state: str) -> None:
        if p.admission and self.on_admission is not None:
            self.on_admission(p.admission, state)
