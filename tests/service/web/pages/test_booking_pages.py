"""The bookings' pages (issue 30): the week view of each pool's bookings with the GPUs booked
against the pool's total, the admin page's form that adds one and the button that deletes one,
and a user's own bookings on *My GPUs*. The service's clock stands at T0, Friday 2027-01-15
08:00 UTC; what is stored is read from the database with SQL."""

from __future__ import annotations

import re

import pytest
from sqlrows import sql
from test_pages import Browser, text

from jupyter_gpupool.commands.describe import format_booking
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE, USE_SCOPE

LAB = """\
kind: booking
version: v0.1
booking: {name: cs231, description: CS231 lab}
pool: training-pool
gpus: 2
groups: [cs231]
window:
  weekly: {days: [tue], start: "10:00", end: "12:00"}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
"""


@pytest.fixture
async def booked(start_service, db_url, now):
    service = await start_service(db_url=db_url)
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    status, _, headers = await admin.post("admin/bookings", {"yaml": LAB})
    assert status == 302 and headers["Location"] == "/services/gpupool/bookings"
    yield service, admin
    admin.http.close()


async def test_the_week_view_shows_each_pools_bookings_day_by_day(booked, db_url):
    _service, admin = booked
    assert sql(db_url, "SELECT name, created_by FROM bookings") == [("cs231", "user admin")]
    status, html, _ = await admin.get("bookings?week=2027-W03")
    assert status == 200
    page = text(html)
    assert "Created booking cs231." in page
    assert "Week 2027-W03 (2027-01-18 to 2027-01-24)" in page
    # the Tuesday column of training-pool: the window and 2 of the pool's 16 whole GPUs
    week = re.search(r'id="week-training-pool".*?</section>', html, re.S)
    assert week is not None
    cells = re.findall(r"<td>(.*?)</td>", week.group(0), re.S)
    assert [text(c).strip() for c in cells] == [
        "",
        "10:00\u201312:00 cs231 : 2 of 16 whole (Europe/Berlin)",
        "",
        "",
        "",
        "",
        "",
    ]
    assert 'href="/services/gpupool/bookings?week=2027-W02"' in html
    assert 'href="/services/gpupool/bookings?week=2027-W04"' in html
    status, html, _ = await admin.get("bookings?week=2027-W20")
    assert 'data-booking="cs231"' not in html, "the booking ends in March"
    status, html, _ = await admin.get("bookings?week=soon")
    assert status == 400


async def test_a_booking_that_does_not_fit_is_refused_on_the_admin_page(booked, db_url):
    _service, admin = booked
    more = LAB.replace("cs231", "ml-ops").replace("gpus: 2", "gpus: 2\nusers: [bob]")
    status, html, _ = await admin.post("admin/bookings", {"yaml": more})
    assert status == 409
    assert (
        "Booking does not fit: ml-ops (Tue 2027-01-12 10:00\u201312:00 Europe/Berlin) overlaps "
        "cs231 (Tue 2027-01-12 10:00\u201312:00 Europe/Berlin): 18 of 16 whole GPUs booked"
    ) in text(html)
    assert "name: ml-ops" in html  # kept for fixing
    assert sql(db_url, "SELECT name FROM bookings") == [("cs231",)]


async def test_deleting_a_booking_from_the_bookings_page(booked, db_url):
    _service, admin = booked
    status, html, _ = await admin.get("bookings")
    assert 'action="/services/gpupool/admin/bookings/cs231/delete"' in html
    status, _, _headers = await admin.post("admin/bookings/cs231/delete", {})
    assert status == 302
    assert sql(db_url, "SELECT name FROM bookings") == []
    status, html, _ = await admin.get("bookings")
    assert "Booking cs231 deleted." in text(html) and "No pool has bookings." in text(html)
    status, html, _ = await admin.get("admin")
    assert "user admin (page) deleted booking cs231" in text(html)


async def test_my_gpus_shows_the_bookings_i_am_in(booked):
    service, _ = booked
    student = Browser(service, service.hub.user("erin", ["cs231"], [USE_SCOPE]))
    other = Browser(service, service.hub.user("frank", ["ml-research"], [USE_SCOPE]))
    try:
        status, html, _ = await student.get("")
        assert status == 200
        page = text(html)
        assert "My bookings" in page
        assert "next: Tue 2027-01-19 10:00\u201312:00 Europe/Berlin" in page
        status, html, _ = await other.get("")
        assert "My bookings" not in text(html)
    finally:
        student.http.close()
        other.http.close()


async def test_the_pages_say_what_a_booking_does_and_where_it_is_kept(booked):
    """Bookings warn, stop and admit (docs/pools.md, "Bookings at work"): the pages say so, not
    that admission ignores them; one made on the admin page is kept in the service's database,
    as ``gpupool describe booking`` says too, not "api"."""
    service, admin = booked
    status, html, _ = await admin.get("bookings")
    assert status == 200
    page = text(html)
    assert "its members are admitted within it first" in page
    assert "does not use bookings" not in page
    row = re.search(r'<tr id="booking-cs231">.*?</tr>', html, re.S)
    assert row is not None
    cells = [text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)]
    assert cells[6] == "the service's database (made by user admin)"
    described = format_booking(await service.admin().booking("cs231"))
    assert "Kept in:     the service's database\n" in described
    student = Browser(service, service.hub.user("erin", ["cs231"], [USE_SCOPE]))
    try:
        mine = text((await student.get(""))[1])
        assert "your servers in its pool and shape are admitted within it first" in mine
        assert "do not hold GPUs" not in mine
    finally:
        student.http.close()
