"""GPUs promised to admitted requests whose pods the watch has not shown yet.

Admission is serialized, but between "admitted" and the pod being visible in the watch there is a
gap of a second or more; two spawns in that gap must not both get the last free GPUs. So each
admission holds a :class:`Reservation` that counts as used:

- against its **subject and user** (quota) until the pod *appears* (pending or bound): from then on
  the usage index counts the pod itself;
- against its **node** (capacity) until the pod is *bound*: a pending pod uses no node yet, and
  the node it was admitted for must stay free for it.

The usage index reports appearances through :meth:`Reservations.observe`. Reservations whose pod
never comes (the spawn failed, the hub died) are dropped by :meth:`Reservations.expire`. Time is
always passed in, never read from a clock here, so tests can move it.

All aggregate lookups are O(1): admission reads them for every pool it considers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .amounts import Amount, whole_if_whole
from .labels import GPU_RESOURCE


@dataclass(frozen=True)
class Reservation:
    """What an admission promised: ``gpus`` units of ``resource`` on ``node`` of ``pool``,
    charged to ``charged``. ``equivalents`` is what it counts against quotas (GPU-equivalents;
    None: ``gpus``, as for whole GPUs)."""

    admission_id: str
    pool: str
    node: str | None
    gpus: int
    user: str
    charged: str
    over_quota: bool
    expires_at: float
    resource: str = GPU_RESOURCE
    equivalents: Amount | None = None
    #: The shape id when not whole GPUs (``mig-3g.40gb``...)
    shape: str | None = None

    @property
    def quota(self) -> Amount:
        """What it counts against quotas while its pod is not seen."""
        return self.equivalents if self.equivalents is not None else self.gpus


class _Entry:
    __slots__ = ("holds_node", "holds_quota", "reservation")

    def __init__(self, reservation: Reservation):
        self.reservation = reservation
        self.holds_quota = True
        self.holds_node = reservation.node is not None


def _add(counter: dict[Any, Any], key: Any, delta: Amount) -> None:
    value = whole_if_whole(counter.get(key, 0) + delta)
    if value:
        counter[key] = value
    else:
        counter.pop(key, None)


class Reservations:
    """The live reservations, with per-node, per-subject and per-user sums kept incrementally."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._pool_nodes: dict[str, dict[str, int]] = {}
        # pool -> (node, resource) -> units, for resources other than nvidia.com/gpu
        self._pool_units: dict[str, dict[tuple[str, str], int]] = {}
        self._subject: dict[str, dict[str, Amount]] = {}  # pool -> subject -> GPU-equivalents
        self._user: dict[str, dict[str, Amount]] = {}  # pool -> user -> GPU-equivalents
        self._subject_total: dict[str, Amount] = {}
        self._user_total: dict[str, Amount] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = 0
        #: Per pool, how many times what is held there changed (never reset)
        self.pool_changes: dict[str, int] = {}
        #: How many changes of any pool's (never reset)
        self.changes = 0
        #: Told of each reservation dropped (released, expired, its pod bound or gone)
        self.on_release: Callable[[Reservation], None] | None = None

    # --- changing --------------------------------------------------------------------------------

    def add(self, reservation: Reservation) -> None:
        """Hold ``reservation``; an admission id can only be reserved once."""
        aid = reservation.admission_id
        if not aid:
            raise ValueError("a reservation needs an admission id")
        if aid in self._entries:
            raise ValueError(f"admission {aid!r} already holds a reservation")
        entry = _Entry(reservation)
        self._entries[aid] = entry
        self._count_quota(reservation, 1)
        if entry.holds_node:
            self._count_node(reservation, 1)
        self._seq += 1
        heapq.heappush(self._heap, (reservation.expires_at, self._seq, aid))

    def release(self, admission_id: str) -> Reservation | None:
        """Drop a reservation (spawn finished, failed or was cancelled); None if unknown."""
        entry = self._entries.pop(admission_id, None)
        if entry is None:
            return None
        if entry.holds_quota:
            self._count_quota(entry.reservation, -1)
        if entry.holds_node:
            self._count_node(entry.reservation, -1)
        if self.on_release is not None:
            self.on_release(entry.reservation)
        return entry.reservation

    def observe(self, admission_id: str, state: str) -> None:
        """The usage index saw the pod: ``"pending"``, ``"bound"`` or ``"gone"``.

        Pass this method as :class:`~jupyter_gpupool.core.usage.index.UsageIndex`'s ``on_admission``.
        """
        entry = self._entries.get(admission_id)
        if entry is None:
            return
        if state == "pending":
            if entry.holds_quota:
                entry.holds_quota = False
                self._count_quota(entry.reservation, -1)
        else:  # bound or gone: the index now counts the pod, or nothing is left to hold
            self.release(admission_id)

    def expire(self, now: float) -> list[Reservation]:
        """Drop and return the reservations whose ``expires_at`` is at or before ``now``."""
        out: list[Reservation] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, aid = heapq.heappop(self._heap)
            entry = self._entries.get(aid)
            # The heap may hold ids released meanwhile (or released and reused): skip those.
            if entry is not None and entry.reservation.expires_at <= now:
                released = self.release(aid)
                if released is not None:
                    out.append(released)
        return out

    def _count_quota(self, r: Reservation, sign: int) -> None:
        self.changes += 1
        self.pool_changes[r.pool] = self.pool_changes.get(r.pool, 0) + 1
        amount = r.quota
        if not amount:
            return
        _add(self._subject.setdefault(r.pool, {}), r.charged, sign * amount)
        _add(self._user.setdefault(r.pool, {}), r.user, sign * amount)
        _add(self._subject_total, r.charged, sign * amount)
        _add(self._user_total, r.user, sign * amount)

    def _count_node(self, r: Reservation, sign: int) -> None:
        self.changes += 1
        self.pool_changes[r.pool] = self.pool_changes.get(r.pool, 0) + 1
        if r.node is None or not r.gpus:
            return
        if r.resource == GPU_RESOURCE:
            nodes = self._pool_nodes.setdefault(r.pool, {})
            _add(nodes, r.node, sign * r.gpus)
            if not nodes:
                del self._pool_nodes[r.pool]
        else:
            units = self._pool_units.setdefault(r.pool, {})
            _add(units, (r.node, r.resource), sign * r.gpus)
            if not units:
                del self._pool_units[r.pool]

    # --- reading ---------------------------------------------------------------------------------

    def get(self, admission_id: str) -> Reservation | None:
        entry = self._entries.get(admission_id)
        return entry.reservation if entry is not None else None

    def __contains__(self, admission_id: object) -> bool:
        return admission_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Reservation]:
        return iter([e.reservation for e in self._entries.values()])

    def pool_nodes(self, pool: str) -> Mapping[str, int]:
        """``nvidia.com/gpu`` units held per node of ``pool`` (only nodes with a reservation)."""
        return self._pool_nodes.get(pool, {})

    def pool_units(self, pool: str) -> Mapping[tuple[str, str], int]:
        """Units of the other shape resources (MIG devices, renamed shared GPUs) held per
        ``(node, resource)`` of ``pool``."""
        return self._pool_units.get(pool, {})

    def subject_reserved(self, pool: str, subject: str) -> Amount:
        return self._subject.get(pool, {}).get(subject, 0)

    def user_reserved(self, pool: str, user: str) -> Amount:
        return self._user.get(pool, {}).get(user, 0)

    def subject_reserved_total(self, subject: str) -> Amount:
        return self._subject_total.get(subject, 0)

    def user_reserved_total(self, user: str) -> Amount:
        return self._user_total.get(user, 0)
