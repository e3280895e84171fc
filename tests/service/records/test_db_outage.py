"""A service whose database does not answer (issue 36): at its start, or while it runs, on SQLite
and PostgreSQL (the ``outage`` fixture, tests/outage.py, takes the database down and brings it
back).

Until it has read back what it promised (the reservations, the line, the bookings) the service
admits nothing; it keeps trying to reach the database (the ``records.database`` loop in
``GET api/v1/health``), and once the database answers it reads back, brings the stored bookings
into force and admits again, with no restart. The truth: the database's own rows (read with SQL
apart from the service), fresh API answers, what the hub stub was asked to stop.

dev-pool has one node of 4 GPUs (tests/service/pools); students are guaranteed 2 there, with a
limit of 4.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_kit import ServiceProcess, start_pod
from sqlrows import sql
from test_bookings_at_work import BOOKING, START
from waiting import async_wait_for

from jupyter_gpupool.client import AdmissionRejected, GPUPoolClient, GPUPoolError

TEST_POOLS = Path(__file__).resolve().parents[1] / "pools"

POOL, POOL_GPUS = "dev-pool", 4
#: The database is asked again every half second at most (the setting's default is 10 s)
FAST = {"db_check_interval": 0.5, "reservation_ttl": 3600}


def reserved_rows(url: str) -> dict[str, int]:
    """The reservations the database holds: admission id -> GPUs."""
    return {aid: int(gpus) for aid, gpus in sql(url, "SELECT admission_id, gpus FROM reservations")}


async def held(admin: Any) -> dict[str, int]:
    """The admissions the service holds GPUs for (``GET api/v1/admissions``): id -> GPUs."""
    return {r["id"]: int(r["gpus"]) for r in await admin.admissions() if r["pool"] == POOL}


async def in_line(admin: Any) -> list[str]:
    """The ids of the requests waiting in line (``GET api/v1/queue``), in order."""
    return [r["id"] for r in (await admin.queue())["queue"]]


async def refused_503(call: Any) -> str:
    with pytest.raises(GPUPoolError) as refused:
        await call
    assert refused.value.status == 503, refused.value
    return refused.value.message


async def health_with(admin: Any, status: str) -> dict[str, Any] | None:
    answer = await admin.health()
    return answer if answer["status"] == status else None


async def durations_read(admin: Any) -> bool:
    loops = {loop["name"]: loop for loop in (await admin.health())["loops"]}
    durations = loops["records.durations"]
    return durations["runs"] >= 1 and durations["last_error"] is None


async def test_a_restart_without_the_database_promises_nothing_until_it_has_read_back(
    outage, start_service
):
    """sam and sal (students) hold all 4 GPUs of dev-pool (committed, their pods not yet
    made); the service restarts while the database is down: sue's and sid's 2 GPUs each are
    refused (503, immediate or queued) rather than promised a second time; once the database
    answers, the reservations from before are held again with no restart (and quinn's place in
    line, from before too), sue is refused as the pool is full, and a restart after that
    promises nothing twice either."""
    service = await start_service(db_url=outage.url, **FAST)
    before = {}
    for user in ("sam", "sal"):  # 2 GPUs each: a user's limit in dev-pool
        answer = await service.admin().admit(user=user, groups=["students"], pools=[POOL], gpus=2)
        before[answer["id"]] = 2
    sam = answer
    assert reserved_rows(outage.url) == before
    # quinn waits in line for the pool (a 202: his place is committed too)
    quinn = await service.admin().admit(user="quinn", groups=[], pools=[POOL], gpus=2, queue=True)
    assert quinn["queued"], quinn
    await service.stop()

    outage.down()
    service = await start_service(db_url=outage.url, **FAST)
    admin = service.admin()
    # every 201 and 202 answered from here on, against the 4 GPUs of the pool
    promised = dict(before)

    async def ask(user: str, queue: bool = False) -> None:
        answer = await admin.admit(user=user, groups=[], pools=[POOL], gpus=2, queue=queue)
        promised[answer["id"]] = 2

    said = await refused_503(ask("sue"))
    said = await refused_503(ask("sid"))
    assert "database" in said and "admit" in said, said
    assert "nothing" in said.lower() or "no admission" in said.lower(), said
    await refused_503(ask("sue", queue=True))
    # quinn's place is not known yet: his spawner is told so (503), not that it is lost
    said = await refused_503(admin.admission(quinn["id"]))
    assert f"where admission {quinn['id']} stands is not known yet" in said, said
    await refused_503(admin.admissions_wait({quinn["id"]: None}))
    await refused_503(admin.release(quinn["id"]))
    answer = await async_wait_for(
        lambda: health_with(admin, "degraded"), what="the health to say degraded"
    )
    assert any("database" in p and "not answering" in p for p in answer["problems"]), answer
    assert answer["database"]["read_back"] is False, answer["database"]

    async def tried_again() -> dict[str, Any] | None:
        loop = {r["name"]: r for r in (await admin.health())["loops"]}["records.database"]
        return loop if loop["running"] and loop["runs"] >= 3 else None

    await async_wait_for(tried_again, what="the service to try the database 3 times")
    await refused_503(ask("sue"))  # still nothing admitted
    # an admin's change meanwhile (the quotas as they are, put again) is kept in memory...
    await admin.put_quotas((TEST_POOLS / "quotas.yaml").read_text())
    said_changes = [c.what for c in service.ctx.changes.latest(1)]
    assert said_changes == ["replaced the quota documents (test-quotas)"], said_changes

    outage.up()
    # no restart: the service reads back what it promised before
    await async_wait_for(
        lambda: health_with(admin, "ok"), what="the health to say ok once the database answers"
    )
    assert await held(admin) == before
    assert await in_line(admin) == [quinn["id"]]
    # ...and written to the database once it answers
    await async_wait_for(
        lambda: [w for (w,) in sql(outage.url, "SELECT what FROM changes")] == said_changes,
        what="the change made while the database was down, in the database",
    )
    with pytest.raises(AdmissionRejected, match="no node has 2 free GPUs"):
        await ask("sue")
    print(f"GPUs promised on the {POOL_GPUS}-GPU pool: {sum(promised.values())}")
    assert sum(promised.values()) <= POOL_GPUS, promised

    # a restart now: what was promised before it is not promised again
    await service.stop()
    service = await start_service(db_url=outage.url, **FAST)
    admin = service.admin()
    assert await held(admin) == before
    assert reserved_rows(outage.url) == before
    assert await in_line(admin) == [quinn["id"]]
    with pytest.raises(AdmissionRejected):
        await ask("sue")
    # sam's pod comes: his reservation turns into his server, still nothing more promised
    await start_pod(service.cluster, sam, "sam-nb")
    del before[sam["id"]]

    async def seen() -> bool:
        return await held(admin) == before

    await async_wait_for(seen, what="sam's reservation to be his pod")
    with pytest.raises(AdmissionRejected):
        await ask("sue")
    assert sum(promised.values()) <= POOL_GPUS, promised


async def test_stored_bookings_come_into_force_once_the_database_answers(
    outage, start_service, now
):
    """A booking made through the API keeps 2 of dev-pool's GPUs for ml-ops from 08:10; alice
    borrows them. The service restarts while the database is down and the window starts: the
    booking is not known, so nothing is stopped and bookings cannot be changed (503); once the
    database answers, with no restart, the booking is listed and in force: alice's server is
    stopped through the hub, and her session in the database ends ``reclaimed``."""
    service = await start_service(db_url=outage.url, **FAST)
    admin = service.admin()
    await admin.create_bookings(BOOKING)
    assert sql(outage.url, "SELECT name FROM bookings") == [("ml-lab",)]
    bob = await admin.admit(user="bob", groups=["students"], pools=[POOL], gpus=2)
    await start_pod(service.cluster, bob, "bob-nb")
    alice = await admin.admit(user="alice", groups=[], pools=[POOL], gpus=2)
    assert alice["over_quota"]
    await start_pod(service.cluster, alice, "alice-nb")
    await service.settled()
    await service.stop()

    outage.down()
    service = await start_service(db_url=outage.url, **FAST)
    cluster, admin, hub = service.cluster, service.admin(), service.hub

    async def stop(user: str, server: str) -> int:
        cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    hub.on_stop = stop
    said = await refused_503(admin.delete_booking("ml-lab"))
    assert "database" in said, said
    now[0] = START + 1
    watch = service.ctx.booking_watch.loop
    rounds = watch.runs
    await async_wait_for(
        lambda: watch.runs >= rounds + 2, what="two rounds of the bookings' watch in the window"
    )
    assert hub.stopped == [] and cluster.pod("default", "alice-nb") is not None

    outage.up()

    async def listed() -> list[str] | None:
        try:
            names = [b["name"] for b in (await admin.bookings(pool=POOL))["bookings"]]
        except GPUPoolError:
            return None
        return names if "ml-lab" in names else None

    await async_wait_for(listed, what="the stored booking listed once the database answers")
    await async_wait_for(
        lambda: cluster.pod("default", "alice-nb") is None, what="alice's server stopped"
    )
    assert hub.stopped == [("alice", "")]  # through the hub, and only hers
    assert cluster.pod("default", "bob-nb") is not None

    def ended() -> str | None:
        rows = sql(outage.url, "SELECT ended FROM server_sessions WHERE pod = 'alice-nb'")
        return rows[0][0] if rows and rows[0][0] else None

    assert await async_wait_for(ended, what="alice's session to end") == "reclaimed"


@pytest.mark.parametrize("outage", ["postgresql"], indirect=True)
async def test_the_health_report_says_the_database_is_not_answering_while_it_is_not(
    outage, start_service
):
    """PostgreSQL stops while the service runs (nothing is being written: the usage samples
    come once a minute): ``GET api/v1/health`` says the database is not answering, an
    admission is refused (503) as it cannot be recorded; once PostgreSQL is back the report
    says ok again and an admission is committed before its 201."""
    service = await start_service(db_url=outage.url, **FAST)
    admin = service.admin()
    await async_wait_for(lambda: health_with(admin, "ok"), what="the health to say ok")
    # the ledger's durations are read once at start, then hourly: a first read cut off by the
    # outage would be its last error for an hour (and the report rightly degraded for as long)
    await async_wait_for(lambda: durations_read(admin), what="the durations' first read")

    outage.down()

    async def not_answering() -> dict[str, Any] | None:
        answer = await admin.health()
        return answer if answer["database"]["answering"] is False else None

    answer = await async_wait_for(not_answering, what="the health to say it is not answering")
    assert answer["status"] == "degraded", answer
    assert any("database" in p and "not answering" in p for p in answer["problems"]), answer
    said = await refused_503(admin.admit(user="sam", groups=["students"], pools=[POOL], gpus=1))
    assert "could not be recorded" in said, said
    assert await held(admin) == {}

    outage.up()
    answer = await async_wait_for(
        lambda: health_with(admin, "ok"), what="the health to say ok again", timeout=30
    )
    assert answer["database"]["answering"] is True and answer["problems"] == []
    sam = await admin.admit(user="sam", groups=["students"], pools=[POOL], gpus=1)
    assert reserved_rows(outage.url) == {sam["id"]: 1}


async def test_sigkills_around_an_outage_promise_no_gpu_twice(
    outage, sim_cluster, hub, pools_dir, tmp_path
):
    """The service as a process (``python -m jupyter_gpupool.service``), killed with SIGKILL:
    after 4 GPUs of dev-pool were promised; again while its database is down (started without
    it, it admitted nothing); and once more after the database came back. Each time the GPUs
    held (the API) and the reservations (the database's rows) are those 4, and no one else is
    admitted."""
    svc = ServiceProcess(
        sim_cluster,
        hub,
        pools_dir,
        tmp_path / "service.log",
        db_url=outage.url,
        extra_args=[
            "--GPUPoolService.db_check_interval=0.5",
            "--GPUPoolService.reservation_ttl=3600",
        ],
    )
    admin = GPUPoolClient(svc.url, hub.admin("ops"), request_timeout=10)
    try:
        await svc.start()
        before = {}
        for user in ("sam", "sal"):
            answer = await admin.admit(user=user, groups=["students"], pools=[POOL], gpus=2)
            before[answer["id"]] = 2
        svc.kill()

        outage.down()
        await svc.start()
        await refused_503(admin.admit(user="sue", groups=[], pools=[POOL], gpus=2))
        svc.kill()
        await svc.start()  # killed and started again, still without its database
        await refused_503(admin.admit(user="sue", groups=[], pools=[POOL], gpus=2))

        outage.up()
        await async_wait_for(lambda: health_with(admin, "ok"), what="the database read back")
        assert await held(admin) == before == reserved_rows(outage.url)
        with pytest.raises(AdmissionRejected, match="no node has 2 free GPUs"):
            await admin.admit(user="sue", groups=[], pools=[POOL], gpus=2)
        svc.kill()

        await svc.start()
        assert await held(admin) == before == reserved_rows(outage.url)
        with pytest.raises(AdmissionRejected, match="no node has 2 free GPUs"):
            await admin.admit(user="sid", groups=[], pools=[POOL], gpus=2)
    finally:
        await admin.close()
        svc.stop()
