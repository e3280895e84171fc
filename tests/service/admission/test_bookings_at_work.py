"""A booking at work in the service, with the clock moved: a borrower is stopped at the
window's start through the hub (the ledger in the database says ``reclaimed``), a member is
then admitted within the booking, and a booking's server runs on after the window.

dev-pool has one node of 4 GPUs; students are guaranteed 2 there. The booking keeps the other
2 for ml-ops from 08:10 to 09:10 UTC (T0 is 08:00). The truth: what the hub stub was asked to
stop, the pods in the simulated cluster, the sessions in the SQLite database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from service_kit import T0, start_pod
from waiting import async_wait_for

from jupyter_gpupool.client import AdmissionRejected
from jupyter_gpupool.core.words.launch_options import Catalog
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec
from jupyter_gpupool.spawner.form import form_context, render_form
from jupyter_gpupool.spawner.options import SpawnOptions

BOOKING = """kind: booking
version: v0.1
booking: {name: ml-lab, description: ML ops lab}
pool: dev-pool
gpus: 2
groups: [ml-ops]
window: {once: {start: "2027-01-15T08:10", end: "2027-01-15T09:10"}, timezone: UTC}
"""
START, END = T0 + 600, T0 + 4200


def sessions(db: Path) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT pod, charged, ended FROM server_sessions").fetchall()
    return {pod: (charged, ended) for pod, charged, ended in rows}


async def test_a_borrower_is_stopped_at_the_start_and_a_member_admitted_within(
    start_service, pools_dir, tmp_path, now
):
    (pools_dir / "bookings.yaml").write_text(BOOKING)
    db = tmp_path / "bookings.sqlite"
    # the simulator's clock is the service's: each pod's creationTimestamp is the moved clock,
    # so the two servers differ in age by a minute (no tie for a name to break)
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=f"sqlite:///{db}")
        await _borrower_stopped_member_within(service, db, now)


async def _borrower_stopped_member_within(service, db: Path, now: list[float]) -> None:
    cluster, admin, hub = service.cluster, service.admin(), service.hub

    async def stop(user: str, server: str) -> int:
        if cluster.pod("default", f"{user}-nb") is not None:  # the line may reclaim it too
            cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    hub.on_stop = stop
    # before the window: alice borrows two GPUs, then bob (students) takes two within the
    # guarantee a minute later: bob's is the newest server, and must not be taken for a borrower
    alice = await admin.admit(user="alice", groups=[], pools=["dev-pool"], gpus=2)
    assert alice["over_quota"]
    await start_pod(cluster, alice, "alice-nb")
    now[0] = T0 + 60
    bob = await admin.admit(user="bob", groups=["students"], pools=["dev-pool"], gpus=2)
    assert not bob["over_quota"]
    await start_pod(cluster, bob, "bob-nb")
    await service.settled()
    created = {
        p["metadata"]["name"]: p["metadata"]["creationTimestamp"]
        for p in (cluster.pod("default", "alice-nb"), cluster.pod("default", "bob-nb"))
    }
    assert created == {"alice-nb": "2027-01-15T08:00:00Z", "bob-nb": "2027-01-15T08:01:00Z"}

    # a member before the window is an ordinary request: the pool is full
    with pytest.raises(AdmissionRejected, match="no node has 1 free GPU"):
        await admin.admit(user="carol", groups=["ml-ops"], pools=["dev-pool"], gpus=1)
    # from booking_warning (600 s) before the start, alice reads why and when in her notice;
    # bob (within his guarantee) reads nothing
    now[0] = START - 300

    async def notices() -> dict[str, dict] | None:
        rows = {r["name"]: r.get("notice") for r in await admin.servers(pool="dev-pool")}
        return rows if rows.get("alice-nb") else None

    rows = await async_wait_for(notices, what="alice's booking notice")
    assert rows["bob-nb"] is None
    assert (rows["alice-nb"]["kind"], rows["alice-nb"]["deadline"]) == ("booking", START)
    assert "booked for ml-lab from 08:10 UTC" in rows["alice-nb"]["words"]
    now[0] = START - 1
    assert hub.stopped == []

    now[0] = START
    await async_wait_for(
        lambda: cluster.pod("default", "alice-nb") is None, what="alice's server stopped"
    )
    assert hub.stopped == [("alice", "")]  # through the hub, and only hers
    assert cluster.pod("default", "bob-nb") is not None
    await service.settled()

    carol = await admin.admit(user="carol", groups=["ml-ops"], pools=["dev-pool"], gpus=2)
    assert (carol["charged"], carol["over_quota"]) == ("booking:ml-lab", False)
    await start_pod(cluster, carol, "carol-nb")

    async def ledger() -> dict[str, tuple[str, str | None]] | None:
        found = sessions(db)
        return found if found.get("alice-nb", (None, None))[1] == "reclaimed" else None

    found = await async_wait_for(ledger, what="alice's session ended reclaimed")
    assert found["bob-nb"] == ("group:students", None)

    # from booking_warning before the end, carol (within the booking) reads that her server
    # borrows from then on: a report, not a stop; bob (his own quota) reads nothing
    now[0] = END - 700
    watch = service.ctx.booking_watch.loop
    runs = watch.runs
    await async_wait_for(lambda: watch.runs > runs + 1, what="a round of the bookings' watch")
    early = {r["name"]: r.get("notice") for r in await admin.servers(pool="dev-pool")}
    assert early == {"bob-nb": None, "carol-nb": None}
    now[0] = END - 300

    async def end_notice() -> dict[str, dict] | None:
        rows = {r["name"]: r.get("notice") for r in await admin.servers(pool="dev-pool")}
        return rows if rows.get("carol-nb") else None

    rows = await async_wait_for(end_notice, what="carol's notice of the booking's end")
    assert rows["bob-nb"] is None
    notice = rows["carol-nb"]
    assert (notice["kind"], notice["deadline"], notice["action"]) == ("booking", END, "report")
    assert "booking ml-lab ends at 09:10 UTC" in notice["words"]
    assert "borrows its GPUs" in notice["words"]

    # after the window carol's server runs on: nothing is stopped when a booking ends
    now[0] = END + 5
    await service.settled()
    running = {s["name"] for s in await admin.servers(pool="dev-pool")}
    assert running == {"bob-nb", "carol-nb"}
    assert hub.stopped == [("alice", "")]


async def test_a_member_waiting_in_line_is_admitted_at_the_window_start(
    start_service, pools_dir, tmp_path, now
):
    (pools_dir / "bookings.yaml").write_text(BOOKING)
    # the clock moves 10 minutes at once: the entries must not be dropped as unasked for
    service = await start_service(
        db_url=f"sqlite:///{tmp_path / 'line.sqlite'}", queue_heartbeat=3600
    )
    cluster, admin = service.cluster, service.admin()

    async def stop(user: str, server: str) -> int:
        if cluster.pod("default", f"{user}-nb") is not None:  # the line may reclaim it too
            cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    service.hub.on_stop = stop
    for user, groups in (("bob", ["students"]), ("dave", ["students"])):
        a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=2)
        await start_pod(cluster, a, f"{user}-nb")  # all four GPUs, two of them borrowed
    await service.settled()
    # erin (not a member, 2 GPUs) queued first, carol (member, 1) second: both wait
    erin = await admin.admit(user="erin", groups=[], pools=["dev-pool"], gpus=2, queue=True)
    carol = await admin.admit(
        user="carol", groups=["ml-ops"], pools=["dev-pool"], gpus=1, queue=True
    )
    assert erin["queued"] and carol["queued"]
    assert (erin["position"], carol["position"]) == (1, 2)
    now[0] = START  # dave's borrowed GPUs are taken back; carol goes first, within the booking

    async def carol_admitted():
        a = await admin.admission(carol["id"])
        return a if not a.get("queued") else None

    a = await async_wait_for(carol_admitted, what="carol admitted from the line")
    assert (a["charged"], a["over_quota"]) == ("booking:ml-lab", False)
    # erin came first, but carol goes first from the window's start: the one GPU left is too
    # few for erin's two, so she waits (had she gone first, she would have borrowed both)
    e = await admin.admission(erin["id"])
    assert e["queued"] and e["position"] == 1


async def test_the_spawn_form_says_what_is_left_of_a_booking_to_its_members(
    start_service, pools_dir, tmp_path, now
):
    (pools_dir / "bookings.yaml").write_text(BOOKING)
    service = await start_service()
    cluster, admin = service.cluster, service.admin()

    async def dev_row(user: str, groups: list[str]) -> dict:
        options = await admin.launch_options(user=user, groups=groups)
        return next(p for p in options["pools"] if p["name"] == "dev-pool")

    assert (await dev_row("carol", ["ml-ops"]))["bookings"] == []  # before the window
    now[0] = START
    a = await admin.admit(user="carol", groups=["ml-ops"], pools=["dev-pool"], gpus=1)
    await start_pod(cluster, a, "carol-nb")
    await service.settled()
    row = await dev_row("dan", ["ml-ops"])
    catalog = Catalog.from_json({"pools": [row]})
    text = render_form(form_context(catalog, SpawnOptions()))
    assert "booked for ml-lab until 09:10: 1 of 2 free" in text
    assert (await dev_row("erin", []))["bookings"] == []  # not a member: nothing said


async def test_a_borrower_stopped_at_the_start_is_reclaimed_in_the_database_before_the_hub_is_asked(
    start_service, pools_dir, tmp_path, now
):
    """The ledger's ``reclaimed`` is committed before the hub is asked to stop the borrower:
    a service gone right after asking (its memory with it) still closes the session as
    ``reclaimed`` when it starts again and finds the pod gone."""
    (pools_dir / "bookings.yaml").write_text(BOOKING)
    db = tmp_path / "bookings.sqlite"
    service = await start_service(db_url=f"sqlite:///{db}")
    cluster, admin, hub = service.cluster, service.admin(), service.hub
    when_asked: list[tuple[str, str | None] | None] = []

    async def stop(user: str, server: str) -> int:
        when_asked.append(sessions(db).get(f"{user}-nb"))
        return 202  # the hub takes it; the pod is not gone yet

    hub.on_stop = stop
    bob = await admin.admit(user="bob", groups=["students"], pools=["dev-pool"], gpus=2)
    await start_pod(cluster, bob, "bob-nb")
    now[0] = T0 + 60
    alice = await admin.admit(user="alice", groups=[], pools=["dev-pool"], gpus=2)
    await start_pod(cluster, alice, "alice-nb")
    await service.settled()
    await async_wait_for(lambda: "alice-nb" in sessions(db), what="alice's session opened")

    now[0] = START
    await async_wait_for(lambda: when_asked, what="the hub asked to stop alice's server")
    assert when_asked[0] is not None and when_asked[0][1] == "reclaimed"
    await service.stop()  # gone before the pod went: what it kept in memory is lost
    cluster.store.delete("pods", "default", "alice-nb")

    await start_service(db_url=f"sqlite:///{db}")

    def closed() -> tuple[float, str] | None:
        with sqlite3.connect(db) as conn:
            [(stopped, ended)] = conn.execute(
                "SELECT stopped, ended FROM server_sessions WHERE pod = 'alice-nb'"
            ).fetchall()
        return (stopped, ended) if stopped is not None else None

    _, ended = await async_wait_for(closed, what="alice's session closed")
    assert ended == "reclaimed"
