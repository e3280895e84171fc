"""Budgets while servers run (issue 30), with the clock (the service's and the simulator's)
moved on instead of waited for.

The group students has 4 GPU-hours a week (``on_exhausted: stop``, warned at 75%); dave has 1
(the default: report). carol's server (2 GPUs, charged to students) and dave's (1 GPU) start at
T0. The GPU-hours are the test's own arithmetic (GPUs times the hours the clock moved); the
truth comes from outside the watch: a fresh ``GET api/v1/servers`` (what the lab reads), the
hub's record of the servers it was asked to stop, the simulated cluster's pods, the ledger.
"""

from __future__ import annotations

import pytest
from service_kit import start_pod
from test_records import sql, until

from jupyter_gpupool.service import clock
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

H, M = 3600.0, 60.0
T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC
BUDGETS = (
    "budgets:\n"
    "  - {group: students, gpu_hours: 4, window: 7d, on_exhausted: stop, warn_percent: 75}\n"
    "  - {user: dave, gpu_hours: 1, window: 7d}\n"
)


@pytest.fixture
def now(monkeypatch):
    t = [T0]
    monkeypatch.setattr(clock, "now", lambda: t[0])
    return t


async def ticks_at(db_url: str, t: float) -> None:
    """Two rounds of the samples' loop (the limits' loop) seen at the service's time ``t``."""
    pools = len(sql(db_url, "SELECT DISTINCT pool FROM usage_samples")) or 1
    await until(
        db_url,
        f"SELECT count(*) FROM usage_samples WHERE time = {t!r}",
        lambda r: r[0][0] >= 2 * pools,
        "two rounds since the clock moved",
    )


async def notice_of(client) -> dict | None:
    [row] = await client.servers()
    return row["notice"]


async def test_a_budget_spent_mid_session_warns_then_stops_after_the_grace_even_across_a_restart(
    db_url, start_service, pools_dir, now
):
    quotas = pools_dir / "quotas.yaml"
    quotas.write_text(quotas.read_text() + BUDGETS)
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        settings = {"db_url": db_url, "history_interval": 0.2, "budget_grace": "10m"}
        service = await start_service(cluster, **settings)
        admin = service.admin()
        carol, dave = service.user("carol", ["students"]), service.user("dave")

        async def stop(user: str, server: str) -> int:
            cluster.store.delete("pods", "default", f"{user}-nb")
            return 202

        service.hub.on_stop = stop
        c = await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=2)
        d = await admin.admit(user="dave", pools=["dev-pool"], gpus=1)
        assert c["charged"] == "group:students"
        await start_pod(cluster, c, "carol-nb")
        await start_pod(cluster, d, "dave-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 2, "sessions")

        now[0] = T0 + H  # students: 2 of 4 (50%); dave: 1 of 1, spent, but only reported
        await ticks_at(db_url, now[0])
        assert await notice_of(carol) is None
        assert await notice_of(dave) == {
            "kind": "budget",
            "words": "your budget of 1 GPU-hours per 7 days is spent (1 GPU-hours used); no new "
            "server with GPUs starts until hours come back",
            "deadline": None,
            "action": "report",
        }

        now[0] = T0 + 1.5 * H  # 3 of 4: 75%, warned; at 2 an hour it runs out at T0 + 2h
        await ticks_at(db_url, now[0])
        assert await notice_of(carol) == {
            "kind": "budget",
            "words": "the budget of your group students of 4 GPU-hours per 7 days is 75% spent; "
            "at this rate it runs out at 2027-01-15 10:00 UTC, and this server is stopped 10m "
            "after that",
            "deadline": T0 + 2 * H,
            "action": "report",
        }

        now[0] = T0 + 2 * H  # spent: warned, stopped 10 minutes later
        await ticks_at(db_url, now[0])
        assert await notice_of(carol) == {
            "kind": "budget",
            "words": "the budget of your group students of 4 GPU-hours per 7 days is spent "
            "(4 GPU-hours used): this server stops at 2027-01-15 10:10 UTC",
            "deadline": T0 + 2 * H + 10 * M,
            "action": "stop",
        }
        now[0] = T0 + 2 * H + 9 * M
        await ticks_at(db_url, now[0])
        assert service.hub.stopped == []

        # a restart forgets the warning: the grace starts again, no stop comes unwarned
        await service.stop()
        now[0] = T0 + 2 * H + 10 * M
        service = await start_service(cluster, **settings)
        carol = service.user("carol", ["students"])
        await ticks_at(db_url, now[0])
        assert service.hub.stopped == []
        assert (await notice_of(carol))["deadline"] == T0 + 2 * H + 20 * M

        now[0] = T0 + 2 * H + 20 * M
        ended = await until(
            db_url,
            'SELECT "user", ended FROM server_sessions WHERE ended IS NOT NULL',
            lambda r: len(r) == 1,
            "carol's session to end",
        )
        assert ended == [("carol", "over budget")]
        assert [u for u, _ in service.hub.stopped] == ["carol"]
        assert cluster.pod("default", "carol-nb") is None
        await ticks_at(db_url, now[0])
        assert cluster.pod("default", "dave-nb") is not None  # report: runs on
