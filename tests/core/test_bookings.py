"""Bookings' windows in local time (core/time/bookings.py), across Berlin's daylight-saving changes.

Expected instants come from a table of Berlin's offsets in 2027, not from zoneinfo: CET (UTC+1)
until 2027-03-28 01:00 UTC, CEST (UTC+2) until 2027-10-31 01:00 UTC, then CET again.
"""

from __future__ import annotations

import datetime as dt
from fractions import Fraction

import pytest

from jupyter_gpupool.core.time.bookings import (
    Booking,
    Once,
    Weekly,
    Window,
    all_occurrences,
    in_gap,
    is_time_zone,
    next_start,
    occurrences,
    shape_id_equivalent,
    window_at,
)

BERLIN = "Europe/Berlin"
SPRING = dt.datetime(2027, 3, 28, 1, 0, tzinfo=dt.timezone.utc)  # clocks 02:00 CET -> 03:00
AUTUMN = dt.datetime(2027, 10, 31, 1, 0, tzinfo=dt.timezone.utc)  # clocks 03:00 CEST -> 02:00
TUE = 1


def berlin_offset_hours(utc: dt.datetime) -> int:
    return 2 if SPRING <= utc < AUTUMN else 1


def utc(y: int, mo: int, d: int, h: int, mi: int = 0) -> float:
    return dt.datetime(y, mo, d, h, mi, tzinfo=dt.timezone.utc).timestamp()


def berlin(y: int, mo: int, d: int, h: int, mi: int = 0) -> float:
    """A Berlin wall-clock time that exists once, as epoch seconds, from the offset table."""
    naive = dt.datetime(y, mo, d, h, mi, tzinfo=dt.timezone.utc)
    for offset in (1, 2):
        candidate = naive - dt.timedelta(hours=offset)
        if berlin_offset_hours(candidate) == offset:
            return candidate.timestamp()
    raise AssertionError("not a single local time")


def weekly(days, start, end, first, last, tz=BERLIN, name="b"):
    return Booking(
        name=name,
        pool="p",
        gpus=1,
        groups=("g",),
        window=Window(tz, weekly=Weekly(tuple(days), start, end, first, last)),
    )


def once(start, end, tz=BERLIN, name="b"):
    return Booking(
        name=name, pool="p", gpus=1, groups=("g",), window=Window(tz, once=Once(start, end))
    )


TEN_TO_NOON = (dt.time(10), dt.time(12))


def test_weekly_window_keeps_local_time_across_the_spring_change():
    b = weekly([TUE], *TEN_TO_NOON, dt.date(2027, 3, 16), dt.date(2027, 4, 6))
    got = [(o.start, o.end) for o in all_occurrences(b)]
    # Tuesdays 16 and 23 March in CET: 09:00 UTC; 30 March and 6 April in CEST: 08:00 UTC
    assert got == [
        (utc(2027, 3, 16, 9), utc(2027, 3, 16, 11)),
        (utc(2027, 3, 23, 9), utc(2027, 3, 23, 11)),
        (utc(2027, 3, 30, 8), utc(2027, 3, 30, 10)),
        (utc(2027, 4, 6, 8), utc(2027, 4, 6, 10)),
    ]
    assert [o.start for o in all_occurrences(b)] == [
        berlin(2027, 3, d, 10) if d > 10 else berlin(2027, 4, d, 10) for d in (16, 23, 30, 6)
    ]


def test_weekly_window_keeps_local_time_across_the_autumn_change():
    b = weekly([TUE], *TEN_TO_NOON, dt.date(2027, 10, 19), dt.date(2027, 11, 9))
    assert [o.start for o in all_occurrences(b)] == [
        utc(2027, 10, 19, 8),
        utc(2027, 10, 26, 8),
        utc(2027, 11, 2, 9),
        utc(2027, 11, 9, 9),
    ]
    assert all(o.end - o.start == 2 * 3600 for o in all_occurrences(b))


def test_window_at_and_next_start_around_the_spring_change():
    b = weekly([TUE], *TEN_TO_NOON, dt.date(2027, 1, 12), dt.date(2027, 3, 30))
    # 30 March, CEST: 08:00-10:00 UTC
    assert window_at(b, utc(2027, 3, 30, 7, 59)) is None
    found = window_at(b, utc(2027, 3, 30, 8))
    assert found is not None and found.start == utc(2027, 3, 30, 8)
    assert window_at(b, utc(2027, 3, 30, 9, 59)) is not None
    assert window_at(b, utc(2027, 3, 30, 10)) is None  # the end is not in the window
    # 23 March, CET: 09:00 UTC is 10:00 local; 08:30 UTC is not in the window
    assert window_at(b, utc(2027, 3, 23, 8, 30)) is None
    assert window_at(b, utc(2027, 3, 23, 9, 30)) is not None
    nxt = next_start(b, utc(2027, 3, 24, 0))
    assert nxt is not None and nxt.start == utc(2027, 3, 30, 8)
    nxt = next_start(b, utc(2027, 3, 23, 9))  # strictly after: not the window starting now
    assert nxt is not None and nxt.start == utc(2027, 3, 30, 8)
    assert next_start(b, utc(2027, 3, 30, 8)) is None  # the last one has started


