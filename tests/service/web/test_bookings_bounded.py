"""Bookings under attack (issue 36): dates past what a calendar can hold, windows that never
happen, zones that are not zones, shapes no node offers, a body cut short by the database,
and a stored booking that cannot be shown. Each bad input is a 400 (or 409) that names the
field, and nothing of it is kept: the truth is the database read with SQL and a fresh list.

training-pool has 16 whole A100s and one A100 cut into 7 x mig-1g.10gb (17 GPU-equivalents);
its quotas guarantee 14 (ml-research 12, alice 2). The clock stands at Friday 2027-01-15 08:00.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlrows import sql

from jupyter_gpupool.client import GPUPoolError


def once(name: str, start: str, end: str, tz: str = "UTC", **more) -> dict:
    return {
        "kind": "booking",
        "version": "v0.1",
        "booking": {"name": name},
        "pool": "training-pool",
        "gpus": 1,
        "users": ["carol"],
        "window": {"once": {"start": start, "end": end}, "timezone": tz},
        **more,
    }


def weekly(name: str, first: str, last: str, **more) -> dict:
    return {
        "kind": "booking",
        "version": "v0.1",
        "booking": {"name": name},
        "pool": "training-pool",
        "gpus": 1,
        "groups": ["cs231"],
        "window": {
            "weekly": {"days": ["tue"], "start": "10:00", "end": "12:00"},
            "from": first,
            "until": last,
            "timezone": "Europe/Berlin",
        },
        **more,
    }


async def refused(call) -> GPUPoolError:
    with pytest.raises(GPUPoolError) as e:
        await call
    return e.value


def kept(db_url: str) -> list[str]:
    return sorted(name for (name,) in sql(db_url, "SELECT name FROM bookings"))


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        (
            once("y10k", "9999-12-31T20:00", "9999-12-31T23:00", "America/Los_Angeles"),
            "window.once.start",
            "outside the dates a window may be on",
        ),
        (weekly("forever", "2027-01-12", "9999-12-31"), "window.until", "outside the dates"),
        (weekly("century", "2027-01-12", "2127-01-12"), "window.until", "at most 366 days"),
        (
            # 02:10 to 02:50 on 2027-03-28 do not happen in Berlin (the clocks go 02:00 -> 03:00)
            once("gap", "2027-03-28T02:10", "2027-03-28T02:50", "Europe/Berlin"),
            "window.once",
            "daylight-saving change",
        ),
        (once("local", "2027-01-19T10:00", "2027-01-19T12:00", "localtime"), "window.timezone", ""),
        (
            once("rules", "2027-01-19T10:00", "2027-01-19T12:00", "posixrules"),
            "window.timezone",
            "",
        ),
        (once("factory", "2027-01-19T10:00", "2027-01-19T12:00", "Factory"), "window.timezone", ""),
        (once("leap", "2027-01-19T10:00", "2027-01-19T12:00", "right/UTC"), "window.timezone", ""),
    ],
    ids=[
        "year-10000",
        "until-9999",
        "100-years",
        "dst-gap",
        "localtime",
        "posixrules",
        "Factory",
        "right-UTC",
    ],
)
async def test_a_window_no_calendar_can_hold_is_a_400_naming_the_field_and_nothing_is_kept(
    db_url, start_service, document, field, words
):
    service = await start_service(db_url=db_url)
    admin = service.admin()
    e = await refused(admin.create_bookings(document))
    assert e.status == 400
    problems = " ".join(str(p) for p in (e.body or {}).get("problems", [])) or e.message
    assert field in problems and words in problems
    assert kept(db_url) == []
    # the list, the CLI's source, still answers
    assert (await admin.bookings())["bookings"] == []


async def test_weeks_past_the_calendar_are_a_400_naming_week(db_url, start_service):
    service = await start_service(db_url=db_url)
    for week in ("9999-W52", "0001-W01"):
        e = await refused(service.admin().bookings(week=week))
        assert e.status == 400 and "week" in e.message and week in e.message


async def test_a_stored_booking_that_cannot_be_used_is_named_in_health_and_the_list_answers(
    db_url, start_service
):
    """A row written before dates were bounded (straight into the database, as an older
    service did): the service starts, lists the others, and health names it."""
    service = await start_service(db_url=db_url)
    await service.admin().create_bookings(once("fine", "2027-01-19T10:00", "2027-01-19T12:00"))
    await service.stop()
    bad = once("y10k", "9999-12-31T20:00", "9999-12-31T23:00", "America/Los_Angeles")
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO bookings (name, document, created_by, created, changed_by, changed)"
                " VALUES ('y10k', :doc, 'old', 0, 'old', 0)"
            ),
            {"doc": json.dumps(bad)},
        )
    engine.dispose()
    again = await start_service(db_url=db_url)
    admin = again.admin()
    assert [b["name"] for b in (await admin.bookings())["bookings"]] == ["fine"]
    health = await admin.health()
    assert health["status"] == "degraded"
    assert any("stored booking y10k" in p for p in health["problems"])
    # its members' My GPUs and the Bookings page answer
    assert (await again.user("carol").bookings())["bookings"][0]["name"] == "fine"


async def test_a_body_of_several_bookings_is_kept_all_or_nothing(db_url, start_service):
    """The database fails while the rows of a three-booking body go in (the statement that
    inserts them, after the first row's, or the one statement that inserts all three): none
    of them is kept, and the answer says nothing changed."""
    service = await start_service(db_url=db_url)
    inserted = []

    def insert_fails(conn, cursor, statement, parameters, context, executemany) -> None:
        if not statement.lstrip().upper().startswith("INSERT INTO BOOKINGS"):
            return
        rows = parameters if executemany else [parameters]
        inserted.extend(rows)
        if len(inserted) >= 2 or not executemany:  # one INSERT of several rows: fails itself
            raise OperationalError(statement, {}, Exception("server closed"))

    event.listen(Engine, "before_cursor_execute", insert_fails)
    try:
        body = "\n---\n".join(
            json.dumps(once(f"b{i}", f"2027-01-2{i}T10:00", f"2027-01-2{i}T12:00"))
            for i in range(3)
        )
        e = await refused(service.admin().create_bookings(body))
    finally:
        event.remove(Engine, "before_cursor_execute", insert_fails)
    assert e.status == 503 and "nothing changed" in e.message
    assert inserted, "the database was asked"
    assert kept(db_url) == []
    assert (await service.admin().bookings())["bookings"] == []
    # sent again, all three are kept
    made = await service.admin().create_bookings(body)
    assert made["created"] == ["b0", "b1", "b2"] and kept(db_url) == ["b0", "b1", "b2"]


async def test_a_shape_no_node_offers_is_refused_with_the_reason(db_url, start_service):
    service = await start_service(db_url=db_url)
    for shape in ("mig-7g.80gb", "hami-10"):
        e = await refused(
            service.admin().create_bookings(
                once(f"x-{shape}", "2027-01-19T10:00", "2027-01-19T12:00", shape=shape)
            )
        )
        assert e.status == 409, e.message
        assert f"no node of pool training-pool offers {shape}" in e.message
    assert kept(db_url) == []


async def test_whole_gpus_booked_beside_the_guarantees_must_fit_the_whole_gpus(
    db_url, start_service
):
    """16 whole A100s, 14 guaranteed: 2 whole GPUs may be booked, not 3 (the 17th
    GPU-equivalent is the MIG-cut A100, which no whole-GPU request can use)."""
    service = await start_service(db_url=db_url)
    admin = service.admin()
    e = await refused(
        admin.create_bookings(once("three", "2027-01-19T10:00", "2027-01-19T12:00", gpus=3))
    )
    assert e.status == 409
    assert "17 of 16 whole GPUs booked (with 14 guaranteed by quotas)" in e.message
    made = await admin.create_bookings(once("two", "2027-01-19T10:00", "2027-01-19T12:00", gpus=2))
    assert made["created"] == ["two"] and kept(db_url) == ["two"]


async def test_a_window_over_several_days_keeps_its_end_date_in_words(db_url, start_service):
    service = await start_service(db_url=db_url)
    made = await service.admin().create_bookings(
        once("winter", "2026-12-01T00:00", "2027-01-31T00:00")
    )
    row = made["bookings"][0]
    assert row["current"]["words"] == "Tue 2026-12-01 00:00 \u2013 Sun 2027-01-31 00:00 UTC"
