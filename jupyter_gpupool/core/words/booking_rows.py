"""Bookings as the API, the CLI and the pages show them: rows, windows in words, ISO weeks.

Pure: time comes in as epoch seconds. A week is an ISO week of local days: a booking's window
belongs to the week its local day (in the booking's own time zone) is in.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from ..time.bookings import (
    FIRST_DAY,
    LAST_DAY,
    WEEKDAY_WORDS,
    Booking,
    Occurrence,
    Window,
    in_range,
    next_start,
    occurrences,
    shape_id_equivalent,
    window_at,
)
from ..usage.amounts import Amount

_WEEK = re.compile(r"^([0-9]{4})-W([0-9]{2})$")
_DAY_NAMES = ("Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays")


def window_words(window: Window) -> str:
    """``Tuesdays 10:00\u201312:00 Europe/Berlin, from 2027-01-12 to 2027-03-30``, or
    ``2027-01-12 10:00 to 2027-01-12 12:00 UTC``."""
    if window.once is not None:
        o = window.once
        return f"{o.start:%Y-%m-%d %H:%M} to {o.end:%Y-%m-%d %H:%M} {window.timezone}"
    w = window.weekly
    if w is None:
        return "never"
    days = ", ".join(_DAY_NAMES[d] for d in w.days)
    return (
        f"{days} {w.start:%H:%M}\u2013{w.end:%H:%M} {window.timezone}, "
        f"from {w.first.isoformat()} to {w.last.isoformat()}"
    )


def parse_week(text: str | None, now: float) -> dt.date:
    """The Monday of the ISO week ``text`` names (``2027-W03``, or a date ``2027-01-19``: the
    week it is in); the current week (UTC) without one. ValueError with words otherwise."""
    if not text:
        day = dt.datetime.fromtimestamp(now, dt.timezone.utc).date()
    elif m := _WEEK.match(text):
        try:
            day = dt.date.fromisocalendar(int(m[1]), int(m[2]), 1)
        except ValueError:
            raise ValueError(
                f"week {text!r} is no ISO week (its year has no week {m[2]})"
            ) from None
    else:
        try:
            day = dt.date.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"week {text!r} is neither an ISO week (2027-W03) nor a date (2027-01-19)"
            ) from None
    monday = day - dt.timedelta(days=day.weekday())
    if not (in_range(monday) and in_range(monday + dt.timedelta(days=6))):
        raise ValueError(
            f"week {text!r} is outside the weeks bookings may be in ({FIRST_DAY.isoformat()} "
            f"to {LAST_DAY.isoformat()})"
        )
    return monday


def week_words(monday: dt.date) -> str:
    """``2027-W03``."""
    year, week, _ = monday.isocalendar()
    return f"{year}-W{week:02d}"


def week_occurrences(booking: Booking, monday: dt.date) -> list[Occurrence]:
    """The windows of ``booking`` whose local day is in the ISO week starting ``monday``."""
    sunday = monday + dt.timedelta(days=6)
    # a day or two around the week in UTC covers every time zone's local days
    a = dt.datetime.combine(monday - dt.timedelta(days=2), dt.time(), dt.timezone.utc)
    b = dt.datetime.combine(sunday + dt.timedelta(days=3), dt.time(), dt.timezone.utc)
    return [
        o for o in occurrences(booking, a.timestamp(), b.timestamp()) if monday <= o.day <= sunday
    ]


def equivalents(booking: Booking) -> Amount:
    """GPU-equivalents the booking holds in its windows (``gpus`` x its shape's)."""
    eq: Fraction = shape_id_equivalent(booking.shape) * booking.gpus
    return int(eq) if eq.denominator == 1 else eq


def is_member(booking: Booking, user: str, groups: Sequence[str]) -> bool:
    """Whether ``user`` (with hub ``groups``) is one the booking is for."""
    return user in booking.users or any(g in booking.groups for g in groups)


#: Where a booking the service keeps is written (its ``source`` is ``api``): the admin page,
#: ``gpupool create -f`` and ``POST api/v1/bookings`` all keep it there.
STORED_WORDS = "the service's database"


def kept_in(row: Mapping[str, Any]) -> str:
    """Where a booking row's booking is written, in words: its pool file and line
    (``pools/training-pool.yaml:12``), or :data:`STORED_WORDS` for one the service keeps
    (whether made on the admin page, with the CLI or through the API), not ``api``."""
    source = row.get("source")
    return STORED_WORDS if source in (None, "api") else str(source)


def occurrence_row(o: Occurrence | None, iso: Any) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"start": iso(o.start), "end": iso(o.end), "words": o.words()}