def test_from_and_until_are_inclusive_local_dates():
    # 2027-01-12 and 2027-03-30 are both Tuesdays: both are booked
    b = weekly([TUE], *TEN_TO_NOON, dt.date(2027, 1, 12), dt.date(2027, 3, 30))
    found = all_occurrences(b)
    assert len(found) == 12
    assert found[0].start == utc(2027, 1, 12, 9)
    assert found[-1].start == utc(2027, 3, 30, 8)
    assert next_start(b, utc(2027, 1, 1, 0)).start == utc(2027, 1, 12, 9)
    assert window_at(b, utc(2027, 1, 5, 9, 30)) is None  # a Tuesday before 'from'
    assert window_at(b, utc(2027, 4, 6, 8, 30)) is None  # a Tuesday after 'until'


def test_occurrences_overlapping_a_range():
    b = weekly([0, TUE], *TEN_TO_NOON, dt.date(2027, 1, 1), dt.date(2027, 12, 31))
    # [Tue 11:30 local, Mon 10:00 local next week): Tuesday's window overlaps, Monday's
    # starts at the end of the range so it does not
    found = occurrences(b, utc(2027, 1, 19, 10, 30), utc(2027, 1, 25, 9))
    assert [o.words() for o in found] == ["Tue 2027-01-19 10:00\u201312:00 Europe/Berlin"]
    assert occurrences(b, utc(2027, 1, 19, 11), utc(2027, 1, 19, 11)) == []


def test_once_window_across_the_spring_change_is_an_hour_shorter():
    b = once(dt.datetime(2027, 3, 27, 22), dt.datetime(2027, 3, 28, 4))
    [o] = all_occurrences(b)
    assert (o.start, o.end) == (utc(2027, 3, 27, 21), utc(2027, 3, 28, 2))
    assert o.end - o.start == 5 * 3600
    assert window_at(b, utc(2027, 3, 28, 1, 59)) == o
    assert window_at(b, utc(2027, 3, 28, 2)) is None
    assert next_start(b, utc(2027, 3, 27, 20)).start == o.start
    assert next_start(b, o.start) is None


def test_a_start_in_the_spring_gap_moves_forward_by_the_gap():
    # 02:30 on 28 March does not exist in Berlin: read with the offset before the gap (CET),
    # 01:30 UTC, which the clocks show as 03:30 CEST (RFC 5545)
    b = once(dt.datetime(2027, 3, 28, 2, 30), dt.datetime(2027, 3, 28, 4))
    [o] = all_occurrences(b)
    assert (o.start, o.end) == (utc(2027, 3, 28, 1, 30), utc(2027, 3, 28, 2))
    # a window entirely in the gap holds nothing that day; the next week's does
    w = weekly([6], dt.time(2), dt.time(3), dt.date(2027, 3, 28), dt.date(2027, 4, 4))
    assert [o.start for o in all_occurrences(w)] == [utc(2027, 4, 4, 0)]


def test_a_start_in_the_autumn_fold_is_the_first_of_the_two():
    # 02:30 on 31 October happens twice: the first (CEST, 00:30 UTC); 03:30 is CET (02:30 UTC)
    b = once(dt.datetime(2027, 10, 31, 2, 30), dt.datetime(2027, 10, 31, 3, 30))
    [o] = all_occurrences(b)
    assert (o.start, o.end) == (utc(2027, 10, 31, 0, 30), utc(2027, 10, 31, 2, 30))


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("whole", Fraction(1)),
        ("mig-1g.10gb", Fraction(1, 7)),
        ("mig-3g.40gb", Fraction(3, 7)),
        ("mig-1c.3g.40gb", Fraction(1, 7)),
        ("mig-1g.10gb-shared-2", Fraction(1, 14)),
        ("shared-4", Fraction(1, 4)),
        ("mps-2", Fraction(1, 2)),
        ("hami-4", Fraction(1, 4)),
    ],
)
def test_shape_id_equivalent(shape, expected):
    assert shape_id_equivalent(shape) == expected


def test_shape_id_equivalent_refuses_what_is_no_shape():
    with pytest.raises(ValueError):
        shape_id_equivalent("mig-1g")


def test_a_window_over_several_days_says_its_end_date():
    b = Booking(
        name="winter",
        pool="p",
        gpus=1,
        users=("carol",),
        window=Window("UTC", once=Once(dt.datetime(2026, 12, 1), dt.datetime(2027, 1, 31))),
    )
    [o] = all_occurrences(b)
    assert o.words() == "Tue 2026-12-01 00:00 \u2013 Sun 2027-01-31 00:00 UTC"
    assert o.until_text() == "2027-01-31 00:00"


@pytest.mark.parametrize("name", ["localtime", "posixrules", "Factory", "right/UTC", "posix/UTC"])
def test_names_in_the_zone_database_that_are_no_zones_are_refused(name):
    assert not is_time_zone(name)


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/Los_Angeles", "Etc/GMT+5"])
def test_iana_zones_are_zones(name):
    assert is_time_zone(name)


def test_a_time_the_spring_change_skips_is_in_the_gap():
    assert in_gap(dt.datetime(2027, 3, 28, 2, 30), "Europe/Berlin")
    assert not in_gap(dt.datetime(2027, 3, 28, 3, 0), "Europe/Berlin")
    assert not in_gap(dt.datetime(2027, 10, 31, 2, 30), "Europe/Berlin")  # a fold, not a gap
