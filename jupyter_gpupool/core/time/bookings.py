"""Bookings: a group (or users) gets N GPUs of a shape in a pool for a window of time.

A ``kind: booking`` document (checked by :mod:`..pools.booking_reading`, FILE:LINE like the rest of a pool
file) becomes a :class:`Booking`. Its :class:`Window` is either one stretch of local time
(:class:`Once`) or the same hours on some weekdays between two dates (:class:`Weekly`), in an
IANA time zone. This module says *when* a booking holds: :func:`window_at`, :func:`next_start`,
:func:`occurrences`; :mod:`..admission.booking_fit` says whether bookings fit a pool; :mod:`.bookings_in_force`
what a booking in force does to admission.

**Local time is what the admin wrote** (*decided*; also in ``docs/pools.md``). "Tuesdays
10:00-12:00 Europe/Berlin" is 10:00 on the clocks in Berlin every Tuesday: 09:00 UTC in winter,
08:00 UTC in summer. A local time that a daylight-saving change skips or repeats is read as
iCalendar reads it (RFC 5545, 3.3.5), which is also Python's ``fold=0``:

- in a **gap** (02:30 on the last Sunday of March in Berlin does not exist) with the offset in
  force before the gap, so it is as far after the gap as it was after its start: 03:30 CEST;
- in a **fold** (02:30 on the last Sunday of October happens twice) the first of the two: 02:30
  CEST, 00:30 UTC.

A weekly window whose start and end both fall in one gap moves with them that day; a once
window that does is refused where it is read (its clock times never happen: :func:`in_gap`).
``from`` and ``until`` are local dates and both inclusive: a weekly window holds on every listed
weekday ``d`` with ``from <= d <= until`` (the day its start is on).

Pure: time comes in as epoch seconds, the time-zone data is read through :mod:`zoneinfo` (the
system's IANA database, else the ``tzdata`` package).
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..usage.shapes import parse_profile

#: Weekdays as documents write them, Monday first (``datetime.date.weekday()`` order).
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WEEKDAY_WORDS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

_CLOCK = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
_LOCAL = re.compile(r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[T ]([0-9]{2}:[0-9]{2})(?::([0-5][0-9]))?$")
_UTC = dt.timezone.utc


#: Dates a window may be on: years 1970 to 9998 (*decided*; also in ``docs/pools.md``), so
#: that every instant of a window, a day either side and its ISO week are dates Python has.
FIRST_DAY = dt.date(1970, 1, 1)
LAST_DAY = dt.date(9998, 12, 31)

#: The longest a window may last, and a weekly window's ``from`` to ``until`` (*decided*; also
#: in ``docs/pools.md``): a year, leap or not. It bounds a booking's windows (at most 367 of a
#: weekly one), so checking whether bookings fit costs what their windows are, and no more.
MAX_SPAN_DAYS = 366

#: Names the time-zone database holds that are not zones a place keeps: the machine's own
#: (``localtime``), tzcode's (``posixrules``, ``Factory``) and the leap-second variants.
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@lru_cache(maxsize=1)
def _iana_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


@lru_cache(maxsize=256)
def zone(key: str) -> dt.tzinfo:
    """The IANA time zone ``key`` (``Europe/Berlin``); ValueError when there is none so named
    (``localtime``, ``posixrules``, ``Factory``, ``right/...`` and ``posix/...`` are not zones)."""
    if key in _NOT_ZONES or key.startswith(("right/", "posix/")) or key not in _iana_names():
        raise ValueError(f"unknown time zone {key!r}")
    try:
        return zoneinfo.ZoneInfo(key)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {key!r}") from None


def in_range(day: dt.date) -> bool:
    """Whether ``day`` is one a window may be on (:data:`FIRST_DAY` to :data:`LAST_DAY`)."""
    return FIRST_DAY <= day <= LAST_DAY


def is_time_zone(key: str) -> bool:
    """Whether ``key`` names an IANA time zone (``Europe/Berlin``, ``UTC``)."""
    try:
        zone(key)
    except ValueError:
        return False
    return True


def parse_clock(text: str) -> dt.time | None:
    """``"10:00"`` as a time of day; None unless written ``HH:MM`` (00:00 to 23:59)."""
    m = _CLOCK.match(text)
    return dt.time(int(m[1]), int(m[2])) if m else None


def parse_local(text: str) -> dt.datetime | None:
    """``"2027-01-12T10:00"`` (or ``"2027-01-12T10:00:30"``, to the second) as a local (naive)
    date and time; None when it is not one."""
    m = _LOCAL.match(text)
    if m is None:
        return None
    clock = parse_clock(m[2])
    try:
        day = dt.date.fromisoformat(m[1])
    except ValueError:
        return None
    if clock is None:
        return None
    return dt.datetime.combine(day, clock.replace(second=int(m[3] or 0)))


@dataclass(frozen=True)
class Once:
    """One stretch of local time, ``start`` to ``end`` (naive: the window's zone says where)."""

    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True)