def booking_row(
    booking: Booking,
    now: float,
    iso: Any,
    meta: Mapping[str, Any] | None = None,
    week: dt.date | None = None,
) -> dict[str, Any]:
    """A booking as ``GET api/v1/bookings`` lists it (``iso``: epoch seconds to ISO text;
    ``meta``: who created and changed a stored one and when; ``week``: its windows that
    week too)."""
    meta = meta or {}
    row: dict[str, Any] = {
        "name": booking.name,
        "description": booking.description,
        "pool": booking.pool,
        "shape": booking.shape,
        "gpus": booking.gpus,
        "gpu_equivalents": equivalents(booking),
        "groups": list(booking.groups),
        "users": list(booking.users),
        "timezone": booking.window.timezone,
        "window": window_words(booking.window),
        "source": str(booking.source) if booking.source is not None else "api",
        "kept_in": STORED_WORDS if booking.source is None else str(booking.source),
        "created_by": meta.get("created_by"),
        "created": meta.get("created"),
        "changed_by": meta.get("changed_by"),
        "changed": meta.get("changed"),
        "current": occurrence_row(window_at(booking, now), iso),
        "next": occurrence_row(next_start(booking, now), iso),
    }
    if week is not None:
        row["week"] = [occurrence_row(o, iso) for o in week_occurrences(booking, week)]
    return row


#: What showing a booking can raise when its windows are past what Python's dates hold (a
#: stored booking written before the dates were bounded): that booking is left out, not the list.
UNSHOWN = (ValueError, OverflowError, ArithmeticError)


def rows_shown(
    bookings: Iterable[Booking], make: Callable[[Booking], dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """``make(b)`` for each booking, and ``(name, why)`` of those it could not be made for."""
    rows: list[dict[str, Any]] = []
    unshown: list[tuple[str, str]] = []
    for b in bookings:
        try:
            rows.append(make(b))
        except UNSHOWN as e:
            unshown.append((b.name, f"{type(e).__name__}: {e}"))
    return rows, unshown


def week_view(
    bookings: Iterable[Booking], monday: dt.date, totals: Mapping[tuple[str, str], int]
) -> dict[str, list[dict[str, Any]]]:
    """Per pool, its week: seven days (Monday first), each with the windows booked that local
    day in order (``name``, ``from``/``to`` local, ``timezone``, ``shape``, ``gpus``, and the
    pool's ``total`` of that shape from ``totals``, None when unknown)."""
    pools: dict[str, list[dict[str, Any]]] = {}
    for b in bookings:
        days = pools.setdefault(
            b.pool,
            [
                {
                    "date": (monday + dt.timedelta(days=i)).isoformat(),
                    "weekday": WEEKDAY_WORDS[i],
                    "windows": [],
                }
                for i in range(7)
            ],
        )
        try:
            found = week_occurrences(b, monday)
        except UNSHOWN:
            continue  # the list says it cannot be shown (rows_shown)
        for o in found:
            days[o.day.weekday()]["windows"].append(
                {
                    "name": b.name,
                    "start": o.start,
                    "from": f"{o.local_start:%H:%M}",
                    "to": (f"{o.end_day.isoformat()} " if o.end_day else "")
                    + f"{o.local_end:%H:%M}",
                    "timezone": o.timezone,
                    "shape": b.shape,
                    "gpus": b.gpus,
                    "total": totals.get((b.pool, b.shape)),
                }
            )
    for days in pools.values():
        for d in days:
            d["windows"].sort(key=lambda w: (w["start"], w["name"]))
    return dict(sorted(pools.items()))
