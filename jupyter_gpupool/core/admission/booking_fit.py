"""Whether bookings fit their pools: the GPUs booked in each window against what the pool has.

A booking does not fit when, at some moment of one of its windows, the pool would have to give
more than it has (*decided*; also in ``docs/pools.md``):

- **GPU-equivalents**: the bookings in force then (each ``gpus`` x its shape's GPU-equivalent,
  :func:`..time.bookings.shape_id_equivalent` or the nodes' own) plus the pool's guaranteed quotas
  (every group's and user's ``guaranteed``; the ``user-default`` is per user, so it does not
  count) above the pool's GPU-equivalents;
- **units of a shape**: the bookings of that shape in force then above the pool's units of it
  (40 x ``mig-1g.10gb`` needs 40 such instances, whatever else is free); for whole GPUs with
  the guaranteed quotas, since a guarantee may be claimed with whole GPUs (9 whole GPUs booked
  beside 8 guaranteed do not fit 16 whole A100s, though a 17th A100 is cut into MIG
  instances);
- **a shape no node offers**: a pool whose nodes are known but offer none of the booked shape
  (``mig-7g.80gb`` where the A100s are cut 7 x 1g) cannot hold it at all.

Bookings are taken in the order given (the files' order): the first that does not fit is the
one named, and it is left out when the later ones are checked, as the service would refuse it.
A capacity that is not known (no nodes seen) is not checked. ``gpupool validate --nodes`` takes
it from the service's pool rows (:func:`capacity_from_rows`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..pools.model import PoolQuota
from ..time.bookings import Booking, Occurrence, all_occurrences, shape_id_equivalent
from ..usage.amounts import Amount, amount_words
from .booking_layout import Choice, PoolLayout, choose_layout

WHOLE = "whole"


@dataclass(frozen=True)
class Capacity:
    """What pools have: ``gpus`` GPU-equivalents per pool, ``units`` per (pool, shape id), and
    ``equivalents`` per shape id as the nodes say (over the id's own, e.g. an A30's MIG)."""

    gpus: Mapping[str, Amount] = field(default_factory=dict)
    units: Mapping[tuple[str, str], int] = field(default_factory=dict)
    equivalents: Mapping[str, Fraction] = field(default_factory=dict)

    def equivalent(self, shape_id: str) -> Fraction:
        found = self.equivalents.get(shape_id)
        return found if found is not None else shape_id_equivalent(shape_id)


@dataclass(frozen=True)
class Conflict:
    """``booking`` does not fit in ``window``; ``others`` are the bookings in force with it."""

    booking: Booking
    window: Occurrence
    others: tuple[tuple[Booking, Occurrence], ...]
    booked: Amount
    capacity: Amount
    unit: str  # a shape id, or "GPU-equivalents"
    guaranteed: Amount = 0
    more_windows: int = 0
    #: why it cannot fit at all (a shape no node of its pool offers), instead of the count
    reason: str = ""
    #: in a pool whose nodes may be re-cut: the layout's words (what is missing, and why)
    layout: str = ""

    def words(self) -> str:
        """``cs231 (Tue 2027-01-19 10:00-12:00 Europe/Berlin) overlaps ml-ops (…): 46 of 40
        mig-1g.10gb booked``."""
        if self.reason:
            return f"{self.booking.name}: {self.reason}"
        head = f"{self.booking.name} ({self.window.words()})"
        if self.others:
            head += " overlaps " + ", ".join(f"{b.name} ({o.words()})" for b, o in self.others)
        if self.layout:
            text = f"{head}: {self.layout}"
            if self.more_windows:
                text += f"; and {self.more_windows} more window"
                text += "s" if self.more_windows > 1 else ""
            return text
        text = f"{head}: {amount_words(self.booked)} of {amount_words(self.capacity)} {self.unit}"
        text += " booked"
        if self.guaranteed:
            text += f" (with {amount_words(self.guaranteed)} guaranteed by quotas)"
        if self.more_windows:
            text += f"; and {self.more_windows} more window{'s' if self.more_windows > 1 else ''}"
        return text


def pool_guarantees(quotas: Mapping[str, PoolQuota]) -> dict[str, int]:
    """Per pool, the GPUs its quotas guarantee: every group's and user's ``guaranteed``."""
    return {
        pool: sum(e.guaranteed for e in q.groups.values())
        + sum(e.guaranteed for e in q.users.values())
        for pool, q in quotas.items()
    }


@dataclass
class _Held:
    booking: Booking
    window: Occurrence
    amount: Amount


class _Load:
    """What the windows added so far hold over time, as a step function: ``loads[i]`` is held
    from ``times[i]`` to ``times[i + 1]``. Adding a window and asking the most held inside one
    cost what the step function has inside that window (bisect to it, then those steps), so a
    booking's check grows with the windows it meets, not with every window of the pool."""

    def __init__(self) -> None:
        self.times: list[float] = [-math.inf]
        self.loads: list[Amount] = [0]
        self.held: list[_Held] = []

    def _step_at(self, t: float) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        if self.times[i] == t:
            return i
        self.times.insert(i + 1, t)
        self.loads.insert(i + 1, self.loads[i])
        return i + 1

    def add(self, held: _Held) -> None:
        i = self._step_at(held.window.start)
        j = self._step_at(held.window.end)
        loads = self.loads
        for k in range(i, j):
            loads[k] += held.amount
        self.held.append(held)

    def peak(self, start: float, end: float) -> tuple[Amount, float]:
        """The most held at once inside ``[start, end)``, and the first moment it is held."""
        i = bisect.bisect_right(self.times, start) - 1
        j = bisect.bisect_left(self.times, end)
        steps = self.loads[i:j]
        best = max(steps)
        return best, max(start, self.times[i + steps.index(best)])

    def at(self, t: float) -> list[_Held]:
        """The windows held at ``t`` (for the words of a conflict only)."""
        return [h for h in self.held if h.window.start <= t < h.window.end]