class Weekly:
    """``start`` to ``end`` (local, same day) on ``days`` (0 = Monday), ``first`` to ``last``
    (local dates, both inclusive)."""

    days: tuple[int, ...]
    start: dt.time
    end: dt.time
    first: dt.date
    last: dt.date


@dataclass(frozen=True)
class Window:
    """When a booking holds: once or weekly, in the IANA time zone ``timezone``."""

    timezone: str
    once: Once | None = None
    weekly: Weekly | None = None


@dataclass(frozen=True)
class Booking:
    """``gpus`` units of ``shape`` in ``pool`` for ``groups`` and ``users`` during ``window``."""

    name: str
    pool: str
    window: Window
    gpus: int
    shape: str = "whole"
    groups: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    description: str | None = None
    source: Any = field(default=None, compare=False)  # a pools.Source: where it was written


@dataclass(frozen=True)
class Occurrence:
    """One window of a booking, ``[start, end)`` in epoch seconds, with its local day."""

    start: float
    end: float
    day: dt.date
    local_start: dt.time
    local_end: dt.time
    timezone: str
    #: the local day it ends on, when not ``day`` (a once window over several days)
    end_day: dt.date | None = None

    def until_text(self) -> str:
        """Its end on its own clock: ``12:00``, or ``2027-01-31 00:00`` when it ends on
        another day than it starts."""
        end = clock_text(self.local_end)
        return f"{self.end_day.isoformat()} {end}" if self.end_day is not None else end

    def words(self) -> str:
        """``Tue 2027-01-19 10:00\u201312:00 Europe/Berlin`` (an en dash; seconds when a
        time has them), or ``Tue 2026-12-01 00:00 \u2013 Sun 2027-01-31 00:00 UTC`` over
        several days."""
        start = f"{WEEKDAY_WORDS[self.day.weekday()]} {self.day.isoformat()} "
        start += clock_text(self.local_start)
        if self.end_day is not None:
            end = f"{WEEKDAY_WORDS[self.end_day.weekday()]} {self.end_day.isoformat()} "
            end += clock_text(self.local_end)
            return f"{start} \u2013 {end} {self.timezone}"
        return f"{start}\u2013{clock_text(self.local_end)} {self.timezone}"


def clock_text(t: dt.time) -> str:
    """``10:00``, or ``10:00:30`` when it has seconds."""
    return f"{t:%H:%M:%S}" if t.second else f"{t:%H:%M}"


def instant(local: dt.datetime, tz: dt.tzinfo) -> float:
    """Epoch seconds of a local time in ``tz``: in a gap with the offset before it, in a fold
    the first (``fold=0``, RFC 5545)."""
    return local.replace(tzinfo=tz, fold=0).timestamp()


def _occurrence(window: Window, start: dt.datetime, end: dt.datetime) -> Occurrence | None:
    tz = zone(window.timezone)
    a, b = instant(start, tz), instant(end, tz)
    if b <= a:
        return None  # the zone's offsets leave nothing between its ends: nothing that day
    end_day = end.date() if end.date() != start.date() else None
    return Occurrence(a, b, start.date(), start.time(), end.time(), window.timezone, end_day)


def in_gap(local: dt.datetime, timezone: str) -> bool:
    """Whether the clocks of ``timezone`` skip ``local`` (a daylight-saving gap: 02:30 on
    2027-03-28 in Berlin)."""
    tz = zone(timezone)
    back = dt.datetime.fromtimestamp(instant(local, tz), tz).replace(tzinfo=None)
    return back != local


def once_occurrence(window: Window) -> Occurrence | None:
    """The one window of a once ``window``; None when the zone's offsets leave it empty or it
    is not a once window."""
    if window.once is None:
        return None
    return _occurrence(window, window.once.start, window.once.end)


