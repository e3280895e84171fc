"""Quota: who a request is charged to, within or over quota, or why no one can be.

**Who is charged** (*decided*; also in ``docs/pools.md``). A server is charged to exactly one
subject, recorded on the pod, and is either within quota or over quota as a whole:

- the first of the user's groups, in the order the pool's quota lists them, whose guaranteed GPUs
  still cover the request -> that group, within quota;
- else the user's own guarantee (``users.<name>``, else ``user-default``) -> the user, within;
- else, if the pool allows borrowing: the first of the user's groups (quota groups first, then
  groups with a cluster-wide gpuctl cap) whose limit still has room -> that group, **over quota**;
  a user in no such group borrows as themselves (the user's limit applies);
- else rejected, saying which guarantee or limit is used up.

On top, hard caps always apply: the user's limit in the pool (``users.<name>.limit`` or
``user-default.limit``) on all their GPUs there, and the gpuctl cluster-wide caps (``namespace``
per group, ``users``/``default`` per user). A pool without any quota section is unmanaged: every
request is within quota, limited by capacity and the cluster-wide caps only. Servers without GPUs
are never charged.

:func:`quota_headroom` answers the pages' question "how many GPUs could I get here" by the same
rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..pools.model import Pool
from ..usage.amounts import Amount, amount_gpus_text, amount_words, whole_if_whole
from .decision import (
    AdmissionRequest,
    AdmissionState,
    Context,
    gpus_text,
    group_subject,
    user_subject,
)


def _asked(used: Amount, limit: int, n: Amount) -> str:
    """Say what was asked when the limit is not simply used up."""
    return f" (you asked for {amount_words(n)})" if used < limit else ""


def charge_for(pool: Pool, ctx: Context) -> tuple[str, bool] | str:
    """``(subject, over_quota)``, or the reason the request is over a guarantee or limit."""
    req, reg = ctx.req, ctx.registry
    n = ctx.need
    me = user_subject(req.user)
    if n == 0:
        return me, False
    quota = reg.quota(pool.name)
    entry = quota.user_entry(req.user) if quota is not None else None
    if entry is not None and entry.limit is not None:
        used = ctx.user_used(pool.name)
        if used + n > entry.limit:
            return (
                f"you use {amount_words(used)} of your limit of {gpus_text(entry.limit)} in this pool"
                f"{_asked(used, entry.limit, n)}"
            )
    cap = reg.user_cap(req.user, req.groups)
    if cap is not None:
        used = ctx.user_used_total()
        if used + n > cap:
            return (
                f"you use {amount_words(used)} of your limit of {gpus_text(cap)} across all pools"
                f"{_asked(used, cap, n)}"
            )

    def cluster_room(group: str) -> tuple[bool, str]:
        gcap = reg.group_cap(group)
        if gcap is None:
            return True, ""
        used = ctx.used_total(group_subject(group))
        if used + n <= gcap:
            return True, ""
        return False, (
            f"your group {group} uses {amount_words(used)} of its limit of {gpus_text(gcap)} across all pools"
            f"{_asked(used, gcap, n)}"
        )

    cluster_groups = [g for g in reg.group_caps if g in ctx.member]
    if quota is None:
        first_reason = ""
        for g in cluster_groups:
            ok, why = cluster_room(g)
            if ok:
                return group_subject(g), False
            first_reason = first_reason or why
        return first_reason if first_reason else (me, False)

    quota_groups = [g for g in quota.groups if g in ctx.member]
    for g in quota_groups:
        if ctx.used(pool.name, group_subject(g)) + n <= quota.groups[g].guaranteed:
            ok, _ = cluster_room(g)
            if ok:
                return group_subject(g), False
    if entry is not None and entry.guaranteed and ctx.used(pool.name, me) + n <= entry.guaranteed:
        return me, False

    if not quota.borrowing:
        if quota_groups:
            parts = []
            for g in quota_groups:
                used = ctx.used(pool.name, group_subject(g))
                parts.append((g, used, quota.groups[g].guaranteed))
            if len(parts) == 1:
                g, used, gua = parts[0]
                return (
                    f"your group {g} uses {amount_words(used)} of its {gua} guaranteed GPUs"
                    f"{_asked(used, gua, n)} "
                    "and the pool allows no borrowing"
                )
            listed = ", ".join(f"{g} uses {amount_words(u)} of {gu}" for g, u, gu in parts)
            return (
                f"your groups have no {amount_gpus_text(n)} of guaranteed quota left ({listed}) "
                "and the pool allows no borrowing"
            )
        if entry is not None and entry.guaranteed:
            used = ctx.used(pool.name, me)
            return (
                f"you use {amount_words(used)} of your {entry.guaranteed} guaranteed GPUs"
                f"{_asked(used, entry.guaranteed, n)} "
                "and the pool allows no borrowing"
            )
        return "you have no guaranteed GPUs in this pool and it allows no borrowing"

    candidates = quota_groups + [g for g in cluster_groups if g not in quota_groups]
    if not candidates:
        return me, True
    first_reason = ""
    for g in candidates:
        subject = group_subject(g)
        limit = quota.groups[g].limit if g in quota.groups else None
        used = ctx.used(pool.name, subject)
        if limit is not None and used + n > limit:
            first_reason = first_reason or (
                f"your group {g} uses {amount_words(used)} of its limit of {gpus_text(limit)} in this pool, "
                f"borrowing included{_asked(used, limit, n)}"
            )
            continue
        ok, why = cluster_room(g)
        if not ok:
            first_reason = first_reason or why
            continue
        return subject, True
    return first_reason


@dataclass(frozen=True)
class Headroom:
    """How many GPUs quota lets one user's next server have in a pool now (capacity aside).

    ``within_quota``: the most GPUs one request gets charged within a guarantee; ``available``:
    the most it gets at all, borrowing included. Both count at most ``ceiling`` (the pool's
    GPUs). ``managed`` is False where no quota or cap applies to the user: both are the ceiling.
    """

    managed: bool
    borrowing: bool
    within_quota: int
    available: int
    #: the most GPU-equivalents one request gets charged within a guarantee (exact): 3 whole
    #: GPUs fit after a MIG 1g (1/7) of a guarantee of 4, but 27/7 GPU-equivalents do
    within_equivalents: Amount = 0


def quota_headroom(
    pool_name: str, user: str, groups: Sequence[str], state: AdmissionState, ceiling: int
) -> Headroom:
    """:class:`Headroom` of ``user`` in ``pool_name``, by the same rules
    :func:`~.walk.decide` charges with (a request that fits charges the same way as any
    smaller one, so a bisection finds the largest)."""
    reg = state.registry
    pool = reg.pool(pool_name) or Pool(pool_name)
    quota = reg.quota(pool_name)
    member = tuple(groups)
    managed = (
        quota is not None
        or reg.user_cap(user, member) is not None
        or any(g in reg.group_caps for g in member)
    )

    def charge(n: int) -> tuple[str, bool] | str:
        return charge_for(pool, Context(AdmissionRequest(user=user, groups=member, gpus=n), state))

    def largest(fits: Any) -> int:
        low, high = 0, max(ceiling, 0)
        while low < high:
            mid = (low + high + 1) // 2
            if fits(mid):
                low = mid
            else:
                high = mid - 1
        return low

    def within(n: int) -> bool:
        c = charge(n)
        return not isinstance(c, str) and not c[1]

    whole = largest(within)
    return Headroom(
        managed=managed,
        borrowing=bool(quota and quota.borrowing),
        within_quota=whole,
        available=largest(lambda n: not isinstance(charge(n), str)),
        within_equivalents=_within_amount(pool, user, member, state, whole, ceiling),
    )


def _within_amount(
    pool: Pool, user: str, groups: tuple[str, ...], state: AdmissionState, whole: int, ceiling: int
) -> Amount:
    """The most GPU-equivalents charged within quota, from ``whole`` (the most whole GPUs).

    Guarantees and limits are whole numbers, so each bound is a whole number less what a
    subject uses (and holds); the answer is ``whole``, or ``whole + 1`` less the fraction of
    one of the amounts in use: each such candidate is tried, by the same rules, largest first.
    """
    if whole >= ceiling:
        return whole
    ctx = Context(AdmissionRequest(user=user, groups=groups, gpus=1), state)
    used = [ctx.user_used(pool.name), ctx.used(pool.name, user_subject(user))]
    used += [ctx.used(pool.name, group_subject(g)) for g in groups]
    used += [ctx.user_used_total(), ctx.used_total(user_subject(user))]
    used += [ctx.used_total(group_subject(g)) for g in groups]
    candidates = sorted({whole + 1 - (u - int(u)) for u in used if u != int(u)}, reverse=True)
    for amount in candidates:
        ctx.need = amount
        c = charge_for(pool, ctx)
        if not isinstance(c, str) and not c[1]:
            return whole_if_whole(amount)
    return whole


#: :func:`shape_headroom`'s answers: one unit of the shape is charged within quota, only by
#: borrowing, or not at all.
WITHIN, BORROWING, NO_ROOM = "within", "borrowing", "none"


def shape_headroom(
    pool_name: str,
    user: str,
    groups: Sequence[str],
    state: AdmissionState,
    equivalents: Mapping[str, Amount],
) -> dict[str, str]:
    """Per shape id (``equivalents``: what one unit of it counts), whether quota lets ``user``
    have one more here now (capacity aside): :data:`WITHIN`, :data:`BORROWING` or
    :data:`NO_ROOM`. A user whose whole-GPU quota shows 0 may still have room for a slice."""
    pool = state.registry.pool(pool_name) or Pool(pool_name)
    member = tuple(groups)
    out = {}
    for shape_id, amount in equivalents.items():
        ctx = Context(AdmissionRequest(user=user, groups=member, gpus=1), state)
        ctx.need = amount
        charge = charge_for(pool, ctx)
        out[shape_id] = NO_ROOM if isinstance(charge, str) else (BORROWING if charge[1] else WITHIN)
    return out
