"""A place in line is kept by asking for it (``GET api/v1/admissions/ID``, as a waiting spawner
does), and only by that: a spawner that keeps asking keeps its place past ``queue_heartbeat``,
one that stops loses it; after a restart, an entry taken up from the database is not admitted
until its spawner asks again, however much room there is.

The clock is the service's, moved by the test. The truth is what the API answers: the line as
``GET api/v1/queue`` lists it (which is not asking), the held admissions, and each entry's state
once its spawner asks. A pass of the line is made to run (a kick, as a change of the cluster
gives one) and waited for after each move of the clock.
"""

from __future__ import annotations

from typing import Any

from service_kit import T0, delete_pod, start_pod
from waiting import async_wait_for

HEARTBEAT = 60.0


async def dev_pool_full(service) -> None:
    """dev-pool's 4 GPUs taken by running servers: alice's 2 and dave's 2."""
    admin = service.admin()
    for user, groups in (("alice", ["students"]), ("dave", [])):
        a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=2)
        await start_pod(service.cluster, a, f"{user}-nb")


async def in_line(admin, user: str) -> dict[str, Any]:
    return await admin.admit(user=user, groups=["students"], pools=["dev-pool"], gpus=1, queue=True)


async def waiting(admin) -> list[str]:
    """Who waits in line, in order (the queue's list: not asking for anyone's place)."""
    return [r["user"] for r in (await admin.queue())["queue"]]


async def a_pass(service) -> None:
    """Kick the line and wait for a pass that began after the clock was last moved."""
    line = service.ctx.desk.line
    before = line.loop.runs
    line.kick()
    await async_wait_for(lambda: line.loop.runs > before, what="a pass of the line", timeout=10)


async def test_a_spawner_that_keeps_asking_keeps_its_place_past_the_heartbeat(start_service, now):
    service = await start_service(queue_heartbeat=HEARTBEAT)
    admin = service.admin()
    await dev_pool_full(service)
    bob, carol = await in_line(admin, "bob"), await in_line(admin, "carol")
    # bob's spawner asks every 40 s; carol's never does
    for step in range(1, 5):
        now[0] = T0 + 40 * step
        asked = await admin.admission(bob["id"])
        assert (asked["state"], asked["position"]) == ("queued", 1), asked
        await a_pass(service)
        if step == 1:  # 40 s: both within the heartbeat
            assert await waiting(admin) == ["bob", "carol"]
        else:  # 80 s and more: carol's spawn is gone, bob's is not
            assert await waiting(admin) == ["bob"]
    assert (await admin.admission(carol["id"]))["state"] == "expired"
    # bob's spawner stops asking: 61 s after it last did, his place is gone too
    now[0] += HEARTBEAT + 1
    await a_pass(service)
    assert await waiting(admin) == []
    assert (await admin.admission(bob["id"]))["state"] == "expired"


async def test_after_a_restart_an_entry_is_admitted_only_once_its_spawner_asks_again(
    start_service, tmp_path, now
):
    db_url = f"sqlite:///{tmp_path / 'line.sqlite'}"
    service = await start_service(db_url=db_url, queue_heartbeat=HEARTBEAT)
    await dev_pool_full(service)
    bob = await in_line(service.admin(), "bob")
    await service.stop()
    await delete_pod(service.cluster, "alice-nb")  # 2 GPUs free while the service is away

    service = await start_service(db_url=db_url, queue_heartbeat=HEARTBEAT)
    admin = service.admin()
    await service.settled()  # the restarted service sees the free GPUs
    now[0] += HEARTBEAT / 2
    await a_pass(service)
    await a_pass(service)
    assert await admin.admissions() == []  # nothing held for him
    assert await waiting(admin) == ["bob"]
    # his spawner asks again: now he is admitted, at the next pass
    assert (await admin.admission(bob["id"]))["state"] == "queued"

    async def admitted() -> dict[str, Any] | None:
        got = await admin.admission(bob["id"])
        return got if got["state"] == "admitted" else None

    got = await async_wait_for(admitted, what="bob admitted once his spawner asked", timeout=10)
    assert (got["pool"], got["gpus"]) == ("dev-pool", 1)
    assert [a["user"] for a in await admin.admissions()] == ["bob"]
