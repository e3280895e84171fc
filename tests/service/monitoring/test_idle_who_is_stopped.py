"""Whom the idle policy warns and stops, through the stop path with the clock moved past the
warning and past the stop (as test_idle.py moves it).

dev-pool's policy is ``{below_percent: 5, after: 20s, warn: 10s, action: stop}``. In each test
one plain server at 0% (dave's) is warned and stopped: the proof that the policy ran. The truth
is what the hub stub was asked to stop, what runs in the simulated cluster, and the ledger's
warnings as ``GET api/v1/idle`` lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_kit import T0, start_pod
from test_idle import DCGM, polled_at, set_idle_policy
from waiting import async_wait_for

from jupyter_gpupool.service.views import iso

POLICY = "{below_percent: 5, after: 20s, warn: 10s, action: stop"


async def idle_service(start_service, tmp_path: Path, servers: dict[str, dict[str, Any]]):
    """A service polling the simulated exporter, whose hub stops a server by deleting its pod,
    with ``servers``: ``{user: {"groups": [...], "gpus": n, "percent": p or [p, ...]}}``, each
    user's server ``USER-nb`` in dev-pool."""
    service = await start_service(db_url=f"sqlite:///{tmp_path / 'idle.sqlite'}", **DCGM)
    cluster, admin = service.cluster, service.admin()

    async def stop(user: str, server: str) -> int:
        cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    service.hub.on_stop = stop
    for user, s in servers.items():
        service.hub.user(user, s["groups"])  # the hub knows the user and their groups
        a = await admin.admit(user=user, groups=s["groups"], pools=["dev-pool"], gpus=s["gpus"])
        await start_pod(cluster, a, f"{user}-nb")
        cluster.set_gpu_utilization("default", f"{user}-nb", s["percent"])
    return service


async def dave_warned_then_stopped(service, now) -> list[dict[str, Any]]:
    """Move the clock past the warning, then past the stop; wait until dave's server is gone
    and the poll that stopped it has been judged to its end (a later poll has begun). The
    ledger's warnings then (all of them: dave's end, written last, is in)."""
    admin, cluster = service.admin(), service.cluster
    await polled_at(admin, "dave-nb", T0)
    now[0] = T0 + 11  # within the warning
    await polled_at(admin, "dave-nb", now[0])
    now[0] = T0 + 21  # due
    await async_wait_for(
        lambda: cluster.pod("default", "dave-nb") is None, what="dave's server stopped"
    )
    now[0] = T0 + 22

    async def polled_since() -> bool:
        health = (await admin.request("GET", "api/v1/health")).json()
        return health["utilization"]["last_poll"] == iso(now[0])

    await async_wait_for(polled_since, what="a poll after the one that stopped dave")

    async def dave_culled() -> list[dict[str, Any]] | None:
        warned = (await admin.request("GET", "api/v1/idle")).json()["warned"]["servers"]
        return warned if any(w["pod"] == "dave-nb" and w["ended"] for w in warned) else None

    return await async_wait_for(dave_culled, what="dave's culled session in the ledger")


async def test_a_multi_gpu_server_is_judged_by_its_busiest_gpu_not_the_mean(
    start_service, pools_dir, tmp_path, now
):
    set_idle_policy(pools_dir, POLICY + "}")
    service = await idle_service(
        start_service,
        tmp_path,
        {
            # GPUs at 0% and 8%: the mean, 4%, is under 5%; the busiest is not
            "carol": {"groups": ["students"], "gpus": 2, "percent": [0, 8]},
            "dave": {"groups": ["students"], "gpus": 2, "percent": [0, 0]},
        },
    )
    admin = service.admin()

    async def carol_measured() -> dict[str, Any] | None:
        [row] = [r for r in await admin.servers(pool="dev-pool") if r["name"] == "carol-nb"]
        return row if row["gpu_utilization_max"] == 8.0 else None

    carol = await async_wait_for(carol_measured, what="carol's GPUs measured at 0% and 8%")
    assert carol["gpu_utilization"] == 4.0  # the mean, under the policy's 5%

    warned = await dave_warned_then_stopped(service, now)
    assert service.hub.stopped == [("dave", "")]
    assert [(w["user"], w["ended"]) for w in warned] == [("dave", "culled")]
    assert service.cluster.pod("default", "carol-nb") is not None


@pytest.mark.parametrize(
    ("exempt", "user", "groups"),
    [
        ("{users: [carol]}", "carol", ["students"]),
        ("{groups: [long-jobs]}", "erin", ["students", "long-jobs"]),
        # the hub answers 500 for frank's groups: he might be in the exempt group
        ("{groups: [long-jobs]}", "frank", None),
    ],
    ids=["exempt user", "exempt group", "groups unknown"],
)
async def test_servers_that_are_or_may_be_exempt_are_never_warned_or_stopped(
    start_service, pools_dir, tmp_path, now, exempt, user, groups
):
    set_idle_policy(pools_dir, POLICY + f", exempt: {exempt}}}")
    service = await idle_service(
        start_service,
        tmp_path,
        {
            user: {"groups": groups or ["students"], "gpus": 1, "percent": 0},
            "dave": {"groups": ["students"], "gpus": 1, "percent": 0},
        },
    )
    if groups is None:
        service.hub.failing_users.add(user)
    warned = await dave_warned_then_stopped(service, now)
    assert service.hub.stopped == [("dave", "")]
    assert [(w["user"], w["ended"]) for w in warned] == [("dave", "culled")]
    assert service.cluster.pod("default", f"{user}-nb") is not None
    listed = (await service.admin().request("GET", "api/v1/idle")).json()["servers"]
    assert listed == []  # nor listed as idle
