"""One user cannot keep others out of the line (issue 36): a user's places in line are capped
(``max_queued_per_user``), and an admission from the line whose server never starts goes back to
the end of the line instead of keeping its place at the head.

The truth is what the API answers alice and bob (their 202s, 429s and places), the line as
``GET api/v1/queue`` lists it, and the database's rows read through the test's own engine; the
service's clock is moved by the test (``now``) past a reservation's expiry.
"""

from __future__ import annotations

from typing import Any

import pytest
from service_kit import T0, delete_pod, start_pod
from sqlalchemy import create_engine, text
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError

TTL = 120.0


async def fill_dev_pool(service, sizes=(2, 2)) -> list[str]:
    """dev-pool's 4 GPUs taken by running servers (erin, frank...); their pod names."""
    admin = service.admin()
    names = []
    for user, gpus in zip(("erin", "frank", "gina", "hal"), sizes, strict=False):
        a = await admin.admit(user=user, groups=[], pools=["dev-pool"], gpus=gpus)
        await start_pod(service.cluster, a, f"{user}-nb")
        names.append(f"{user}-nb")
    return names


async def wait_in_line(admin, user: str, server: str, gpus: int = 1) -> Any:
    return await admin.request(
        "POST",
        "api/v1/admissions",
        json_body={
            "user": user,
            "groups": [],
            "pools": ["dev-pool"],
            "gpus": gpus,
            "server": server,
            "queue": True,
        },
    )


