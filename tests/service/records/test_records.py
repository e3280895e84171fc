"""The service's memory (issue 16) on SQLite and on a real PostgreSQL server: usage samples and
the history API, the ledger of server sessions (begun, stopped, reclaimed, failed; across a
restart), the change log, and a database that is down.

The truth is read from the database with the test's own SQL connection and compared with the
pods the test started and stopped itself.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from service_kit import delete_pod, start_pod
from sqlalchemy import create_engine, text
from sqlrows import sql
from test_gpuctl_on_the_same_cluster import gpupool
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.service import clock
from jupyter_gpupool.service.app import StartupError
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec
from jupyter_gpupool.sim.objects.resources import RESOURCES

FAST = {"history_interval": 0.2}


def sessions(url: str) -> list[dict[str, Any]]:
    cols = [
        "pod",
        "user",
        "charged",
        "pool",
        "gpu_type",
        "gpus",
        "over_quota",
        "started",
        "stopped",
        "ended",
    ]
    # "user" is a word of PostgreSQL's own (the current user) unless quoted
    query = ", ".join(f'"{c}"' for c in cols)
    return [
        dict(zip(cols, r, strict=True))
        for r in sql(url, f"SELECT {query} FROM server_sessions ORDER BY started, pod")
    ]


async def until(url: str, query: str, want: Any, what: str, timeout: float = 15) -> list[tuple]:
    async def check() -> list[tuple] | None:
        got = sql(url, query)
        return got if want(got) else None

    return await async_wait_for(check, what=what, timeout=timeout, interval=0.1)


async def test_usage_history_is_kept_in_the_database_across_a_restart(db_url, start_service, hub):
    service = await start_service(db_url=db_url, **FAST)
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["dev-pool"], gpus=2)
    await start_pod(service.cluster, a, "alice-nb")
    await until(
        db_url,
        "SELECT gpu_used, gpu_total FROM usage_samples WHERE pool = 'dev-pool'",
        lambda rows: (2.0, 4.0) in rows,
        "a dev-pool sample with 2 of 4 GPUs used",
    )
    before = time.time()
    await service.stop()
    again = await start_service(db_url=db_url, **FAST)
    history = await again.admin().usage_history("24h", pool="dev-pool")
    assert list(history["pools"]) == ["dev-pool"]
    earlier = [p for p in history["pools"]["dev-pool"] if p[0] < before]
    assert earlier and [2.0, 4.0] in [p[1:3] for p in earlier]  # samples from before the restart
    assert history["columns"] == [
        "time",
        "gpu_used",
        "gpu_total",
        "gpu_over_quota",
        "gpu_pending",
        "gpu_busy",
    ]
    with pytest.raises(GPUPoolError) as bad:
        await again.admin().usage_history("1y")
    assert bad.value.status == 400 and "range must be one of 6h, 24h, 7d, 30d" in str(bad.value)


async def test_a_server_session_is_recorded_from_its_start_to_its_stop(db_url, start_service):
    service = await start_service(db_url=db_url, **FAST)
    cluster = service.cluster
    a = await service.admin().admit(user="dave", pools=["training-pool"], gpus=4)
    assert a["over_quota"]  # dave has no guarantee there: he borrows
    begun = time.time()
    pod = await start_pod(cluster, a, "dave-nb")
    [open_] = await until(
        db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 1, "dave's session"
    )
    await delete_pod(cluster, "dave-nb")
    [s] = [
        dict(zip(("pod", "stopped", "ended"), r, strict=True))
        for r in await until(
            db_url,
            "SELECT pod, stopped, ended FROM server_sessions",
            lambda r: r and r[0][2] is not None,
            "dave's session to end",
        )
    ]
    assert s["pod"] == "dave-nb" and s["ended"] == "stopped"
    assert begun - 5 <= s["stopped"] <= time.time()
    [row] = sessions(db_url)
    assert row["user"] == "dave" and row["pool"] == "training-pool" and row["gpus"] == 4
    assert row["gpu_type"] == "A100-80G" and row["over_quota"] and row["charged"] == "user:dave"
    assert pod["metadata"]["name"] == open_[0]


async def test_reclaimed_and_failed_sessions_say_so(db_url, start_service):
    service = await start_service(db_url=db_url, **FAST)
    cluster, admin = service.cluster, service.admin()
    d = await admin.admit(user="dave", pools=["training-pool"], gpus=4)
    c = await admin.admit(user="carol", groups=["ml-ops"], pools=["training-pool"], gpus=4)
    await start_pod(cluster, d, "dave-nb")
    await start_pod(cluster, c, "carol-nb")
    b = await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=8)
    await start_pod(cluster, b, "bob-nb")

    async def stop(user: str, server: str) -> int:
        cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    service.hub.on_stop = stop
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=4)
    [victim] = a["reclaimed"]
    # bob's pod fails
    old = cluster.pod("default", "bob-nb")
    new = copy.deepcopy(old)
    new["status"]["phase"] = "Failed"
    cluster.store.write_internal(RESOURCES["pods"], ("default", "bob-nb"), old, new)
    rows = await until(
        db_url,
        'SELECT "user", ended FROM server_sessions WHERE ended IS NOT NULL ORDER BY "user"',
        lambda r: len(r) == 2,
        "two sessions to end",
    )
    assert rows == sorted([("bob", "failed"), (victim["user"], "reclaimed")])


async def test_a_restart_keeps_running_sessions_once_and_closes_those_that_ended_meanwhile(
    db_url, start_service
):
    service = await start_service(db_url=db_url, **FAST)
    cluster, admin = service.cluster, service.admin()
    for user in ("dave", "erin"):
        a = await admin.admit(user=user, groups=["students"], pools=["dev-pool"], gpus=1)
        await start_pod(cluster, a, f"{user}-nb")
    await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 2, "2 sessions")
    await async_wait_for(  # dave and erin seen running at least once after they began
        lambda: all(s["stopped"] is None for s in sessions(db_url)), what="open sessions"
    )
    await service.stop()
    last_seen = dict(sql(db_url, "SELECT pod, last_seen FROM server_sessions"))
    await delete_pod(cluster, "erin-nb")  # erin stops while the service is away
    await start_service(db_url=db_url, **FAST)
    rows = await until(
        db_url,
        "SELECT pod, stopped, ended FROM server_sessions ORDER BY pod",
        lambda r: r[1][2] is not None,
        "erin's session to be closed",
    )
    assert rows == [("dave-nb", None, None), ("erin-nb", last_seen["erin-nb"], "stopped")]


async def test_the_change_log_survives_a_restart(db_url, start_service):
    service = await start_service(db_url=db_url)
    await service.admin().label_node("node-6", {"runwhere.ai/pool": "dev-pool"})
    said = service.ctx.changes.latest(1)[0].what
    await service.stop()
    again = await start_service(db_url=db_url)
    assert [c.what for c in again.ctx.changes.latest(5)] == [said]
    assert sql(db_url, "SELECT what FROM changes") == [(said,)]


async def test_without_its_database_the_service_admits_nothing_and_says_what_is_missing(
    start_service,
):
    # a PostgreSQL URL where nothing listens: the service starts, but it cannot know what it
    # promised before (tests/service/records/test_db_outage.py has the database come back)
    service = await start_service(db_url="postgresql+psycopg://gpupool@127.0.0.1:9/gpupool")
    with pytest.raises(GPUPoolError) as refused:
        await service.admin().admit(
            user="alice", groups=["ml-research"], pools=["dev-pool"], gpus=1
        )
    assert refused.value.status == 503
    assert "127.0.0.1:9" in str(refused.value) and "it admits nothing" in str(refused.value)
    assert await service.admin().admissions() == []
    with pytest.raises(GPUPoolError) as missing:
        await service.admin().usage_history()
    assert missing.value.status == 503
    said = str(missing.value)
    assert "usage history is not available: cannot use the database" in said
    assert "127.0.0.1:9" in said and "refused" in said


@pytest.mark.parametrize("revision", ["9999"])
async def test_a_database_of_a_newer_gpupool_stops_the_service(db_url, start_service, revision):
    service = await start_service(db_url=db_url)
    await service.stop()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE alembic_version SET version_num = '{revision}'"))
    engine.dispose()
    with pytest.raises(StartupError, match="newer than this gpupool knows"):
        await start_service(db_url=db_url)


async def test_gpu_hours_per_user_group_and_pool_with_time_moved_on(
    db_url, start_service, monkeypatch
):
    """alice (ml-research, within quota) runs 2 GPUs for 3 h, dave (no quota there: over)
    4 GPUs for 2 h; the clock (the simulator's and the service's) is moved, not waited for."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        admin = service.admin()
        a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
        d = await admin.admit(user="dave", pools=["training-pool"], gpus=4)
        assert not a["over_quota"] and d["over_quota"]
        await start_pod(cluster, a, "alice-nb")
        await start_pod(cluster, d, "dave-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 2, "sessions")
        now[0] += 2 * 3600
        await delete_pod(cluster, "dave-nb")
        await until(
            db_url,
            "SELECT stopped FROM server_sessions WHERE pod = 'dave-nb'",
            lambda r: r == [(now[0],)],
            "dave's session to end now",
        )
        now[0] += 3600
        by_user = await admin.gpu_hours(by="user", since="24h")
        assert [
            (r["subject"], r["gpu_hours"], r["within_quota"], r["over_quota"])
            for r in by_user["rows"]
        ] == [("dave", 8.0, 0.0, 8.0), ("alice", 6.0, 6.0, 0.0)]
        assert by_user["total"] == 14.0
        by_group = await admin.gpu_hours(by="group", since="24h")
        assert [(r["subject"], r["gpu_hours"]) for r in by_group["rows"]] == [
            ("(no group)", 8.0),
            ("ml-research", 6.0),
        ]
        by_pool = await admin.gpu_hours(by="pool", since="1h")  # the last hour: alice only
        assert [(r["subject"], r["gpu_hours"]) for r in by_pool["rows"]] == [("training-pool", 2.0)]
        # a user sees their own hours only
        own = await service.user("alice", ["ml-research"]).gpu_hours(by="pool", since="24h")
        assert [(r["subject"], r["gpu_hours"]) for r in own["rows"]] == [("training-pool", 6.0)]
        # and the CLI prints the same as CSV
        code, out, err = await gpupool(
            service,
            service.hub.admin(),
            "get",
            "gpu-hours",
            "--by",
            "group",
            "--since",
            "24h",
            "-o",
            "csv",
        )
        assert code == 0, err
        assert out.splitlines() == [
            "subject,gpu_hours,within_quota,over_quota,sessions",
            "(no group),8.0,0.0,8.0,1",
            "ml-research,6.0,6.0,0.0,1",
        ]
        with pytest.raises(GPUPoolError, match="since must be a number of days or hours"):
            await admin.gpu_hours(since="last week")
