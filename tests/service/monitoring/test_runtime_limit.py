"""The runtime limit in the service (issue 30), with the clock (the service's and the
simulator's) moved on instead of waited for.

dev-pool's file is given ``max-runtime: {after: 2h, warn: 10m, exempt: {groups: [long-jobs]}}``.
Two servers start at T0: carol's, and erin's (her group is exempt). The truth comes from
outside the watch: the notices in a fresh ``GET api/v1/servers`` (what the user's lab reads),
the hub's record of the servers it was asked to stop, the simulated cluster's pods, and the
ledger in the database.
"""

from __future__ import annotations

import re

import pytest
from service_kit import start_pod
from test_pages import Browser
from test_records import sql, until

from jupyter_gpupool.service import clock
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

H, M = 3600.0, 60.0
T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC


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


async def test_a_server_past_its_runtime_is_warned_then_stopped_and_an_exempt_one_runs_on(
    db_url, start_service, pools_dir, now
):
    dev = pools_dir / "dev-pool.yaml"
    dev.write_text(
        dev.read_text() + "max-runtime: {after: 2h, warn: 10m, exempt: {groups: [long-jobs]}}\n"
    )
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=0.2)
        admin = service.admin()
        carol, erin = service.user("carol", ["students"]), service.user("erin", ["long-jobs"])

        async def stop(user: str, server: str) -> int:
            cluster.store.delete("pods", "default", f"{user}-nb")
            return 202

        service.hub.on_stop = stop
        for user, groups in (("carol", ["students"]), ("erin", ["long-jobs"])):
            a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=1)
            await start_pod(cluster, a, f"{user}-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 2, "sessions")

        now[0] = T0 + 1 * H + 49 * M  # before the warning: nothing
        await ticks_at(db_url, now[0])
        [row] = await carol.servers()
        assert (row["notice"], row["notices"]) == (None, [])

        now[0] = T0 + 1 * H + 50 * M  # the warning: told when it stops, not stopped
        await ticks_at(db_url, now[0])
        [row] = await carol.servers()
        assert row["notice"] == {
            "kind": "runtime",
            "words": "this server has run for 1h50m; servers here may run 2h: it stops at "
            "2027-01-15 10:00 UTC",
            "deadline": T0 + 2 * H,
            "action": "stop",
        }
        assert row["notices"] == [row["notice"]]
        # My GPUs shows it, in the warning's colour
        page = Browser(service, service.hub.user("carol", ["students"]))
        try:
            status, html, _ = await page.get("")
        finally:
            page.http.close()
        assert status == 200
        notes = re.findall(r'<div class="gpupool-notice small([^"]*)"[^>]*>(.*?)</div>', html)
        [shown] = [n for n in notes if n[1]]  # (the row template's is empty)
        assert shown == (" gpupool-notice-stop", row["notice"]["words"])
        assert row["idle"] is None  # the idle field is as it was
        [erins] = await erin.servers()
        assert erins["notice"] is None  # exempt: never warned
        assert service.hub.stopped == []

        now[0] = T0 + 2 * H  # due
        ended = await until(
            db_url,
            "SELECT pod, ended FROM server_sessions WHERE ended IS NOT NULL",
            lambda r: len(r) == 1,
            "carol's session to end",
        )
        assert ended == [("carol-nb", "limit")]
        assert [u for u, _ in service.hub.stopped] == ["carol"]
        assert cluster.pod("default", "carol-nb") is None
        now[0] = T0 + 3 * H
        await ticks_at(db_url, now[0])
        assert cluster.pod("default", "erin-nb") is not None  # exempt: runs on
        assert [u for u, _ in service.hub.stopped] == ["carol"]
