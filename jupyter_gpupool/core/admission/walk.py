"""Admission: which pool takes a server, charged to whom, and why earlier pools did not.

:func:`decide` is pure: it reads the registry (pools, quotas), the usage index and the
reservations, and returns a :class:`Decision`; the service holds one lock around decide + reserve so
decisions are serialized. It walks the user's pools in order and takes the first where

1. **access** - the user or one of their groups is allowed (pools without ``access``: everyone);
2. **validation** - the GPU count passes the pool's ``limits`` and the GPU type exists there;
3. **quota** - a subject can be charged (:mod:`.quota` says who), and neither the user's GPU-hour
   budget nor that of the group charged is spent there (:mod:`..accounting.budgets`); a borrower
   (over quota) takes nothing a request waiting in line within its quota there could use
   (``AdmissionState.promised``, :mod:`.holds`): not that shape, of that GPU type, on the nodes
   that could take it;
4. **capacity** - ONE schedulable, Ready node has the GPUs free, reservations counted as used
   (free GPUs spread over several nodes are no use to one pod: fragmentation).

The steps live in their own modules: the request and decision types in :mod:`.decision`, who is
charged (3) in :mod:`.quota`, the node that fits (4) and reclaim in :mod:`.capacity`, the pod
settings of an admitted request in :mod:`.overrides`. When a request within quota fails only for
capacity and over-quota servers hold the GPUs, the decision names the servers to stop and the walk
stops there, because a guarantee means the guaranteed pool; a request with ``reclaim=False``
keeps walking instead.

This module is the entry point: it re-exports the names callers use with :func:`decide`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..accounting.budgets import refusal
from ..pools.model import Platform, Pool
from ..time.bookings_in_force import booking_of
from ..usage.labels import GPU_RESOURCE, is_label_value
from ..usage.shapes import WHOLE, Shape
from .booking_charge import charge as charge_with_bookings
from .capacity import Capacity, candidate_groups, no_fit_reason
from .decision import (
    AdmissionRequest,
    AdmissionState,
    Context,
    Decision,
    ReclaimPlan,
    ReservationView,
    Skip,
    UsageView,
    gpus_text,
    group_subject,
    user_subject,
)
from .overrides import GPU_TOLERATION, build_overrides
from .quota import Headroom, quota_headroom
from .shape_fit import (
    fit_units,
    need_of,
    offered,
    offered_ids,
    reclaim_units,
    shape_pin,
    shape_rule_refusal,
    unit_groups,
)

__all__ = [
    "GPU_TOLERATION",
    "AdmissionRequest",
    "AdmissionState",
    "Decision",
    "Headroom",
    "ReclaimPlan",
    "ReservationView",
    "Skip",
    "UsageView",
    "build_overrides",
    "decide",
    "group_subject",
    "quota_headroom",
    "user_subject",
]


#: Why a borrower is refused what is free: requests within quota wait in line for it.
PROMISED = (
    "what is free here is promised to requests waiting in line within their quota: "
    "it may not be borrowed now"
)


@dataclass
class _Outcome:
    skip: Skip | None = None
    decision: Decision | None = None
    reclaim: ReclaimPlan | None = None


def _or_list(items: Sequence[object]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def validate_gpus(pool: Pool, n: int) -> str | None:
    """Why the pool's ``limits`` refuse a server of ``n`` GPUs, or None."""
    lim = pool.limits
    if n < lim.min_gpus:
        return f"servers here need at least {gpus_text(lim.min_gpus)} (you asked for {n})"
    if lim.max_gpus is not None and n > lim.max_gpus:
        return f"servers here may use at most {gpus_text(lim.max_gpus)} (you asked for {n})"
    if lim.allowed_gpus and n not in lim.allowed_gpus:
        return f"servers here may use {_or_list(lim.allowed_gpus)} GPUs (you asked for {n})"
    return None


