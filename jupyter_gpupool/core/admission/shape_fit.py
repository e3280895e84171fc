"""Capacity for a request of one shape: the node of a pool that has a unit of it free.

A request for whole GPUs goes to the placement groups of whole GPUs only (a time-sliced node's
``nvidia.com/gpu`` units are replicas, not GPUs). A request for a shape whose units are the
node's ``nvidia.com/gpu`` (time-sliced or MPS replicas not renamed, MIG single strategy, HAMi)
goes to the placement groups of that shape, counted as today (:mod:`.capacity`). A request for
a shape with a resource of its own (``nvidia.com/mig-<profile>``, ``nvidia.com/gpu.shared``)
goes to :func:`fit_units`: one schedulable node whose taints the pool's template tolerates, with
the units free, reservations of that resource counted as used; ``binpack`` takes the fullest
such node, ``spread`` the emptiest, as for GPUs.

One admission never spans two kinds or two nodes: a server gets units of one resource on one
node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..pools.model import Pool
from ..usage.amounts import Amount
from ..usage.labels import GFD_PRODUCT_LABEL
from ..usage.records import PlacementGroup, ShapeCount
from ..usage.rows import ServerUsage
from ..usage.shapes import REPLICAS_LABEL, WHOLE, Shape
from .capacity import cheapest_reclaim
from .decision import Context, ReclaimPlan

#: What ``shape`` in a request may say for whole GPUs.
WHOLE_IDS = ("", WHOLE)


def wants_shape(shape_id: str | None) -> str | None:
    """The shape id a request entry asks for, None for whole GPUs."""
    return None if shape_id is None or shape_id in WHOLE_IDS else shape_id


def offered(ctx: Context, pool: str, shape_id: str, gpu_type: str | None) -> list[ShapeCount]:
    """The pool's counts of the shape with this id (one per model and resource), of
    ``gpu_type`` when the request names one."""
    return [
        c
        for c in ctx.usage.shape_counts(pool)
        if c.shape.id == shape_id and (gpu_type is None or c.shape.model == gpu_type)
    ]


def offered_ids(ctx: Context, pool: str) -> list[str]:
    """The ids of the shapes other than whole GPUs the pool's nodes offer, sorted."""
    return sorted({c.shape.id for c in ctx.usage.shape_counts(pool) if c.shape.kind != WHOLE})


def need_of(counts: Iterable[ShapeCount], units: int) -> Amount:
    """What ``units`` of the shape count against quotas: the largest equivalent among its
    models (the node is not chosen yet; the one charged is never more)."""
    return units * max(c.shape.equivalent for c in counts)


def unit_groups(groups: list[PlacementGroup], shape_id: str | None) -> list[PlacementGroup]:
    """The placement groups whose ``nvidia.com/gpu`` units are of this shape (None: whole)."""
    if shape_id is None:
        return [g for g in groups if g.shape is None]
    return [g for g in groups if g.shape is not None and g.shape.id == shape_id]


#: The labels GFD writes that tell nodes of different shapes of ``nvidia.com/gpu`` apart: the
#: product (``-SHARED`` when time-sliced and not renamed, ``-MIG-<profile>`` under the single
#: strategy) and the replicas.
PIN_LABELS = (GFD_PRODUCT_LABEL, REPLICAS_LABEL)


def shape_pin(ctx: Context, pool: str, node: str) -> dict[str, str]:
    """Where a pool's schedulable nodes offer ``nvidia.com/gpu`` in more than one shape, the
    admitted node's :data:`PIN_LABELS` (a node selector that keeps the pod on nodes of the same
    shape); else nothing."""
    shapes = {g.shape for g in ctx.usage.placement_groups(pool)}
    if len(shapes) <= 1:
        return {}
    labels = ctx.usage.node_labels(node)
    return {k: labels[k] for k in PIN_LABELS if k in labels}


def shape_rule_refusal(pool: Pool, shape_id: str, ctx: Context) -> str | None:
    """Why the pool file's ``shapes`` refuse this shape (``whole`` for whole GPUs) to the
    request's user: not listed, or the user already runs its ``max-per-user`` servers of it
    here (running, starting, or admitted and not yet seen); None when they let it in."""
    if not pool.shapes:
        return None
    rule = pool.shape_rule(shape_id)
    if rule is None:
        listed = ", ".join(r.id for r in pool.shapes)
        return f"this pool offers {listed} only (not {shape_id})"
    if rule.max_per_user is None:
        return None
    user = ctx.req.user
    mine = None if shape_id == WHOLE else shape_id
    running = sum(
        1
        for s in ctx.usage.servers(pool.name, user)
        if s.units and s.shape == mine and s.state != "terminating"
    )
    held = sum(
        1
        for r in ctx.res
        if r.pool == pool.name
        and r.user == user
        and r.gpus
        and r.shape == mine
        and ctx.usage.admission_state(r.admission_id) is None
    )
    if running + held >= rule.max_per_user:
        name = rule.name or shape_id
        return (
            f"you run {running + held} {name} server{'s' if running + held != 1 else ''} here, "
            f"this pool's limit per user"
        )
    return None


@dataclass
class UnitFit:
    node: str | None = None
    shape: Shape | None = None
    gpu_type: str = ""
    nodes_fit: int = 0
    largest: int = 0


def fit_units(
    counts: list[ShapeCount],
    n: int,
    spread: bool,
    tolerated: list[PlacementGroup],
    ctx: Context,
    pool: str,
) -> UnitFit:
    """The node of ``counts`` (one shape, resources other than ``nvidia.com/gpu``) with ``n``
    units free, reservations counted as used, on a node of a ``tolerated`` placement group."""
    usage = ctx.usage
    held = ctx.res.pool_units(pool)
    ok = {id(g) for g in tolerated}
    out = UnitFit()
    best: int | None = None
    for count in counts:
        resource = count.shape.resource
        for free in range(len(count.counts) - 1, -1, -1):
            for node in count.members[free]:
                group = usage.node_group(node)
                if group is None or id(group) not in ok:
                    continue
                eff = free - held.get((node, resource), 0)
                out.largest = max(out.largest, eff)
                if eff < n:
                    continue
                out.nodes_fit += 1
                if best is None or (eff > best if spread else eff < best):
                    best, out.node, out.shape, out.gpu_type = eff, node, count.shape, group.gpu_type
    return out


def reclaim_units(
    counts: list[ShapeCount],
    shape_id: str,
    n: int,
    tolerated: list[PlacementGroup],
    ctx: Context,
    pool: str,
) -> ReclaimPlan | None:
    """The over-quota servers of this shape to stop so that ``n`` units of it come free on one
    node (a MIG device is given back by stopping the server that holds it), as
    :meth:`.capacity.Capacity.reclaim` does for GPUs: newest first, as few as needed, then the
    node whose victims are newer."""
    usage = ctx.usage
    ok = {id(g) for g in tolerated}
    held = ctx.res.pool_units(pool)
    resources = {c.shape.resource for c in counts}
    by_node: dict[str, list[ServerUsage]] = {}
    for s in ctx.reclaimable(pool):
        if s.node is None or s.state == "terminating" or s.shape != shape_id or not s.units:
            continue
        group = usage.node_group(s.node)
        if group is not None and id(group) in ok:
            by_node.setdefault(s.node, []).append(s)
    needs = {}
    for node in by_node:
        free = 0
        for resource in resources:
            found = usage.node_unit_count(node, resource)
            if found is not None:
                free += found[1] - held.get((node, resource), 0)
        needs[node] = n - free
    return cheapest_reclaim(pool, by_node, needs, lambda s: s.units)
