"""Whether bookings fit their pools: the GPUs booked in each window against what the pool has.

A booking does not fit when, at some moment of one of its windows, the pool would have to give
more than it has (*decided*; also in ``docs/pools.md``):

- **GPU-equivalents**: the bookings in force then (each ``gpus`` x its shape's GPU-equivalent,
  :func:`..time.bookings.shape_id_equivalent` or the nodes' own) plus the pool's guaranteed quotas
  (every group's and user's ``guaranteed``; the ``user-default`` is per user, so it does not
  count) above the pool's GPU-equivalents;
- **units of a shape**: the bookings of that shape in force then above the pool's units of it
  (40 x ``mig-1g.10gb`` needs 40 such instances, whatever else is free).

Bookings are taken in the order given (the files' order): the first that does not fit is the
one named, and it is left out when the later ones are checked, as the service would refuse it.
A capacity that is not known (no nodes seen) is not checked. ``gpupool validate --nodes`` takes
it from the service's pool rows (:func:`capacity_from_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..pools.model import PoolQuota
from ..time.bookings import Booking, Occurrence, all_occurrences, shape_id_equivalent
from ..usage.amounts import Amount, amount_words


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

    def words(self) -> str:
        """``cs231 (Tue 2027-01-19 10:00-12:00 Europe/Berlin) overlaps ml-ops (…): 46 of 40
        mig-1g.10gb booked``."""
        head = f"{self.booking.name} ({self.window.words()})"
        if self.others:
            head += " overlaps " + ", ".join(f"{b.name} ({o.words()})" for b, o in self.others)
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


def _peak(held: Sequence[_Held], start: float, end: float) -> tuple[Amount, list[_Held]]:
    """The most ``held`` amounts in force at once inside ``[start, end)``, and which."""
    inside = [h for h in held if h.window.start < end and h.window.end > start]
    best: Amount = 0
    best_set: list[_Held] = []
    # the load only rises where a window starts: the peak is at one of those starts
    for t in sorted({max(start, h.window.start) for h in inside}):
        now = [h for h in inside if h.window.start <= t < h.window.end]
        total: Amount = sum((h.amount for h in now), 0)
        if total > best:
            best, best_set = total, now
    return best, best_set


def _check(
    booking: Booking,
    windows: Sequence[Occurrence],
    held: Sequence[_Held],
    amount: Amount,
    base: Amount,
    capacity: Amount,
    unit: str,
) -> Conflict | None:
    found: Conflict | None = None
    bad = 0
    for w in windows:
        peak, others = _peak(held, w.start, w.end)
        if base + peak + amount <= capacity:
            continue
        bad += 1
        if found is None:
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


def booking_conflicts(
    bookings: Iterable[Booking],
    capacity: Capacity,
    guarantees: Mapping[str, Amount],
) -> list[Conflict]:
    """The bookings that do not fit (see the module's words), each with its first bad window."""
    equivalents: dict[str, list[_Held]] = {}  # per pool
    units: dict[tuple[str, str], list[_Held]] = {}  # per pool and shape
    out: list[Conflict] = []
    for booking in bookings:
        windows = all_occurrences(booking)
        eq = capacity.equivalent(booking.shape) * booking.gpus
        key = (booking.pool, booking.shape)
        conflict = None
        if key in capacity.units:
            conflict = _check(
                booking,
                windows,
                units.get(key, []),
                booking.gpus,
                0,
                capacity.units[key],
                booking.shape,
            )
        if conflict is None and booking.pool in capacity.gpus:
            conflict = _check(
                booking,
                windows,
                equivalents.get(booking.pool, []),
                eq,
                guarantees.get(booking.pool, 0),
                capacity.gpus[booking.pool],
                "GPU-equivalents",
            )
        if conflict is not None:
            out.append(conflict)
            continue
        for w in windows:
            units.setdefault(key, []).append(_Held(booking, w, booking.gpus))
            equivalents.setdefault(booking.pool, []).append(_Held(booking, w, eq))
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