def _evaluate(name: str, shape_id: str | None, ctx: Context) -> _Outcome:
    req, reg = ctx.req, ctx.registry
    pool = reg.pool(name)
    if pool is None:
        if not ctx.usage.has_pool(name):
            return _Outcome(Skip(name, "there is no such pool"))
        pool = Pool(name)  # nodes carry the label but no file defines it: a bare gpuctl pool
    if not pool.allows(req.user, req.groups):
        return _Outcome(Skip(name, "you don't have access to this pool"))
    n = req.gpus
    if n and shape_id is not None:
        return _evaluate_shape(pool, shape_id, ctx)
    if problem := validate_gpus(pool, n):
        return _Outcome(Skip(name, problem))
    if n and (problem := shape_rule_refusal(pool, WHOLE, ctx)):
        return _Outcome(Skip(name, problem))

    platform: Platform | None = None
    type_filter: str | None = None
    if req.gpu_type:
        if pool.platforms:
            platform = pool.platform_for(req.gpu_type)
            if platform is None:
                types = ", ".join(p.gpu_type for p in pool.platforms.values())
                return _Outcome(Skip(name, f"this pool has no GPU type {req.gpu_type} ({types})"))
            type_filter = platform.gpu_type
        else:
            type_filter = req.gpu_type
    elif pool.default_platform:
        platform = pool.platforms[pool.default_platform]
        type_filter = platform.gpu_type

    ctx.need = n
    charge = _charge(pool, ctx)
    if isinstance(charge, Skip):
        return _Outcome(charge)
    charged, over_quota = charge
    guaranteed = reg.quota(name) is not None or booking_of(charged) is not None

    groups, untolerated = candidate_groups(pool, platform, type_filter, ctx)
    groups = unit_groups(groups, None)
    spread = pool.placement == "spread"
    mine, held = groups, frozenset[str]()
    if over_quota and n and ctx.state.promised:
        mine, held = ctx.state.promised.whole(name, groups, ctx.usage.node_gpus)
    placement = Capacity(mine, ctx, name, held)
    fit = placement.fit(n, spread=spread)
    if fit.node is None or fit.group is None:
        if (len(mine) < len(groups) or held) and Capacity(groups, ctx, name).fit(n, spread).node:
            return _Outcome(Skip(name, PROMISED))
        skip = Skip(name, no_fit_reason(pool, n, fit, groups, untolerated, type_filter, ctx))
        if n and not over_quota and req.reclaim and guaranteed:
            plan = placement.reclaim(name, n)
            if plan is not None:
                return _Outcome(skip, reclaim=plan)
        return _Outcome(skip)

    group = fit.group
    if platform is None and pool.platforms:
        platform = pool.platform_of_type(group.gpu_type)
    type_pin = None
    if group.type_key is not None and (req.gpu_type or platform is not None):
        type_pin = (group.type_key, group.gpu_type)
    overrides = build_overrides(
        registry=reg,
        pool=pool,
        platform=platform,
        request=req,
        charged=charged,
        over_quota=over_quota,
        pool_label=ctx.state.pool_label,
        type_pin=type_pin,
        node_hostname=ctx.usage.node_hostname(fit.node),
    )
    return _Outcome(
        decision=Decision(
            admitted=True,
            request=req,
            pool=name,
            platform=platform.name if platform else None,
            gpu_type=group.gpu_type or None,
            node=fit.node,
            over_quota=over_quota,
            charged=charged,
            nodes_fit=fit.nodes_fit,
            overrides=overrides,
        )
    )


def _charge(pool: Pool, ctx: Context, shape_id: str | None = None) -> tuple[str, bool] | Skip:
    """Who is charged for ``ctx.need`` in ``pool``, over quota or not; or why no one can be
    (quota, a line within quota waiting here, a spent budget). Within a booking in force
    (:mod:`.booking_charge`) no quota, line or budget applies."""
    req, reg, name = ctx.req, ctx.registry, pool.name
    charge = charge_with_bookings(pool, shape_id, ctx)
    if isinstance(charge, str):
        return Skip(name, charge)
    charged, over_quota = charge
    if booking_of(charged) is not None:
        return charged, over_quota
    book = ctx.state.budgets
    if ctx.need and book is not None and reg.budgets:
        spent = refusal(reg.budgets, req.user, charged, name, book, ctx.state.now)
        if spent is not None:
            return Skip(name, spent)
    return charged, over_quota


