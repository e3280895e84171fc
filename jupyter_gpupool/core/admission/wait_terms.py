"""What quota lets a waiting request into, as the wait estimate reads it
(:class:`~..time.wait_estimate.Terms`), and the quota counters a server counts against.

Read off the same rules as :func:`.quota.charge_for` (the subjects tried in its order: the
user's quota groups' guarantees, the user's own; when the pool allows borrowing, the quota
groups' limits, else the user borrowing as themselves; always the user's limit in the pool), so
that the estimate's replay can tell as its servers come and go whether a request is within
quota, over, or waits for its quota. Left out: bookings in force and the cluster-wide caps
(``docs/pools.md``, the estimate).
"""

from __future__ import annotations

import math

from ..time.wait_estimate import UNMANAGED, Terms
from ..usage.reservations import Reservation
from ..usage.rows import ServerUsage
from .decision import AdmissionRequest, AdmissionState, Context, group_subject, user_subject
from .shape_fit import need_of, offered

__all__ = ["counters", "terms"]


def _counter(pool: str, subject: str) -> str:
    return f"{pool} {subject}"


def _all_of(pool: str, user: str) -> str:
    """The counter of all of a user's GPUs in a pool (their limit there counts them all)."""
    return f"{pool} all of {user_subject(user)}"


def _limit(limit: int | None) -> float:
    return math.inf if limit is None else float(limit)


def terms(request: AdmissionRequest, pool: str, shape: str | None, state: AdmissionState) -> Terms:
    """How quota lets ``request`` into ``pool`` (and ``shape``)."""
    ctx = Context(request, state)
    counts = offered(ctx, pool, shape, request.gpu_type) if shape and request.gpus else []
    amount = float(need_of(counts, request.gpus) if counts else request.gpus)
    quota = state.registry.quota(pool)
    if quota is None:
        return Terms(managed=False, amount=amount) if amount != 1.0 else UNMANAGED
    me = user_subject(request.user)
    entry = quota.user_entry(request.user)
    caps: tuple[tuple[str, float], ...] = ()
    if entry is not None and entry.limit is not None:
        caps = ((_all_of(pool, request.user), float(entry.limit)),)
    groups = [g for g in quota.groups if g in ctx.member]
    within = [(_counter(pool, group_subject(g)), float(quota.groups[g].guaranteed)) for g in groups]
    if entry is not None and entry.guaranteed:
        within.append((_counter(pool, me), float(entry.guaranteed)))
    if groups:
        borrow = tuple(
            (
                _counter(pool, group_subject(g)),
                _limit(quota.groups[g].limit),
                float(quota.groups[g].guaranteed),
            )
            for g in groups
        )
    else:
        borrow = ((_counter(pool, me), math.inf, float(entry.guaranteed if entry else 0)),)
    return Terms(tuple(within), borrow, quota.borrowing, caps, amount)


def counters(held: ServerUsage | Reservation) -> tuple[tuple[str, ...], float]:
    """The quota counters a server (or a reservation) counts against, and by how much."""
    if held.pool is None or not held.charged:
        return (), 0.0
    amount = float(held.quota if isinstance(held, Reservation) else held.equivalents)
    return (_counter(held.pool, held.charged), _all_of(held.pool, held.user)), amount
