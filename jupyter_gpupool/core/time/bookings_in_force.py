"""Bookings at work: which are in force, who is admitted within one, and what they hold.

:mod:`.bookings` says when a booking holds; this module says what that means for admission
(*decided*; also in ``docs/pools.md``):

- **Members first.** While a booking is in force, a request of one of its members (a listed
  user, or a user in a listed group) for its pool and shape is admitted **within the booking**
  as long as the booking's units used (its servers and reservations, charged to the subject
  ``booking:NAME``) leave room: before the member's quota, which such a server does not count
  against (the user's hard limits neither: the booking is the admin's word for that window).
  A member beyond the booking's units is an ordinary request.
- **Booked units nobody uses may be borrowed.** For every other request in that pool and shape,
  the booking's unused units are held: a request that fits only by taking some of them is
  admitted **over quota** (reclaimable), whatever its quota says.
- **At the window's start** the borrowers that started before it are stopped, newest first,
  until the bookings in force have their unused units free (:func:`start_stops`); from
  ``lead`` seconds before, the same servers are warned (:func:`start_warnings`). A borrower
  that started during the window is reclaimed only when a member asks and finds no room, as
  any over-quota server.
- **After the window** a booking holds nothing: its servers run on, and become reclaimable as
  over-quota servers (:func:`ended_servers`).

Units are counted in GPU-equivalents through the quota machinery (a booking of 40 MIG 1g of
an A100 holds 40/7 GPU-equivalents), and free units per shape across the pool's schedulable
nodes (not per node: a booking of 2 GPUs is kept by one free GPU on each of two nodes).

Pure: the usage and reservations come in through :class:`~..admission.decision.Context`, time as epoch
seconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence

from ..accounting.ledger import parse_time
from ..usage.amounts import Amount
from ..usage.labels import BOOKING_SUBJECT_PREFIX
from ..usage.records import ShapeCount
from ..usage.rows import ServerUsage
from ..usage.shapes import WHOLE
from .bookings import Booking, Occurrence, occurrences

#: How far around ``t`` a :class:`Calendar` lists windows before it lists them again.
HORIZON_BEFORE, HORIZON_AFTER = 2 * 86400.0, 9 * 86400.0


def booking_subject(name: str) -> str:
    """The subject a server admitted within booking ``name`` is charged to."""
    return f"{BOOKING_SUBJECT_PREFIX}{name}"


def booking_of(subject: str | None) -> str | None:
    """The booking a charged subject names (``booking:cs231`` -> ``cs231``), else None."""
    if subject and subject.startswith(BOOKING_SUBJECT_PREFIX):
        return subject[len(BOOKING_SUBJECT_PREFIX) :]
    return None


def shape_key(shape_id: str | None) -> str:
    """A request's shape as bookings write it: ``whole`` for whole GPUs."""
    return shape_id or WHOLE


class InForce:
    """One window of one booking; ``subject`` is what its servers are charged to."""

    __slots__ = ("_groups", "booking", "occurrence", "subject")

    def __init__(self, booking: Booking, occurrence: Occurrence):
        self.booking = booking
        self.occurrence = occurrence
        self.subject = booking_subject(booking.name)
        self._groups = frozenset(booking.groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InForce) and (self.booking, self.occurrence) == (
            other.booking,
            other.occurrence,
        )

    def __hash__(self) -> int:
        return hash((self.booking.name, self.occurrence.start))

    def has_member(self, user: str, groups: Iterable[str]) -> bool:
        return user in self.booking.users or not self._groups.isdisjoint(groups)


