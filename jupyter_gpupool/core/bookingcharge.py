"""Who a request is charged to once bookings count: within a booking in force, else by quota,
over quota when it would take units a booking keeps (rules: :mod:`.bookingnow`).

Admission (:mod:`.admission`) and the line's order (:mod:`.queue`) both ask :func:`charge`,
so a member waiting for a window stands within quota in line from the window's start.
"""

from __future__ import annotations

from collections.abc import Sequence

from .bookingnow import InForce, ShapeLedger, shape_key
from .decision import AdmissionRequest, AdmissionState, Context
from .pools import Pool
from .quota import charge_for
from .shapes import WHOLE
from .usagerecords import ShapeCount


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


def _borrows(ctx: Context, pool: str, key: str, windows: list[InForce], units: int) -> bool:
    """Whether taking ``units`` of ``key`` now takes some of the units the bookings in force
    keep (:meth:`.ShapeLedger.borrows`, counted without building one: this is on every
    admission in a pool with a booking in force). Cheap bounds first: every reservation in the
    pool counted as of this shape; the bookings' whole counts as unused."""
    counts = [c for c in ctx.usage.shape_counts(pool) if c.shape.id == key]
    room = sum(c.free for c in counts) - units
    booked = sum(w.booking.gpus for w in windows)
    held_anywhere = sum(ctx.res.pool_nodes(pool).values()) + sum(ctx.res.pool_units(pool).values())
    if room - held_anywhere >= booked:
        return False
    if held_anywhere:
        room -= reserved_units(ctx, pool, key)
    if room >= booked:
        return False
    unit = max((c.shape.equivalent for c in counts), default=1)
    held = 0
    for w in windows:
        eq = ctx.used(pool, w.subject)
        used = int(-(-eq // unit)) if eq else 0
        held += max(0, w.booking.gpus - used)
    return held > 0 and room < held


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
    for w in windows:
        if w.has_member(req.user, req.groups):
            window = _ledger(ctx, name, key, windows).within(req.user, req.groups, req.gpus)
            if window is not None:
                return window.subject, False
            break
    found = charge_for(pool, ctx)
    if isinstance(found, str) or found[1]:
        return found
    return (found[0], True) if _borrows(ctx, name, key, windows, req.gpus) else found


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
    out = []
    for w in calendar.in_force(pool, state.now):
        if not w.has_member(user, groups):
            continue
        ledger = booking_ledger(ctx, pool, None if w.booking.shape == WHOLE else w.booking.shape)
        out.append((w, ledger.units_used(w) if ledger is not None else 0))
    return out
