"""Nothing promised leaves in an answer before it is durable (issue 27), on SQLite and on a real
PostgreSQL server: a 201's reservation and a 202's place are in the database when they are
answered; a write the database does not take, or takes too long for, drops the reservation or the
place and answers 503; the reservations come back at start, less those whose pods exist.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import pytest
from service_kit import start_pod
from sqlalchemy import create_engine, text

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.db.store import DatabaseError

FAST = {"history_interval": 0.2}


def sql(url: str, query: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(query))]
    finally:
        engine.dispose()


async def full_dev_pool(admin: Any) -> None:
    """dev-pool's 4 GPUs held: alice's 2 (students' guarantee) and dave's 2 (borrowed)."""
    await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)


async def test_answers_come_once_committed_and_reservations_come_back_at_start(
    db_url, start_service
):
    """A 201's reservation (every field) and a 202's entry are in the database when they are
    answered, with the writer's batch far longer than the test; after a restart the
    reservation holds its GPUs again, and the one whose pod was made meanwhile is dropped."""
    service = await start_service(db_url=db_url, **FAST)
    service.ctx.records.db.batch_seconds = 60  # plain writes would wait a minute
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    b = await admin.admit(user="bob", groups=["students"], pools=["dev-pool"], gpus=1)
    rows = sql(
        db_url,
        'SELECT admission_id, pool, node, gpus, "user", charged, over_quota FROM reservations '
        "ORDER BY gpus",
    )
    assert [r[0] for r in rows] == [b["id"], a["id"]]
    assert rows[1][1:] == ("dev-pool", a["node"], 2, "alice", a["charged"], a["over_quota"])
    c = await admin.admit(user="carol", groups=[], pools=["dev-pool"], gpus=4, queue=True)
    assert c["queued"]
    assert sql(db_url, "SELECT id, state FROM queue_entries") == [(c["id"], "queued")]
    await service.stop()
    await start_pod(service.cluster, b, "bob-nb", bound=True)  # while the service is down
    again = await start_service(db_url=db_url, **FAST)
    held = {r["id"]: r for r in await again.admin().admissions()}
    assert set(held) == {a["id"]}, "alice's reservation is back; bob's pod is seen"
    assert held[a["id"]]["gpus"] == 2 and held[a["id"]]["node"] == a["node"]
    line = (await again.admin().queue())["queue"]
    assert [r["id"] for r in line] == [c["id"]]
    # alice's 2 GPUs are still held: dev-pool (4 GPUs) has 1 left after bob's pod
    with pytest.raises(GPUPoolError) as refused:
        await again.admin().admit(user="erin", groups=[], pools=["dev-pool"], gpus=2)
    assert refused.value.status == 409


@pytest.mark.parametrize("how", ["fails", "late"])
async def test_an_admission_the_database_does_not_take_is_dropped_and_answered_503(
    how, db_url, start_service
):
    """The reservation's (or the entry's) write fails, or does not commit within
    durable_timeout: the answer is a 503 saying to try again, and nothing is held or in line."""
    service = await start_service(db_url=db_url, durable_timeout=0.5, **FAST)
    db, admin = service.ctx.records.db, service.admin()

    def broken(*args: Any, **kw: Any) -> Future[None]:
        future: Future[None] = Future()
        if how == "fails":
            future.set_exception(DatabaseError("the database did not take the write: disk full"))
        return future

    db.reservation_add = broken
    started = time.monotonic()
    with pytest.raises(GPUPoolError) as unrecorded:
        await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    assert unrecorded.value.status == 503
    assert "could not be recorded" in unrecorded.value.message
    assert "try again" in unrecorded.value.message
    if how == "late":
        assert time.monotonic() - started >= 0.5
        assert "within 0.5 s" in unrecorded.value.message
    assert await admin.admissions() == []
    assert service.ctx.state.reservations.pool_nodes("dev-pool") == {}

    del db.reservation_add  # reservations are written again; entries are not
    await full_dev_pool(admin)
    db.queue_add = broken
    with pytest.raises(GPUPoolError) as unrecorded:
        await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=1, queue=True)
    assert unrecorded.value.status == 503
    assert (await admin.queue())["queue"] == []
