""":mod:`..documents.spec` kinds of value for time: a date, a time of day, a local date and time, a time
zone, a weekday (the windows of ``kind: booking`` documents, :mod:`..time.bookings`).

YAML reads some of them itself: ``2027-01-12`` unquoted is a date (accepted as one), and
``10:00`` unquoted is the number 600 (YAML 1.1's base 60), which is refused with a hint to
quote it, since ``600`` may have been meant as anything.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ..documents.spec import INVALID, JSON, Checker, Path, Spec
from ..time.bookings import (
    FIRST_DAY,
    LAST_DAY,
    WEEKDAYS,
    in_range,
    is_time_zone,
    parse_clock,
    parse_local,
)

_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def _in_range(c: Checker, day: dt.date, value: Any, path: Path) -> bool:
    if in_range(day):
        return True
    c.add(
        path,
        f"{value!r} is outside the dates a window may be on ({FIRST_DAY.isoformat()} to "
        f"{LAST_DAY.isoformat()})",
    )
    return False


@dataclass
class Date(Spec):
    """A calendar date, ``2027-01-12`` (YAML's own date, or a string so written)."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        day: dt.date | None = None
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            day = value
        elif isinstance(value, str):
            try:
                if len(value) == 10:
                    day = dt.date.fromisoformat(value)
            except ValueError:
                pass
        if day is None:
            c.add(path, f"{value!r} is not a date written YYYY-MM-DD (such as 2027-01-12)")
            return INVALID
        return day if _in_range(c, day, value, path) else INVALID

    def schema(self) -> JSON:
        return self._with_description({"type": "string", "pattern": _DATE_PATTERN})


def _quote_hint(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 24 * 60:
        clock = f"{value // 60:02d}:{value % 60:02d}"
        return f' (YAML reads {clock} unquoted as the number {value}: write "{clock}")'
    return ""


@dataclass
class Clock(Spec):
    """A time of day, ``"10:00"`` (quoted: see the module)."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        clock = parse_clock(value) if isinstance(value, str) else None
        if clock is None:
            c.add(
                path,
                f'{value!r} is not a time of day written HH:MM (such as "10:00")'
                + _quote_hint(value),
            )
            return INVALID
        return clock

    def schema(self) -> JSON:
        return self._with_description(
            {"type": "string", "pattern": r"^([01][0-9]|2[0-3]):[0-5][0-9]$"}
        )


@dataclass
class LocalDateTime(Spec):
    """A date and time on the window's clocks, ``"2027-01-12T10:00"`` or, to the second,
    ``"2027-01-12T10:00:30"`` (no offset: the zone is the window's ``timezone``)."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if isinstance(value, dt.datetime) and value.tzinfo is None and not value.microsecond:
            local: dt.datetime | None = value
        else:
            local = parse_local(value) if isinstance(value, str) else None
        if local is None:
            c.add(
                path,
                f"{value!r} is not a local date and time written YYYY-MM-DDTHH:MM[:SS] (such as "
                '"2027-01-12T10:00", without an offset: the zone is window.timezone)',
            )
            return INVALID
        return local if _in_range(c, local.date(), value, path) else INVALID

    def schema(self) -> JSON:
        return self._with_description(
            {
                "type": "string",
                "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-5][0-9])?$",
            }
        )


@dataclass
class TimeZone(Spec):
    """An IANA time zone name, ``Europe/Berlin``."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if not isinstance(value, str) or not is_time_zone(value):
            c.add(
                path,
                f"{value!r} is not an IANA time zone (such as Europe/Berlin, America/New_York "
                "or UTC)",
            )
            return INVALID
        return value

    def schema(self) -> JSON:
        return self._with_description({"type": "string", "minLength": 1})


_FULL = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass
class Weekday(Spec):
    """A day of the week, ``mon`` to ``sun`` (or ``monday`` to ``sunday``); checked to its
    number, Monday 0."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if value in WEEKDAYS:
            return WEEKDAYS.index(value)
        if value in _FULL:
            return _FULL.index(value)
        c.add(path, f"{value!r} is not a weekday ({', '.join(WEEKDAYS)})")
        return INVALID

    def schema(self) -> JSON:
        return self._with_description({"enum": [*WEEKDAYS, *_FULL]})