def queue_rows(db_url: str) -> list[tuple[str, str, int, str]]:
    """The database's queue entries: (id, user, seq, state), in order of arrival."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as c:
            rows = c.execute(text('SELECT id, "user", seq, state FROM queue_entries ORDER BY seq'))
            return [tuple(r) for r in rows]
    finally:
        engine.dispose()


async def test_a_user_holds_at_most_max_queued_per_user_places_and_the_next_is_refused(
    start_service, db_url
):
    service = await start_service(db_url=db_url)  # the default cap
    admin = service.admin()
    await fill_dev_pool(service)
    mine = []
    for i in range(4):
        answer = await wait_in_line(admin, "alice", f"gpu{i}")
        assert answer.code == 202, answer.json()
        mine.append(answer.json()["id"])
    with pytest.raises(GPUPoolError) as refused:
        await wait_in_line(admin, "alice", "gpu4")
    assert refused.value.status == 429
    body = refused.value.body
    assert body["max_queued_per_user"] == 4
    assert [p["id"] for p in body["places"]] == mine
    assert [p["server"] for p in body["places"]] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert refused.value.message == (
        "alice already waits in line with 4 requests (servers 'gpu0', 'gpu1', 'gpu2', "
        "'gpu3'), the most one user may (max_queued_per_user = 4): this one was not put in "
        "line. Wait until one of them is admitted, or take one out of the line, and ask again."
    )
    # nothing is kept of the refused request: the line and the database hold alice's four
    line = await admin.queue()
    assert [(r["user"], r["server"]) for r in line["queue"]] == [
        ("alice", f"gpu{i}") for i in range(4)
    ]
    rows = queue_rows(db_url)
    assert [(r[0], r[1], r[3]) for r in rows] == [(i, "alice", "queued") for i in mine]
    # another user is not held back by alice's cap
    bob = await wait_in_line(admin, "bob", "")
    assert (bob.code, bob.json()["position"]) == (202, 5)
    # alice leaves the line with one: she may wait with another
    assert await admin.release(mine[0])
    again = await wait_in_line(admin, "alice", "gpu4")
    assert again.code == 202 and again.json()["position"] == 5  # behind bob


async def test_the_cap_is_a_setting_and_a_request_that_fits_now_is_admitted_at_the_cap(
    start_service,
):
    service = await start_service(max_queued_per_user=1)
    admin = service.admin()
    await fill_dev_pool(service)
    assert (await wait_in_line(admin, "alice", "a")).code == 202
    with pytest.raises(GPUPoolError) as refused:
        await wait_in_line(admin, "alice", "b")
    assert refused.value.status == 429
    assert "(max_queued_per_user = 1)" in refused.value.message
    # the cap counts places in line only: a request a pool can take now is admitted
    now = await admin.admit(user="alice", groups=[], pools=["compute-pool"], gpus=0, queue=True)
    assert now["pool"] == "compute-pool" and not now.get("queued")


async def test_an_admission_from_the_line_whose_server_never_starts_goes_behind_bob(
    start_service, db_url, now
):
    """alice's spawn is admitted from the line and never makes its pod: when its reservation
    expires, her request goes to the end of the line, behind bob, and the GPUs go to bob."""
    service = await start_service(db_url=db_url, reservation_ttl=TTL, queue_heartbeat=1000.0)
    admin = service.admin()
    pods = await fill_dev_pool(service, sizes=(1, 2, 1))
    alice = (await wait_in_line(admin, "alice", "a")).json()
    bob = (await wait_in_line(admin, "bob", "b")).json()
    assert (alice["position"], bob["position"]) == (1, 2)

    async def state(aid: str, wanted: str) -> dict[str, Any] | None:
        got = await admin.admission(aid)
        return got if got["state"] == wanted else None

    await delete_pod(service.cluster, pods[0])  # 1 GPU comes free: alice's, first in line
    await async_wait_for(lambda: state(alice["id"], "admitted"), what="alice admitted")
    assert (await admin.admission(bob["id"]))["position"] == 1
    # no pod comes for alice's admission; its reservation expires
    now[0] = T0 + TTL + 1
    await async_wait_for(lambda: state(alice["id"], "queued"), what="alice back in line")
    bob_in = await async_wait_for(lambda: state(bob["id"], "admitted"), what="bob admitted")
    assert (bob_in["pool"], bob_in["gpus"]) == ("dev-pool", 1)
    back = await admin.admission(alice["id"])
    assert back["message"].startswith("waiting for 1 GPU: position 1 in line for dev-pool")
    assert "admitted from the line, but no server started within 120 s" in back["reasons"]
    # the database keeps her place, as a new entry's: after bob's
    rows = {r[0]: r for r in queue_rows(db_url)}
    assert rows[alice["id"]][3] == "queued"
    assert rows[alice["id"]][2] > rows[bob["id"]][2]
    assert rows[bob["id"]][3] == "admitted"
    # bob's server starts; alice's request is admitted again when GPUs come free
    await start_pod(service.cluster, bob_in, "bob-nb")
    await delete_pod(service.cluster, pods[1])
    again = await async_wait_for(lambda: state(alice["id"], "admitted"), what="alice again")
    assert again["id"] == alice["id"] and again["gpus"] == 1


async def test_an_unused_admission_leaves_the_line_when_its_user_holds_the_most_places(
    start_service, now
):
    """With her other requests already waiting (as many as a user may), alice's unused
    admission is not put back: it leaves the line, and her spawner is told why."""
    service = await start_service(
        reservation_ttl=TTL, queue_heartbeat=1000.0, max_queued_per_user=2
    )
    admin = service.admin()
    pods = await fill_dev_pool(service, sizes=(1, 2, 1))
    first = (await wait_in_line(admin, "alice", "a")).json()
    bob = (await wait_in_line(admin, "bob", "b")).json()
    await delete_pod(service.cluster, pods[0])

    async def state(aid: str, wanted: str) -> dict[str, Any] | None:
        got = await admin.admission(aid)
        return got if got["state"] == wanted else None

    await async_wait_for(lambda: state(first["id"], "admitted"), what="alice admitted")
    # alice waits with two more (her first is admitted, no longer in line)
    for server in ("c", "d"):
        assert (await wait_in_line(admin, "alice", server)).code == 202
    now[0] = T0 + TTL + 1
    gone = await async_wait_for(lambda: state(first["id"], "expired"), what="alice's left")
    assert gone["message"] == (
        "admitted from the line, but no server started within 120 s; not put back in line: "
        "alice already waits with 2 other requests, the most one user may "
        "(max_queued_per_user = 2)"
    )
    await async_wait_for(lambda: state(bob["id"], "admitted"), what="bob admitted")
    line = await admin.queue()
    assert [(r["user"], r["server"]) for r in line["queue"]] == [("alice", "c"), ("alice", "d")]


async def test_places_follow_the_quota_a_server_uses_while_requests_wait(start_service):
    """carol (students: 2 GPUs guaranteed in dev-pool) waits within quota, ahead of bob who
    came first but would borrow; then sam, also a student, starts a server there: carol's 2
    GPUs would now pass the guarantee, and she stands behind bob. The places the API gives
    follow what runs, without anyone joining or leaving the line."""
    service = await start_service()
    admin = service.admin()
    pods = await fill_dev_pool(service, sizes=(1, 1, 2))
    bob = (await wait_in_line(admin, "bob", "")).json()
    carol = await admin.admit(
        user="carol", groups=["students"], pools=["dev-pool"], gpus=2, queue=True
    )
    assert (carol["position"], carol["within_quota"]) == (1, True)
    assert (await admin.admission(bob["id"]))["position"] == 2
    # a GPU comes free: neither fits it (carol needs 2; bob may not borrow what carol waits for)
    await delete_pod(service.cluster, pods[0])
    sam = await admin.admit(user="sam", groups=["students"], pools=["dev-pool"], gpus=1)
    await start_pod(service.cluster, sam, "sam-nb")

    async def places() -> tuple[int, int] | None:
        got = (
            (await admin.admission(bob["id"]))["position"],
            (await admin.admission(carol["id"]))["position"],
        )
        return got if got == (1, 2) else None

    await async_wait_for(places, what="bob ahead of carol once sam's server runs")
    assert (await admin.admission(carol["id"]))["within_quota"] is False
