"""GPU-hour budgets in the service (issue 16), on SQLite and on PostgreSQL, with the clock (the
service's and the simulator's) moved on instead of waited for.

The GPU-hours are the test's own arithmetic: GPUs it asked for times the hours it moved the
clock; a refusal's "hours come back" time is worked out from the same figures.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from service_kit import delete_pod, start_pod
from test_records import sql, until

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.service import clock
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

H = 3600.0
T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def utc(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC"
    )


def add_budgets(pools_dir: Path, text: str) -> None:
    quotas = pools_dir / "quotas.yaml"
    quotas.write_text(quotas.read_text() + "budgets:\n" + text)


def budget_of(options: dict[str, Any], subject: str) -> dict[str, Any]:
    [row] = [b for b in options["budgets"] if b["subject"] == subject]
    return row


@pytest.fixture
def now(monkeypatch):
    """The clock of the service (and of the simulator built with it), moved by the test."""
    t = [T0]
    monkeypatch.setattr(clock, "now", lambda: t[0])
    return t


async def test_a_spent_budget_refuses_new_servers_says_when_hours_come_back_and_survives_a_restart(
    db_url, start_service, pools_dir, now
):
    add_budgets(pools_dir, "  - {user: alice, gpu_hours: 10, window: 1d, pools: [training-pool]}\n")
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        alice = service.user("alice", ["ml-research"])
        assert budget_of(await alice.launch_options(), "user:alice") == {
            "subject": "user:alice",
            "gpu_hours": 10,
            "window": "1d",
            "pools": ["training-pool"],
            "spent": 0.0,
            "remaining": 10.0,
            "back_at": None,
        }
        a = await alice.admit(pools=["training-pool"], gpus=2)
        await start_pod(cluster, a, "alice-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 1, "a session")
        now[0] += 3 * H  # 2 GPUs for 3 h
        row = budget_of(await alice.launch_options(), "user:alice")
        assert (row["spent"], row["remaining"]) == (6.0, 4.0)
        now[0] += 2 * H  # 10 GPU-hours: spent
        with pytest.raises(GPUPoolError) as refused:
            await alice.admit(pools=["training-pool"], gpus=1)
        assert refused.value.status == 409
        # with her server stopped now, the session [T0, T0+5h] leaves the day at T0 + 1 day
        back = T0 + 24 * H + 60
        assert [s["reason"] for s in refused.value.skipped] == [
            "your budget of 10 GPU-hours per day in training-pool is spent (10 GPU-hours used); "
            f"hours come back from {utc(back)} if the running servers it pays for stop now"
        ]
        row = budget_of(await alice.launch_options(), "user:alice")
        assert (row["spent"], row["remaining"], row["back_at"]) == (10.0, 0.0, back)
        # the budget is for training-pool only: dev-pool takes her
        other = await alice.admit(pools=["training-pool", "dev-pool"], gpus=1)
        assert other["pool"] == "dev-pool"
        await alice.release(other["id"])
        # a server without GPUs is not refused
        assert (await alice.admit(pools=["training-pool"], gpus=0))["pool"] == "training-pool"

        await delete_pod(cluster, "alice-nb")
        await until(
            db_url,
            "SELECT stopped FROM server_sessions",
            lambda r: r == [(now[0],)],
            "alice's session to end now",
        )
        await service.stop()
        # the restarted service reads her hours back from the database
        again = await start_service(cluster, db_url=db_url, history_interval=3600)
        await again.app.ctx.records.budgets.loaded()
        alice = again.user("alice", ["ml-research"])
        with pytest.raises(GPUPoolError) as refused:
            await alice.admit(pools=["training-pool"], gpus=1)
        assert [s["reason"] for s in refused.value.skipped] == [
            "your budget of 10 GPU-hours per day in training-pool is spent (10 GPU-hours used); "
            f"hours come back from {utc(back)}"
        ]
        now[0] = back
        assert (await alice.admit(pools=["training-pool"], gpus=1))["pool"] == "training-pool"
        row = budget_of(await alice.launch_options(), "user:alice")
        assert row["remaining"] == pytest.approx(10 - 2 * (5 * H - 60) / H, abs=1e-3)


async def test_a_group_budget_counts_what_is_charged_to_the_group_and_a_new_budget_counts_the_past(
    db_url, start_service, pools_dir, now
):
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        admin = service.admin()
        # carol (students) within the group's guarantee in dev-pool: charged to the group;
        # dave, in no group, borrows as himself
        c = await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=2)
        d = await admin.admit(user="dave", pools=["dev-pool"], gpus=1)
        assert (c["charged"], d["charged"]) == ("group:students", "user:dave")
        await start_pod(cluster, c, "carol-nb")
        await start_pod(cluster, d, "dave-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 2, "sessions")
        now[0] += 2 * H
        await delete_pod(cluster, "carol-nb")  # 4 GPU-hours charged to students, closed
        # the budget comes after the hours were used: the service reads them back
        quotas = (pools_dir / "quotas.yaml").read_text()
        await admin.put_quotas(
            quotas + "budgets:\n  - {group: students, gpu_hours: 4, window: 7d}\n"
        )
        await service.app.ctx.records.budgets.loaded()
        erin = service.user("erin", ["students"])
        row = budget_of(await erin.launch_options(), "group:students")
        assert (row["spent"], row["remaining"]) == (4.0, 0.0)
        with pytest.raises(GPUPoolError) as refused:
            await erin.admit(pools=["dev-pool"], gpus=1)
        assert refused.value.skipped[0]["reason"].startswith(
            "the budget of your group students of 4 GPU-hours per 7 days is spent "
            "(4 GPU-hours used); hours come back from "
        )
        # the quotas API shows it to the admin, and to members of the group only
        [mine] = (await admin.quotas())["budgets"]
        assert (mine["subject"], mine["spent"], mine["remaining"]) == ("group:students", 4.0, 0.0)
        assert [b["subject"] for b in (await erin.quotas())["budgets"]] == ["group:students"]
        assert (await service.user("dave").quotas())["budgets"] == []
        # dave's hours are his own, not the group's
        assert (await service.user("dave").admit(pools=["dev-pool"], gpus=1))["pool"]


async def test_the_deprecated_stop_over_budget_stops_what_a_spent_budget_pays_for_after_the_grace(
    db_url, start_service, pools_dir, now
):
    add_budgets(pools_dir, "  - {group: students, gpu_hours: 4, window: 7d}\n")
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(
            cluster, db_url=db_url, history_interval=0.2, stop_over_budget=True, budget_grace="5m"
        )
        admin = service.admin()

        async def stop(user: str, server: str) -> int:
            cluster.store.delete("pods", "default", f"{user}-nb")
            return 202

        service.hub.on_stop = stop
        c = await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=2)
        d = await admin.admit(user="dave", pools=["dev-pool"], gpus=1)
        await start_pod(cluster, c, "carol-nb")
        await start_pod(cluster, d, "dave-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 2, "sessions")

        async def two_ticks_at(t: float) -> None:
            # every tick samples each pool at the service's now: two ticks seen since the move
            pools = len(sql(db_url, "SELECT DISTINCT pool FROM usage_samples"))
            await until(
                db_url,
                f"SELECT count(*) FROM usage_samples WHERE time = {t!r}",
                lambda r: r[0][0] >= 2 * pools,
                "two samples of every pool since the clock moved",
            )

        now[0] += H  # 2 of 4 GPU-hours
        await two_ticks_at(now[0])
        assert service.hub.stopped == []
        now[0] += H  # 4 of 4: spent, warned; stopped 5 minutes later (issue 30), not at once
        await two_ticks_at(now[0])
        assert service.hub.stopped == []
        now[0] += 5 * 60
        rows = await until(
            db_url,
            'SELECT "user", ended FROM server_sessions WHERE ended IS NOT NULL',
            lambda r: len(r) == 1,
            "carol's session to end",
        )
        assert rows == [("carol", "over budget")]
        assert [u for u, _ in service.hub.stopped] == ["carol"]
        await two_ticks_at(now[0])
        assert cluster.pod("default", "dave-nb") is not None  # his hours are his own
        assert [u for u, _ in service.hub.stopped] == ["carol"]  # asked once