def _evaluate_shape(pool: Pool, shape_id: str, ctx: Context) -> _Outcome:
    """:func:`_evaluate` for a request of a shape other than whole GPUs: one unit of it on one
    node (:mod:`.shape_fit`), charged its GPU-equivalents."""
    req, name = ctx.req, pool.name
    n = req.gpus
    counts = offered(ctx, name, shape_id, req.gpu_type)
    if not counts:
        ids = offered_ids(ctx, name)
        has = f"it offers {_or_list(ids)}" if ids else "it offers whole GPUs only"
        of_type = f" of GPU type {req.gpu_type}" if req.gpu_type else ""
        return _Outcome(Skip(name, f"this pool has no {shape_id}{of_type} ({has})"))
    if n != 1:
        return _Outcome(Skip(name, f"a server gets one {shape_id} (you asked for {n})"))
    if problem := shape_rule_refusal(pool, shape_id, ctx):
        return _Outcome(Skip(name, problem))
    ctx.need = need_of(counts, n)
    charge = _charge(pool, ctx, shape_id)
    if isinstance(charge, Skip):
        return _Outcome(charge)
    charged, over_quota = charge
    guaranteed = ctx.registry.quota(name) is not None or booking_of(charged) is not None

    groups, untolerated = candidate_groups(pool, None, None, ctx)
    spread = pool.placement == "spread"
    node: str | None = None
    shape: Shape | None = None
    gpu_type, nodes_fit, largest = "", 0, 0
    plan: ReclaimPlan | None = None
    reclaims = not over_quota and req.reclaim and guaranteed
    holds = ctx.state.promised if over_quota else None
    held_back = False  # a unit would fit, but only one a request within quota waits for
    if counts[0].shape.resource == GPU_RESOURCE:
        units = unit_groups(groups, shape_id)
        mine = holds.free_shape_groups(name, shape_id, units) if holds else units
        placement = Capacity(mine, ctx, name)
        fit = placement.fit(n, spread=spread)
        if fit.node is not None and fit.group is not None:
            node, shape, gpu_type = fit.node, fit.group.shape, fit.group.gpu_type
        elif reclaims:
            plan = placement.reclaim(name, n)
        elif len(mine) < len(units):
            held_back = Capacity(units, ctx, name).fit(n, spread).node is not None
        nodes_fit, largest = fit.nodes_fit, fit.largest
    else:
        free = holds.free_counts(name, shape_id, counts) if holds else counts
        ufit = fit_units(free, n, spread, groups, ctx, name)
        node, shape, gpu_type = ufit.node, ufit.shape, ufit.gpu_type
        nodes_fit, largest = ufit.nodes_fit, ufit.largest
        if node is None and reclaims:
            plan = reclaim_units(counts, shape_id, n, groups, ctx, name)
        elif node is None and len(free) < len(counts):
            held_back = fit_units(counts, n, spread, groups, ctx, name).node is not None
    if held_back:
        return _Outcome(Skip(name, PROMISED))
    if node is None or shape is None:
        if not groups and untolerated:
            why = "its nodes' taints are not tolerated by this pool's template"
        else:
            why = f"no node has a {shape_id} free (largest free: {largest})"
            if busy := ctx.usage.repartitioning(name):
                why += f"; {'; '.join(busy)}"
        return _Outcome(Skip(name, why), reclaim=plan)

    platform = pool.platform_of_type(gpu_type) if pool.platforms else None
    decision = Decision(
        admitted=True,
        request=req,
        pool=name,
        platform=platform.name if platform else None,
        gpu_type=gpu_type or None,
        node=node,
        over_quota=over_quota,
        charged=charged,
        nodes_fit=nodes_fit,
        shape=shape,
    )
    overrides = build_overrides(
        registry=ctx.registry,
        pool=pool,
        platform=platform,
        request=req,
        charged=charged,
        over_quota=over_quota,
        pool_label=ctx.state.pool_label,
        node_hostname=ctx.usage.node_hostname(node),
        shape=shape,
        shape_pin=shape_pin(ctx, name, node) if shape.resource == GPU_RESOURCE else None,
    )
    return _Outcome(decision=replace(decision, overrides=overrides))


def decide(request: AdmissionRequest, state: AdmissionState) -> Decision:
    """Admit ``request`` to the first pool of its list that can take it, or say why none can."""
    if request.gpus < 0:
        raise ValueError("a request cannot ask for a negative number of GPUs")
    if not is_label_value(request.admission_id):
        # it is written as a pod label, and reservations are matched by that label
        raise ValueError(f"admission id {request.admission_id!r} is not a valid label value")
    ctx = Context(request, state)
    pools = request.pools or state.registry.default_pool_order(request.groups)
    skipped: list[Skip] = []
    for name, shape_id in request.choices(pools):
        out = _evaluate(name, shape_id, ctx)
        if out.decision is not None:
            return _with_skips(out.decision, skipped)
        assert out.skip is not None
        skipped.append(out.skip)
        if out.reclaim is not None:
            return Decision(
                admitted=False,
                request=request,
                pool=name,
                skipped=tuple(skipped),
                reclaim=out.reclaim,
            )
    return Decision(admitted=False, request=request, skipped=tuple(skipped))


def _with_skips(decision: Decision, skipped: list[Skip]) -> Decision:
    return replace(decision, skipped=tuple(skipped))
