"""Who a request is charged to once bookings count: within a booking in force, else by quota,
over quota when it would take units a booking keeps (rules: :mod:`..time.bookings_in_force`).

Admission (:mod:`.walk`) and the line's order (:mod:`.queue`) both ask :func:`charge`,
so a member waiting for a window stands within quota in line from the window's start.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..pools.model import Pool
from ..time.bookings_in_force import InForce, ShapeLedger, shape_key
from ..usage.records import ShapeCount
from ..usage.shapes import WHOLE
from .decision import AdmissionRequest, AdmissionState, Context
from .quota import charge_for


def reserved_units(ctx: Context, pool: str, shape: str) -> int:
    """Units of ``shape`` the reservations hold in ``pool`` (their pods not seen yet)."""
    usage = ctx.usage
    total = 0
    for node, n in ctx.res.pool_nodes(pool).items():
        group = usage.node_group(node)
        if group is not None and (group.shape.id if group.shape is not None else WHOLE) == shape:
            total += n
    for (node, resource), n in ctx.res.pool_units(pool).items():
        found = usage.node_unit_count(node, resource)
        if found is not None and found[0].shape.id == shape:
            total += n
    return total


def _windows(ctx: Context, pool: str, key: str) -> list[InForce]:
    calendar = ctx.state.bookings
    if calendar is None or pool not in calendar.pools:
        return []
    return calendar.in_force_of(pool, key, ctx.state.now)


def _surely_room(ctx: Context, pool: str, key: str, windows: list[InForce], units: int) -> bool:
    """Whether ``units`` of ``key`` leave every booking in force its whole count, counted
    cheaply (this is on every admission in a pool with a booking in force): every reservation
    in the pool as if of this shape, the bookings' units as all unused. When not,
    :meth:`.ShapeLedger.borrows` counts exactly."""
    free = sum(c.free for c in ctx.usage.shape_counts(pool) if c.shape.id == key)
    held = sum(ctx.res.pool_nodes(pool).values()) + sum(ctx.res.pool_units(pool).values())
    return free - held - units >= sum(w.booking.gpus for w in windows)


def _ledger(ctx: Context, pool: str, key: str, windows: list[InForce]) -> ShapeLedger:
    counts: Sequence[ShapeCount] = [c for c in ctx.usage.shape_counts(pool) if c.shape.id == key]
    return ShapeLedger(
        windows,
        key,
        counts,
        lambda subject: ctx.used(pool, subject),
        reserved_units(ctx, pool, key),
    )


def booking_ledger(ctx: Context, pool: str, shape_id: str | None) -> ShapeLedger | None:
    """What the bookings in force in ``pool`` hold of the request's shape now; None when none
    of that shape is in force."""
    key = shape_key(shape_id)
    windows = _windows(ctx, pool, key)
    return _ledger(ctx, pool, key, windows) if windows else None


def charge(pool: Pool, shape_id: str | None, ctx: Context) -> tuple[str, bool] | str:
    """``(subject, over_quota)`` for ``ctx.need`` in ``pool``, or why no one can be charged:
    within a booking in force first, then :func:`~.quota.charge_for`, over quota when the
    request would take units the bookings keep."""
    calendar = ctx.state.bookings
    name = pool.name
    if not ctx.need or calendar is None or name not in calendar.pools:
        return charge_for(pool, ctx)
    key = shape_id or WHOLE
    windows = calendar.in_force_of(name, key, ctx.state.now)
    if not windows:
        return charge_for(pool, ctx)
    req = ctx.req
    ledger: ShapeLedger | None = None
    if any(w.has_member(req.user, req.groups) for w in windows):
        ledger = _ledger(ctx, name, key, windows)
        window = ledger.within(req.user, req.groups, req.gpus)
        if window is not None:
            return window.subject, False
    found = charge_for(pool, ctx)
    if isinstance(found, str) or found[1]:
        return found
    if ledger is None:
        if _surely_room(ctx, name, key, windows, req.gpus):
            return found
        ledger = _ledger(ctx, name, key, windows)
    return (found[0], True) if ledger.borrows(req.gpus) else found


def member_bookings(
    state: AdmissionState, pool: str, user: str, groups: Sequence[str]
) -> list[tuple[InForce, int]]:
    """The bookings in force in ``pool`` that ``user`` is a member of, each with the units its
    servers and reservations use now (the spawn form's "booked for cs231 until 12:00: 31 of 40
    free")."""
    calendar = state.bookings
    if calendar is None or pool not in calendar.pools:
        return []
    ctx = Context(AdmissionRequest(user=user, groups=tuple(groups)), state)
    ledgers: dict[str, ShapeLedger | None] = {}  # one per shape, not one per booking
    out = []
    for w in calendar.in_force(pool, state.now):
        if not w.has_member(user, groups):
            continue
        shape = w.booking.shape
        if shape not in ledgers:
            ledgers[shape] = booking_ledger(ctx, pool, None if shape == WHOLE else shape)
        ledger = ledgers[shape]
        out.append((w, ledger.units_used(w) if ledger is not None else 0))
    return out
