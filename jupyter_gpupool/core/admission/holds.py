"""What requests waiting in line within their quota hold back from borrowers.

A request that waits in line within its quota in a pool holds back there only what it could
use (*decided*; also in ``docs/pools.md``): the shape it asks for (whole GPUs, or a MIG instance
or a shared GPU's replica by its id), of the GPU type it asks for, and for whole GPUs only the
nodes that hold at least the GPUs it asks for (a node too small for it can never take it). A
borrower (a request that would be over quota) is not placed on what is held; it may take
anything else: a MIG instance beside a request that waits for whole A100s, a GPU on a node too
small for the one waiting, a GPU of another type. A request within quota is never held back.

:class:`Holds` is what :attr:`AdmissionState.promised <.decision.AdmissionState>` carries: the
line's pass builds it (:func:`~.queue.holds_of`) and the walk asks it where a borrower may go.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ..usage.records import PlacementGroup, ShapeCount

__all__ = ["Hold", "Holds"]


@dataclass(frozen=True)
class Hold:
    """One waiting request's claim in one pool: ``shape`` (None: whole GPUs) of ``gpu_type``
    (None: any type), and for whole GPUs the ``gpus`` it asks for on one node."""

    pool: str
    shape: str | None = None
    gpu_type: str | None = None
    gpus: int = 1


#: (pool, shape) -> GPU type (None: any) -> the fewest GPUs a waiting request of it asks for
_Index = dict[tuple[str, str | None], dict[str | None, int]]


@dataclass(frozen=True)
class Holds:
    """The holds of the requests waiting within quota, asked per pool and shape."""

    items: frozenset[Hold] = field(default_factory=frozenset)

    @staticmethod
    def of(holds: Iterable[Hold]) -> Holds:
        return Holds(frozenset(holds))

    def __or__(self, other: Holds) -> Holds:
        if not other.items:
            return self
        if not self.items:
            return other
        return Holds(self.items | other.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def only(self, pools: Container[str]) -> Holds:
        """The holds in these pools."""
        return Holds(frozenset(h for h in self.items if h.pool in pools))

    @cached_property
    def _index(self) -> _Index:
        out: _Index = {}
        for h in self.items:
            by_type = out.setdefault((h.pool, h.shape), {})
            by_type[h.gpu_type] = min(by_type.get(h.gpu_type, h.gpus), h.gpus)
        return out

    def _fewest(self, pool: str, shape: str | None, gpu_type: str | None) -> int | None:
        """The fewest GPUs a hold on ``shape`` in ``pool`` that covers ``gpu_type`` asks for."""
        by_type = self._index.get((pool, shape))
        if not by_type:
            return None
        found = [n for t, n in by_type.items() if t is None or t == gpu_type]
        return min(found) if found else None

    def holds_shape(self, pool: str, shape: str, model: str | None) -> bool:
        """Whether units of ``shape`` (not whole GPUs) of GPU ``model`` are held in ``pool``."""
        return self._fewest(pool, shape, model) is not None

    def free_counts(self, pool: str, shape: str, counts: Sequence[ShapeCount]) -> list[ShapeCount]:
        """The counts of ``shape`` a borrower may still take units of (their model not held)."""
        if (pool, shape) not in self._index:
            return list(counts)
        return [c for c in counts if not self.holds_shape(pool, shape, c.shape.model)]

    def free_shape_groups(
        self, pool: str, shape: str, groups: Sequence[PlacementGroup]
    ) -> list[PlacementGroup]:
        """The placement groups of ``shape`` (its units are ``nvidia.com/gpu``) a borrower may
        still take a unit of."""
        if (pool, shape) not in self._index:
            return list(groups)
        return [
            g
            for g in groups
            if not self.holds_shape(pool, shape, g.shape.model if g.shape else g.gpu_type)
        ]

    def whole(
        self,
        pool: str,
        groups: Sequence[PlacementGroup],
        node_gpus: Callable[[str], int],
    ) -> tuple[list[PlacementGroup], frozenset[str]]:
        """For a borrower of whole GPUs: of its candidate ``groups``, those it may still use,
        and the nodes held in them (``node_gpus(node)``: the whole GPUs a node holds). A group
        every node of which is held (a hold of one GPU covers every node) is left out whole."""
        if (pool, None) not in self._index:
            return list(groups), frozenset()
        kept: list[PlacementGroup] = []
        held: set[str] = set()
        for g in groups:
            fewest = self._fewest(pool, None, g.gpu_type)
            if fewest is None:
                kept.append(g)
                continue
            if fewest <= 1:
                continue  # every node of the group could take it
            for bucket in g.members:
                held.update(n for n in bucket if node_gpus(n) >= fewest)
            kept.append(g)
        return kept, frozenset(held)