def _local_date(t: float, tz: dt.tzinfo) -> dt.date:
    return dt.datetime.fromtimestamp(t, _UTC).astimezone(tz).date()


def _weekly_days(w: Weekly, first: dt.date, last: dt.date) -> list[dt.date]:
    """The booked days of ``w`` from ``first`` to ``last`` (both inclusive), in order."""
    first, last = max(first, w.first), min(last, w.last)
    out = []
    day = first
    while day <= last:
        if day.weekday() in w.days:
            out.append(day)
        day += dt.timedelta(days=1)
    return out


def occurrences(booking: Booking, a: float, b: float) -> list[Occurrence]:
    """Every window of ``booking`` that overlaps ``[a, b)`` (start < b and end > a), in order."""
    window = booking.window
    if window.once is not None:
        found = _occurrence(window, window.once.start, window.once.end)
        return [found] if found is not None and found.start < b and found.end > a else []
    w = window.weekly
    if w is None or b <= a:
        return []
    tz = zone(window.timezone)
    # a day's window starts and ends on that local day: one day either side covers every offset
    days = _weekly_days(
        w, _local_date(a, tz) - dt.timedelta(days=1), _local_date(b, tz) + dt.timedelta(days=1)
    )
    out = []
    for day in days:
        found = _occurrence(
            window, dt.datetime.combine(day, w.start), dt.datetime.combine(day, w.end)
        )
        if found is not None and found.start < b and found.end > a:
            out.append(found)
    return out


def all_occurrences(booking: Booking) -> list[Occurrence]:
    """Every window of ``booking`` (a weekly one has ``from`` and ``until``, so they are few)."""
    window = booking.window
    if window.once is not None:
        found = _occurrence(window, window.once.start, window.once.end)
        return [found] if found is not None else []
    w = window.weekly
    if w is None:
        return []
    out = []
    for day in _weekly_days(w, w.first, w.last):
        found = _occurrence(
            window, dt.datetime.combine(day, w.start), dt.datetime.combine(day, w.end)
        )
        if found is not None:
            out.append(found)
    return out


def window_at(booking: Booking, t: float) -> Occurrence | None:
    """The window of ``booking`` in force at ``t`` (``start <= t < end``), or None."""
    return next((o for o in occurrences(booking, t, t + 1e-6) if o.start <= t < o.end), None)


def next_start(booking: Booking, t: float) -> Occurrence | None:
    """The first window of ``booking`` that starts after ``t`` (strictly), or None."""
    window = booking.window
    if window.once is not None:
        found = _occurrence(window, window.once.start, window.once.end)
        return found if found is not None and found.start > t else None
    w = window.weekly
    if w is None:
        return None
    tz = zone(window.timezone)
    first = max(w.first, _local_date(t, tz) - dt.timedelta(days=1))
    while first <= w.last:
        last = first + dt.timedelta(days=27)
        for day in _weekly_days(w, first, last):
            found = _occurrence(
                window, dt.datetime.combine(day, w.start), dt.datetime.combine(day, w.end)
            )
            if found is not None and found.start > t:
                return found
        first = last + dt.timedelta(days=1)
    return None


def shape_id_equivalent(shape_id: str) -> Fraction:
    """GPU-equivalents of one unit of a shape, from its id alone: ``whole`` 1, ``shared-4``,
    ``mps-4`` and ``hami-4`` 1/4, a MIG profile its compute slices over 7 (an A100's or H100's;
    an A30's 4 slices are known only from its nodes: :class:`..admission.booking_fit.Capacity` takes the
    nodes' equivalents over this). ValueError for a string that is no shape id."""
    if shape_id == "whole":
        return Fraction(1)
    kind, _, rest = shape_id.partition("-")
    if kind in ("shared", "mps", "hami") and rest.isdigit() and int(rest) > 0:
        return Fraction(1, int(rest))
    if kind == "mig":
        profile, _, replicas = rest.partition("-shared-")
        parsed = parse_profile(profile)
        if parsed is not None and (not replicas or (replicas.isdigit() and int(replicas) > 0)):
            return Fraction(parsed[0], 7) / (int(replicas) if replicas else 1)
    raise ValueError(f"{shape_id!r} is not a shape id")