class Calendar:
    """The windows of a set of bookings, per pool, for "which are in force at ``t``".

    Windows are listed for a horizon around the time asked (two days before, nine after) and
    listed again when a question falls outside it, so a term-long weekly booking costs a few
    windows, not a term's."""

    def __init__(self, bookings: Sequence[Booking]):
        self.bookings = tuple(bookings)
        self.by_name = {b.name: b for b in self.bookings}
        self.pools = frozenset(b.pool for b in self.bookings)
        self._span: tuple[float, float] | None = None
        self._starts: dict[str, list[float]] = {}
        self._windows: dict[str, list[InForce]] = {}
        self._longest: dict[str, float] = {}
        self._all: list[InForce] = []
        #: per pool: the windows in force, and the stretch of time they stay the same
        self._memo: dict[str, tuple[float, float, list[InForce]]] = {}
        #: per (pool, shape): the same, of that shape
        self._shape_memo: dict[tuple[str, str], tuple[float, float, list[InForce]]] = {}

    def __len__(self) -> int:
        return len(self.bookings)

    def _cover(self, a: float, b: float) -> None:
        span = self._span
        if span is not None and span[0] <= a and b <= span[1]:
            return
        lo, hi = a - HORIZON_BEFORE, max(b, a) + HORIZON_AFTER
        found = [InForce(bk, o) for bk in self.bookings for o in occurrences(bk, lo, hi)]
        found.sort(key=lambda w: w.occurrence.start)
        self._all = found
        self._windows, self._starts, self._longest, self._memo = {}, {}, {}, {}
        self._shape_memo = {}
        for w in found:
            pool = w.booking.pool
            self._windows.setdefault(pool, []).append(w)
            self._starts.setdefault(pool, []).append(w.occurrence.start)
            length = w.occurrence.end - w.occurrence.start
            self._longest[pool] = max(self._longest.get(pool, 0.0), length)
        # a window that began before lo is not listed: questions stay a day clear of lo
        self._span = (lo + 86400.0, hi)

    def in_force(self, pool: str, t: float) -> list[InForce]:
        """The windows of ``pool``'s bookings in force at ``t`` (``start <= t < end``)."""
        if pool not in self.pools:
            return []
        memo = self._memo.get(pool)
        if memo is not None and memo[0] <= t < memo[1]:
            return memo[2]  # (read-only: the same list until a window starts or ends)
        self._cover(t, t)
        starts = self._starts.get(pool, [])
        windows = self._windows.get(pool, [])
        earliest = t - self._longest.get(pool, 0.0)
        out = []
        i = bisect.bisect_right(starts, t) - 1
        # the set stays the same until the next window starts or one in force ends
        # (kept from t on: time moves forward; a question about an earlier time asks again)
        until = starts[i + 1] if i + 1 < len(starts) else self._span_end()
        while i >= 0 and starts[i] >= earliest:
            w = windows[i]
            if w.occurrence.end > t:
                out.append(w)
                until = min(until, w.occurrence.end)
            i -= 1
        out.reverse()
        self._memo[pool] = (t, until, out)
        return out

    def in_force_of(self, pool: str, shape: str, t: float) -> list[InForce]:
        """:meth:`in_force`, of one shape (``whole`` for whole GPUs)."""
        if pool not in self.pools:
            return []
        memo = self._shape_memo.get((pool, shape))
        if memo is not None and memo[0] <= t < memo[1]:
            return memo[2]
        found = [w for w in self.in_force(pool, t) if w.booking.shape == shape]
        lo, hi, _ = self._memo[pool]
        self._shape_memo[(pool, shape)] = (lo, hi, found)
        return found

    def _span_end(self) -> float:
        return self._span[1] if self._span is not None else float("inf")

    def starting(self, a: float, b: float) -> list[InForce]:
        """The windows that start in ``(a, b]``, earliest first."""
        self._cover(a, b)
        starts = [w.occurrence.start for w in self._all]
        i, j = bisect.bisect_right(starts, a), bisect.bisect_right(starts, b)
        return self._all[i:j]

    def ending(self, a: float, b: float) -> list[InForce]:
        """The windows in force at ``a`` that end in ``(a, b]``."""
        self._cover(a, b)
        return [w for w in self._all if w.occurrence.start <= a < w.occurrence.end <= b]

    def window_of(self, name: str, t: float) -> InForce | None:
        """Booking ``name``'s window in force at ``t``, or None (also for no such booking)."""
        b = self.by_name.get(name)
        if b is None:
            return None
        return next((w for w in self.in_force(b.pool, t) if w.booking.name == name), None)


