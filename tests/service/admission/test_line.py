"""The fair queue in the service (issue 18): requests that ask to wait are put in line when no
pool can take them, get their place, and are admitted as GPUs come free, in order.

The truth is the simulated cluster's own pods (what runs, what is deleted) and the test's
expectations of the issue's scenario: dev-pool has one node of 4 GPUs and no quota.
"""

from __future__ import annotations

from typing import Any

import pytest
from service_kit import delete_pod, start_pod
from sqlalchemy import create_engine, text
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError


async def ask(admin, user: str, gpus: int, queue: bool = True, pools=("dev-pool",)) -> Any:
    return await admin.request(
        "POST",
        "api/v1/admissions",
        json_body={
            "user": user,
            "groups": ["students"],
            "pools": list(pools),
            "gpus": gpus,
            "queue": queue,
        },
    )


async def state_of(admin, admission_id: str) -> dict[str, Any]:
    return await admin.admission(admission_id)


async def test_waiting_in_line_then_admitted_in_order_when_gpus_come_free(start_service):
    service = await start_service()
    admin, cluster = service.admin(), service.cluster
    # dev-pool's 4 GPUs are taken: alice's 2 (students' guarantee) and dave's 2 (borrowed)
    alice = await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    await start_pod(cluster, alice, "alice-nb")
    dave = await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)
    await start_pod(cluster, dave, "dave-nb")

    bob = await ask(admin, "bob", 2)
    assert bob.code == 202
    assert bob.json()["position"] == 1 and bob.json()["pools"] == ["dev-pool"]
    # no history of dev-pool yet in this service's ledger: said so, not guessed
    assert (
        bob.json()["message"]
        == "waiting for 2 GPUs: position 1 in line for dev-pool · no estimate yet"
    )
    carol = await ask(admin, "carol", 1)
    assert (carol.code, carol.json()["position"]) == (202, 2)
    # without asking to wait: today's fast refusal
    with pytest.raises(GPUPoolError) as refused:
        await ask(admin, "erin", 1, queue=False)
    assert refused.value.status == 409
    # the client's own way in: a queued answer, and the line as the client reads it
    erin = await admin.admit(
        user="erin", groups=["students"], pools=["dev-pool"], gpus=1, queue=True
    )
    assert (erin["queued"], erin["state"], erin["position"]) == (True, "queued", 3)
    assert await admin.release(erin["id"])  # leaves the line
    assert (await state_of(admin, erin["id"]))["state"] == "cancelled"
    line = await admin.queue()
    assert [(r["user"], r["position"]) for r in line["queue"]] == [("bob", 1), ("carol", 2)]
    assert line["pools"] == {"dev-pool": 2}
    bob_id, carol_id = bob.json()["id"], carol.json()["id"]
    assert (await state_of(admin, bob_id))["state"] == "queued"

    async def admitted(aid: str) -> dict[str, Any] | None:
        got = await state_of(admin, aid)
        return got if got["state"] == "admitted" else None

    await delete_pod(cluster, "alice-nb")  # 2 GPUs come free: bob's, first in line
    bob_in = await async_wait_for(lambda: admitted(bob_id), what="bob admitted", timeout=10)
    assert (bob_in["pool"], bob_in["node"], bob_in["gpus"]) == ("dev-pool", "gpu-node-5", 2)
    # bob's GPUs are held for him: carol still waits, now first
    assert (await state_of(admin, carol_id))["position"] == 1
    await delete_pod(cluster, "dave-nb")
    carol_in = await async_wait_for(lambda: admitted(carol_id), what="carol admitted", timeout=10)
    assert carol_in["gpus"] == 1
    assert (await admin.request("GET", "api/v1/queue")).json()["queue"] == []


async def test_a_request_no_pool_could_ever_take_is_not_queued(start_service):
    service = await start_service()
    admin = service.admin()
    with pytest.raises(GPUPoolError) as refused:
        await ask(admin, "bob", 8)
    assert refused.value.status == 409
    assert "its largest node has 4 GPUs, fewer than the 8 GPUs asked for" in str(refused.value)


async def test_cancelled_and_abandoned_requests_leave_the_line_and_are_never_admitted(
    start_service,
):
    service = await start_service(queue_heartbeat=1.0)
    admin, cluster = service.admin(), service.cluster
    for user, groups in (("alice", ["students"]), ("dave", [])):
        a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=2)
        await start_pod(cluster, a, f"{user}-nb")
    bob = (await ask(admin, "bob", 1)).json()
    carol = (await ask(admin, "carol", 1)).json()
    cancelled = await admin.request("DELETE", f"api/v1/admissions/{bob['id']}")
    assert cancelled.json()["state"] == "cancelled"
    # nobody asks for carol's request (the queue's list does not count): her spawn is gone
    await async_wait_for(lambda: _line_empty(admin), what="carol's entry dropped", timeout=15)
    assert (await state_of(admin, carol["id"]))["state"] == "expired"
    await delete_pod(cluster, "alice-nb")
    await delete_pod(cluster, "dave-nb")
    held = (await admin.request("GET", "api/v1/admissions")).json()["admissions"]
    assert held == []  # neither was admitted
    assert (await state_of(admin, bob["id"]))["state"] == "cancelled"


async def _line_empty(admin) -> bool:
    return (await admin.request("GET", "api/v1/queue")).json()["queue"] == []


async def test_the_line_survives_a_restart_and_entries_whose_spawn_is_gone_are_never_admitted(
    start_service, db_url
):
    """Bob's and carol's requests wait when the service stops; after the restart both are in
    line again in their order, but only bob's spawner asks: when GPUs come free bob is admitted
    and carol's entry is dropped, though her GPU was free too. Truth: the held admissions and
    the queue as the API lists them, and the database's rows through the test's own engine."""
    service = await start_service(db_url=db_url, queue_heartbeat=3.0)
    admin, cluster = service.admin(), service.cluster
    for user, groups in (("alice", ["students"]), ("dave", [])):
        a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=2)
        await start_pod(cluster, a, f"{user}-nb")
    bob = await admin.admit(user="bob", groups=["students"], pools=["dev-pool"], gpus=2, queue=True)
    carol = await admin.admit(
        user="carol", groups=["students"], pools=["dev-pool"], gpus=1, queue=True
    )
    await service.stop()

    service = await start_service(db_url=db_url, queue_heartbeat=3.0)
    admin = service.admin()
    line = await admin.queue()
    assert [(r["user"], r["position"], r["gpus"]) for r in line["queue"]] == [
        ("bob", 1, 2),
        ("carol", 2, 1),
    ]
    assert (await state_of(admin, bob["id"]))["position"] == 1  # bob's spawner asks
    await delete_pod(cluster, "alice-nb")
    await delete_pod(cluster, "dave-nb")  # 4 GPUs free: room for both

    async def bob_admitted() -> dict[str, Any] | None:
        got = await state_of(admin, bob["id"])  # asking, as his spawner does
        return got if got["state"] == "admitted" else None

    await async_wait_for(bob_admitted, what="bob admitted after the restart", timeout=10)
    await async_wait_for(lambda: _line_empty(admin), what="carol's entry dropped", timeout=15)
    held = (await admin.request("GET", "api/v1/admissions")).json()["admissions"]
    assert [h["user"] for h in held] == ["bob"]
    service.ctx.records.db.flush()
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            states = dict(conn.execute(text("SELECT id, state FROM queue_entries")).all())
    finally:
        engine.dispose()
    assert states == {bob["id"]: "admitted", carol["id"]: "expired"}
