"""Capacity: the one node of a pool that takes a request, or the servers to reclaim for it.

A request fits where ONE schedulable, Ready node of the right GPU type, whose taints the pool's
template tolerates, has the GPUs free, reservations counted as used: free GPUs spread over
several nodes are no use to one pod (fragmentation). ``binpack`` takes the fullest node that fits,
``spread`` the emptiest.

**Reclaim.** When a request is within quota and fails only for capacity, and over-quota
(borrowing) servers hold the GPUs, :meth:`Capacity.reclaim` names the servers to stop: on one
node, so that the freed GPUs form a block, newest first, as few as needed (ties: fewer GPUs freed,
then the node whose victims are newer).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ..kube.tolerations import tolerates
from ..pools.model import Platform, Pool
from ..usage.records import PlacementGroup
from ..usage.rows import ServerUsage
from .decision import Context, ReclaimPlan
from .overrides import GPU_TOLERATION


@dataclass
class Fit:
    node: str | None = None
    group: PlacementGroup | None = None
    nodes_fit: int = 0
    largest: int = 0


class Capacity:
    """Capacity of the candidate node groups of one pool, reservations counted as used."""

    def __init__(
        self,
        groups: list[PlacementGroup],
        ctx: Context,
        pool: str,
        held: Collection[str] = (),
    ):
        self.groups = groups
        self.ctx = ctx
        ids = {id(g) for g in groups}
        # Reserved nodes of the candidate groups: node -> (free, free after reservations), and
        # how many reserved nodes of each group have each number of free GPUs. A ``held`` node
        # (:mod:`.holds`: a request within quota waits for it) counts as having none free.
        self.reserved: dict[int, dict[str, tuple[int, int]]] = {}
        self.reserved_at: dict[int, dict[int, int]] = {}
        reserved = ctx.res.pool_nodes(pool)
        nodes = (
            itertools.chain(reserved, (h for h in held if h not in reserved)) if held else reserved
        )
        for node, g, free in ctx.usage.placed(nodes):
            gid = id(g)
            if gid not in ids:
                continue
            eff = 0 if node in held else free - reserved[node]
            by_node = self.reserved.get(gid)
            if by_node is None:
                by_node = self.reserved[gid] = {}
                at = self.reserved_at[gid] = {}
            else:
                at = self.reserved_at[gid]
            by_node[node] = (free, eff)
            at[free] = at.get(free, 0) + 1

    def fit(self, n: int, spread: bool) -> Fit:
        out = Fit()
        best_free: int | None = None
        for g in self.groups:
            res = self.reserved.get(id(g), {})
            reserved_at = self.reserved_at.get(id(g), {})
            top = len(g.counts) - 1
            frees = range(top, n - 1, -1) if spread else range(n, top + 1)
            for f in frees:
                count = g.counts[f]
                if count and count > reserved_at.get(f, 0):
                    if best_free is None or (f > best_free if spread else f < best_free):
                        node = next(nd for nd in g.members[f] if nd not in res)
                        best_free, out.node, out.group = f, node, g
                    break
            for f in range(top, -1, -1):
                if f <= out.largest:
                    break
                if g.counts[f] > reserved_at.get(f, 0):
                    out.largest = f
                    break
            out.nodes_fit += g.count_at_least(n)
            for node, (free, eff) in res.items():
                out.largest = max(out.largest, eff)
                if free >= n > eff:
                    out.nodes_fit -= 1
                if eff >= n and (
                    best_free is None or (eff > best_free if spread else eff < best_free)
                ):
                    best_free, out.node, out.group = eff, node, g
        return out

    def reclaim(self, pool: str, n: int) -> ReclaimPlan | None:
        usage = self.ctx.usage
        ids = {id(g) for g in self.groups}
        by_node: dict[str, list[ServerUsage]] = {}
        for s in self.ctx.reclaimable(pool):
            if s.node is None or s.state == "terminating":
                continue
            g = usage.node_group(s.node)
            if g is not None and id(g) in ids:
                by_node.setdefault(s.node, []).append(s)
        held = self.ctx.res.pool_nodes(pool)
        needs = {node: n - (usage.node_free(node) - held.get(node, 0)) for node in by_node}
        return cheapest_reclaim(pool, by_node, needs, lambda s: s.gpus)


def cheapest_reclaim(
    pool: str,
    by_node: dict[str, list[ServerUsage]],
    needs: dict[str, int],
    size: Callable[[ServerUsage], int],
) -> ReclaimPlan | None:
    """Of the over-quota servers on each node (``by_node``), the fewest to stop, newest first,
    so that the node frees ``needs[node]`` units (``size``: what one server frees); ties: fewer
    units freed, then the node whose victims are newer. None when no node can free enough."""
    best: tuple[int, int, str] | None = None
    plan: ReclaimPlan | None = None
    for node, servers in by_node.items():
        need = needs[node]
        servers.sort(key=lambda s: (s.created, s.namespace, s.name), reverse=True)
        chosen: list[ServerUsage] = []
        freed = 0
        for s in servers:
            if freed >= need:
                break
            chosen.append(s)
            freed += size(s)
        if freed < need or not chosen:
            continue
        key = (len(chosen), freed, chosen[-1].created)
        if best is None or key[:2] < best[:2] or (key[:2] == best[:2] and key[2] > best[2]):
            best = key
            plan = ReclaimPlan(pool, node, tuple(chosen), freed)
    return plan


def candidate_groups(
    pool: Pool, platform: Platform | None, type_filter: str | None, ctx: Context
) -> tuple[list[PlacementGroup], list[PlacementGroup]]:
    """``(candidates, of the right type but with untolerated taints)`` for this request."""
    out: list[PlacementGroup] = []
    untolerated: list[PlacementGroup] = []
    tolerations_by_platform: dict[str | None, list[Any]] = {}
    for g in ctx.usage.placement_groups(pool.name):
        if type_filter is not None and g.gpu_type != type_filter:
            continue
        if g.taints:
            plat = platform if platform is not None else pool.platform_of_type(g.gpu_type)
            pname = plat.name if plat else None
            tols = tolerations_by_platform.get(pname)
            if tols is None:
                tmpl = ctx.registry.pod_template(pool.name, pname)
                tols = list(tmpl.get("tolerations", ()))
                if ctx.req.gpus:
                    tols.append(GPU_TOLERATION)
                tolerations_by_platform[pname] = tols
            if not all(tolerates(tols, k, v, e) for k, v, e in g.taints):
                untolerated.append(g)
                continue
        out.append(g)
    return out, untolerated


def no_fit_reason(
    pool: Pool,
    n: int,
    fit: Fit,
    groups: list[PlacementGroup],
    untolerated: list[PlacementGroup],
    type_filter: str | None,
    ctx: Context,
) -> str:
    total_gpus, nodes, schedulable = ctx.usage.pool_totals(pool.name)
    if nodes == 0:
        return "this pool has no nodes"
    if schedulable == 0:
        busy = ctx.usage.repartitioning(pool.name)
        return (
            f"none of its {nodes} node{'s' if nodes != 1 else ''} can take servers right now "
            + (f"({'; '.join(busy)})" if busy else "(not ready, under pressure or cordoned)")
        )
    if not groups:
        if untolerated:
            return "its nodes' taints are not tolerated by this pool's template"
        if type_filter:
            return f"no node here has GPU type {type_filter} ready for servers"
        return "no node here can take servers right now"
    if n and total_gpus == 0:
        return "this pool has no GPUs"
    why = f"no node has {n} free GPU{'s' if n != 1 else ''} (largest free block: {fit.largest})"
    if busy := ctx.usage.repartitioning(pool.name):
        why += f"; {'; '.join(busy)}"
    return why