# --- what a pool's bookings hold now ---------------------------------------------------------


class ShapeLedger:
    """What one pool's bookings in force hold of one shape now, for one decision: read from
    the usage index and the reservations through ``used`` (subject -> GPU-equivalents charged
    in the pool, reservations included) and the pool's counts of the shape."""

    def __init__(
        self,
        windows: Sequence[InForce],
        shape: str,
        counts: Sequence[ShapeCount],
        used: Callable[[str], Amount],
        reserved_units: int,
    ):
        self.shape = shape
        self.windows = [w for w in windows if w.booking.shape == shape]
        self.unit: Amount = max((c.shape.equivalent for c in counts), default=1)
        self.used = used
        self.free = sum(c.free for c in counts) - reserved_units
        self._units: dict[str, int] = {}

    def units_used(self, w: InForce) -> int:
        """Units of the booking's shape its servers and reservations use now."""
        found = self._units.get(w.subject)
        if found is None:
            eq = self.used(w.subject)
            # rounded up: a part of a unit is a unit
            found = int(-(-eq // self.unit)) if eq else 0
            self._units[w.subject] = found
        return found

    def unused(self, w: InForce) -> int:
        return max(0, w.booking.gpus - self.units_used(w))

    def held(self) -> int:
        """Units the bookings in force keep for their members."""
        return sum(self.unused(w) for w in self.windows)

    def within(self, user: str, groups: Sequence[str], units: int) -> InForce | None:
        """The first booking in force (in start order) that admits ``units`` more for this
        member now, or None."""
        for w in self.windows:
            if w.has_member(user, groups) and self.units_used(w) + units <= w.booking.gpus:
                return w
        return None

    def borrows(self, units: int) -> bool:
        """Whether taking ``units`` now takes some of the units the bookings keep."""
        if self.free - units >= sum(w.booking.gpus for w in self.windows):
            return False  # room for every booking whole, used or not: no need to count
        held = self.held()
        return held > 0 and self.free - units < held


def shape_of_server(s: ServerUsage) -> str:
    return s.shape or WHOLE


def _created(s: ServerUsage) -> float:
    t = parse_time(s.created)
    return t if t is not None else 0.0


def borrowers(
    servers: Iterable[ServerUsage], shape: str, before: float | None = None
) -> list[ServerUsage]:
    """Over-quota servers of ``shape`` (started before ``before`` if given), newest first."""
    found = [
        s
        for s in servers
        if s.over_quota
        and s.state != "terminating"
        and shape_of_server(s) == shape
        and (before is None or _created(s) < before)
    ]
    found.sort(key=lambda s: (s.created, s.namespace, s.name), reverse=True)
    return found


def to_free(
    ledger: ShapeLedger, servers: Iterable[ServerUsage], before: float
) -> list[ServerUsage]:
    """The borrowers that started before ``before`` to stop, newest first, so that the units
    the bookings in force keep are free; none when they already are."""
    need = ledger.held() - ledger.free
    out: list[ServerUsage] = []
    for s in borrowers(servers, ledger.shape, before):
        if need <= 0:
            break
        out.append(s)
        need -= max(s.units, 1)
    return out


def ended_servers(
    servers: Iterable[ServerUsage], calendar: Calendar | None, t: float
) -> list[ServerUsage]:
    """Servers admitted within a booking whose window is over (or that is gone): they borrow
    now, and are reclaimed as over-quota servers are."""
    out = []
    for s in servers:
        name = booking_of(s.charged)
        if name is None or s.state == "terminating":
            continue
        if calendar is None or calendar.window_of(name, t) is None:
            out.append(s)
    return out