def _check(
    booking: Booking,
    windows: Sequence[Occurrence],
    load: _Load | None,
    amount: Amount,
    base: Amount,
    capacity: Amount,
    unit: str,
) -> Conflict | None:
    found: Conflict | None = None
    bad = 0
    for w in windows:
        peak, at = load.peak(w.start, w.end) if load is not None else (0, w.start)
        if base + peak + amount <= capacity:
            continue
        bad += 1
        if found is None:
            others = load.at(at) if load is not None and peak else []
            found = Conflict(
                booking,
                w,
                tuple((h.booking, h.window) for h in others),
                base + peak + amount,
                capacity,
                unit,
                guaranteed=base,
            )
    if found is None:
        return None
    return Conflict(**{**found.__dict__, "more_windows": bad - 1})


def _not_offered(
    booking: Booking, windows: Sequence[Occurrence], capacity: Capacity, recut: bool = False
) -> Conflict:
    offered = sorted(s for p, s in capacity.units if p == booking.pool)
    nor = ", nor could re-cutting the nodes its file allows" if recut else ""
    return Conflict(
        booking,
        windows[0],
        (),
        booking.gpus,
        0,
        booking.shape,
        reason=(
            f"no node of pool {booking.pool} offers {booking.shape} (its nodes offer "
            f"{', '.join(offered) or 'no GPUs'}){nor}: nothing could hold it"
        ),
    )


class _Relayable:
    """A pool whose nodes may be re-cut (:mod:`.booking_layout`): every moment a booking's
    window meets (its start, and each start or end of another window inside it) is checked
    with the layout that moment's bookings need; the layouts are kept per demand. A window
    costs the windows it meets (found by bisection), not every window of the pool."""

    def __init__(
        self, layout: PoolLayout, capacity: Capacity, guaranteed: Amount, pool: str
    ) -> None:
        self.layout = layout
        self.guaranteed = guaranteed
        self.equivalent = capacity.equivalent
        present = layout.present
        self.fixed = {
            s: max(0, c - present.get(s, 0)) for (p, s), c in capacity.units.items() if p == pool
        }
        #: the windows added so far, by start (``starts`` beside them), and the longest
        self.held: list[_Held] = []
        self.starts: list[float] = []
        self.longest = 0.0
        self._memo: dict[frozenset[tuple[str, int]], Choice] = {}

    def meeting(self, w: Occurrence) -> list[_Held]:
        """The windows added so far that overlap ``w``: only those starting less than the
        longest one before it, found by bisection."""
        i = bisect.bisect_left(self.starts, w.start - self.longest)
        j = bisect.bisect_left(self.starts, w.end)
        return [h for h in self.held[i:j] if h.window.end > w.start]

    def offers(self, shape: str) -> bool:
        return bool(self.fixed.get(shape)) or self.layout.offers(shape)

    def choose(self, demand: Mapping[str, int]) -> Choice:
        key = frozenset(demand.items())
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = choose_layout(
                self.layout, self.fixed, demand, self.guaranteed, self.equivalent
            )
        return found

    def check(self, booking: Booking, windows: Sequence[Occurrence]) -> Conflict | None:
        found: Conflict | None = None
        bad = 0
        for w in windows:
            met = self.meeting(w)
            moments = {w.start}
            moments.update(h.window.start for h in met if h.window.start > w.start)
            moments.update(h.window.end for h in met if h.window.end < w.end)
            for t in sorted(moments):
                now = [h for h in met if h.window.start <= t < h.window.end]
                demand = {booking.shape: booking.gpus}
                for h in now:
                    demand[h.booking.shape] = demand.get(h.booking.shape, 0) + h.booking.gpus
                choice = self.choose(demand)
                if choice.short is None:
                    continue
                bad += 1
                if found is None:
                    found = Conflict(
                        booking,
                        w,
                        tuple((h.booking, h.window) for h in now),
                        choice.short.need,
                        choice.short.supply,
                        choice.short.shape,
                        layout=choice.words(),
                    )
                break
        if found is None:
            return None
        return Conflict(**{**found.__dict__, "more_windows": bad - 1})

    def add(self, booking: Booking, windows: Sequence[Occurrence]) -> None:
        for w in windows:
            k = bisect.bisect_right(self.starts, w.start)
            self.starts.insert(k, w.start)
            self.held.insert(k, _Held(booking, w, booking.gpus))
            self.longest = max(self.longest, w.end - w.start)


