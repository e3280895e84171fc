"""Bookings through the API (issue 30): created, listed by week, refused when they do not fit
(the window named), seen by their members only, kept in the database across a restart, and
every change in the change log. Truth is read apart from the code under test: the database
with SQL, a fresh service's list.

training-pool has 16 whole A100s and 1 GPU-equivalent of MIG instances (17); its quotas
guarantee 14 (ml-research 12, alice 2), which whole-GPU requests may claim, so 2 whole GPUs are
left to book at any moment. The service's clock stands at T0, Friday 2027-01-15 08:00 UTC.
"""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest
from sqlrows import sql

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.db.store import DatabaseError

CS231 = """\
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

ML_OPS = {
    "kind": "booking",
    "version": "v0.1",
    "booking": {"name": "ml-ops"},
    "pool": "training-pool",
    "gpus": 2,
    "users": ["bob"],
    "window": {
        "weekly": {"days": ["tue"], "start": "11:00", "end": "13:00"},
        "from": "2027-01-19",
        "until": "2027-02-02",
        "timezone": "Europe/Berlin",
    },
}

ONCE_FRIDAY = {
    "kind": "booking",
    "version": "v0.1",
    "booking": {"name": "friday-demo"},
    "pool": "dev-pool",
    "gpus": 2,
    "users": ["carol"],
    "window": {
        "once": {"start": "2027-01-15T08:00", "end": "2027-01-15T10:00"},
        "timezone": "UTC",
    },
}


async def test_a_booking_is_created_listed_by_week_and_refused_when_it_does_not_fit(
    db_url, start_service, now
):
    service = await start_service(db_url=db_url)
    admin = service.admin()
    made = await admin.create_bookings(CS231)
    assert made["created"] == ["cs231"]
    row = made["bookings"][0]
    assert row["pool"] == "training-pool" and row["gpus"] == 2 and row["groups"] == ["cs231"]
    assert row["window"] == (
        "Tuesdays 10:00\u201312:00 Europe/Berlin, from 2027-01-12 to 2027-03-30"
    )
    assert row["source"] == "api" and row["created_by"] == "service spawner"
    assert row["current"] is None
    # Tuesday 2027-01-19 10:00 in Berlin (CET, UTC+1) is 09:00 UTC
    assert row["next"]["start"] == "2027-01-19T09:00:00Z"

    week3 = await admin.bookings(week="2027-W03")
    assert week3["week"] == "2027-W03" and week3["week_from"] == "2027-01-18"
    [listed] = week3["bookings"]
    assert [w["words"] for w in listed["week"]] == ["Tue 2027-01-19 10:00\u201312:00 Europe/Berlin"]
    assert (await admin.bookings(week="2027-01-21"))["week"] == "2027-W03"
    # the current week (T0 is Friday of 2027-W02): Tuesday the 12th, the first day
    current = await admin.bookings()
    assert current["week"] == "2027-W02"
    assert [w["start"] for w in current["bookings"][0]["week"]] == ["2027-01-12T09:00:00Z"]
    assert (await admin.bookings(pool="dev-pool"))["bookings"] == []

    with pytest.raises(GPUPoolError) as refused:
        await admin.create_bookings(ML_OPS)
    assert refused.value.status == 409
    assert refused.value.message == (
        "booking does not fit: ml-ops (Tue 2027-01-19 11:00\u201313:00 Europe/Berlin) overlaps "
        "cs231 (Tue 2027-01-19 10:00\u201312:00 Europe/Berlin): 18 of 16 whole GPUs booked "
        "(with 14 guaranteed by quotas); and 2 more windows"
    )
    assert [b["name"] for b in (await admin.bookings())["bookings"]] == ["cs231"]
    assert sql(db_url, "SELECT name FROM bookings") == [("cs231",)]

    with pytest.raises(GPUPoolError) as bad:
        await admin.create_bookings(CS231.replace('"12:00"', '"09:00"'))
    assert bad.value.status == 400
    assert "the window must end after it starts" in bad.value.message


async def test_members_see_their_own_bookings_only_and_users_may_not_book(
    db_url, start_service, now
):
    service = await start_service(db_url=db_url)
    admin = service.admin()
    await admin.create_bookings(CS231)
    await admin.create_bookings(ONCE_FRIDAY)
    student = service.user("erin", ["cs231"])
    assert [b["name"] for b in (await student.bookings())["bookings"]] == ["cs231"]
    carol = service.user("carol")
    [friday] = (await carol.bookings())["bookings"]
    assert friday["name"] == "friday-demo"
    assert friday["current"]["start"] == "2027-01-15T08:00:00Z"
    with pytest.raises(GPUPoolError) as hidden:
        await carol.booking("cs231")
    assert hidden.value.status == 404
    with pytest.raises(GPUPoolError) as forbidden:
        await student.create_bookings(ML_OPS)
    assert forbidden.value.status == 403
    assert [b["name"] for b in (await admin.bookings())["bookings"]] == [
        "cs231",
        "friday-demo",
    ]


async def test_bookings_survive_a_restart_and_every_change_is_in_the_change_log(
    db_url, start_service, now
):
    service = await start_service(db_url=db_url)
    admin = service.admin()
    await admin.create_bookings(CS231)
    await admin.create_bookings(ONCE_FRIDAY)
    replaced = await admin.replace_booking("cs231", CS231.replace("gpus: 2", "gpus: 1"))
    assert replaced["replaced"] == ["cs231"] and replaced["booking"]["gpus"] == 1
    await admin.delete_booking("friday-demo")
    stored = sql(db_url, "SELECT name, document, created_by FROM bookings")
    assert [(n, json.loads(d)["gpus"], who) for n, d, who in stored] == [
        ("cs231", 1, "service spawner")
    ]
    await service.stop()

    again = await start_service(db_url=db_url)
    [kept] = (await again.admin().bookings(week="2027-W03"))["bookings"]
    assert kept["name"] == "cs231" and kept["gpus"] == 1 and kept["created_by"] == "service spawner"
    assert kept["week"][0]["start"] == "2027-01-19T09:00:00Z"
    assert [b.name for b in again.ctx.state.bookings] == ["cs231"]
    changes = [
        what for (what,) in sql(db_url, "SELECT what FROM changes ORDER BY id") if "booking" in what
    ]
    assert changes == [
        "created booking cs231",
        "created booking friday-demo",
        "replaced booking cs231",
        "deleted booking friday-demo",
    ]


async def test_pools_endpoint_takes_booking_documents_and_file_names_are_refused(
    db_url, start_service, pools_dir, now
):
    (pools_dir / "lab.yaml").write_text(
        CS231.replace("cs231}", "lab}").replace("name: cs231", "name: lab")
    )
    service = await start_service(db_url=db_url)
    admin = service.admin()
    answer = await admin.apply_pools(
        (pools_dir / "dev-pool.yaml").read_text() + "---\n" + json.dumps(ONCE_FRIDAY)
    )
    assert answer["bookings_created"] == ["friday-demo"]
    assert answer["replaced"] == ["dev-pool"]
    only = await admin.apply_pools(json.dumps({**ONCE_FRIDAY, "gpus": 1}))
    assert only["bookings_replaced"] == ["friday-demo"] and only["created"] == []
    names = [b["name"] for b in (await admin.bookings())["bookings"]]
    assert names == ["lab", "friday-demo"]
    with pytest.raises(GPUPoolError) as taken:
        await admin.create_bookings(CS231.replace("name: cs231", "name: lab"))
    assert taken.value.status == 409
    assert f"a pool file has it ({pools_dir / 'lab.yaml'}:3)" in taken.value.message
    with pytest.raises(GPUPoolError) as in_file:
        await admin.delete_booking("lab")
    assert in_file.value.status == 409


async def test_without_a_database_no_booking_is_taken(start_service):
    service = await start_service(db_url="")
    with pytest.raises(GPUPoolError) as refused:
        await service.admin().create_bookings(CS231)
    assert refused.value.status == 503
    assert "kept in the service's database" in refused.value.message


async def test_a_booking_the_database_does_not_take_is_not_kept(db_url, start_service):
    """The answer waits for the commit: a write that fails answers 503 and keeps nothing, in
    memory or in the database."""
    service = await start_service(db_url=db_url)
    db = service.ctx.records.db

    def failing(rows):
        future = Future()
        future.set_exception(DatabaseError("the disk is full"))
        return future

    db.bookings_put = failing
    with pytest.raises(GPUPoolError) as refused:
        await service.admin().create_bookings(CS231)
    assert refused.value.status == 503 and "the disk is full" in refused.value.message
    assert service.ctx.state.bookings == ()
    assert (await service.admin().bookings())["bookings"] == []
    assert sql(db_url, "SELECT name FROM bookings") == []