def booking_conflicts(
    bookings: Iterable[Booking],
    capacity: Capacity,
    guarantees: Mapping[str, Amount],
    layouts: Mapping[str, PoolLayout] | None = None,
) -> list[Conflict]:
    """The bookings that do not fit (see the module's words), each with its first bad window.
    Each booking costs its windows times the steps they meet (:class:`_Load`). A pool in
    ``layouts`` (its nodes may be re-cut) is checked moment by moment with the layout its
    bookings need (:class:`_Relayable`)."""
    equivalents: dict[str, _Load] = {}  # per pool
    units: dict[tuple[str, str], _Load] = {}  # per pool and shape
    relayable: dict[str, _Relayable] = {}
    out: list[Conflict] = []
    for booking in bookings:
        windows = all_occurrences(booking)
        if not windows:
            continue  # it never holds: nothing to fit
        if (
            layouts
            and booking.pool in layouts
            and any(p == booking.pool for p, _ in capacity.units)
        ):
            pool = relayable.get(booking.pool)
            if pool is None:
                pool = relayable[booking.pool] = _Relayable(
                    layouts[booking.pool], capacity, guarantees.get(booking.pool, 0), booking.pool
                )
            if not pool.offers(booking.shape):
                out.append(_not_offered(booking, windows, capacity, recut=True))
                continue
            conflict = pool.check(booking, windows)
            if conflict is not None:
                out.append(conflict)
            else:
                pool.add(booking, windows)
            continue
        eq = capacity.equivalent(booking.shape) * booking.gpus
        key = (booking.pool, booking.shape)
        conflict = None
        shaped = any(p == booking.pool for p, _ in capacity.units)
        if shaped and key not in capacity.units:
            out.append(_not_offered(booking, windows, capacity))
            continue
        if key in capacity.units:
            conflict = _check(
                booking,
                windows,
                units.get(key),
                booking.gpus,
                # a guarantee may be claimed with whole GPUs: it holds them against bookings
                guarantees.get(booking.pool, 0) if booking.shape == WHOLE else 0,
                capacity.units[key],
                "whole GPUs" if booking.shape == WHOLE else booking.shape,
            )
        if conflict is None and booking.pool in capacity.gpus:
            conflict = _check(
                booking,
                windows,
                equivalents.get(booking.pool),
                eq,
                guarantees.get(booking.pool, 0),
                capacity.gpus[booking.pool],
                "GPU-equivalents",
            )
        if conflict is not None:
            out.append(conflict)
            continue
        by_shape = units.setdefault(key, _Load())
        by_pool = equivalents.setdefault(booking.pool, _Load())
        for w in windows:
            by_shape.add(_Held(booking, w, booking.gpus))
            by_pool.add(_Held(booking, w, eq))
    return out


def capacity_from_rows(rows: Iterable[Mapping[str, Any]]) -> Capacity:
    """The capacity ``GET api/v1/pools`` rows tell: per pool its shapes' ``total`` (units per
    shape id) and their GPU-equivalents (``total`` x ``equivalent``), else its ``gpu_total``."""
    gpus: dict[str, Amount] = {}
    units: dict[tuple[str, str], int] = {}
    equivalents: dict[str, Fraction] = {}
    for row in rows:
        pool = row["name"]
        shapes = row.get("shapes") or []
        if not shapes:
            gpus[pool] = int(row.get("gpu_total") or 0)
            continue
        total: Amount = 0
        for s in shapes:
            eq = Fraction(str(s.get("equivalent", "1")))
            units[(pool, s["id"])] = units.get((pool, s["id"]), 0) + int(s["total"])
            equivalents.setdefault(s["id"], eq)
            total += eq * int(s["total"])
        gpus[pool] = total
    return Capacity(gpus=gpus, units=units, equivalents=equivalents)
