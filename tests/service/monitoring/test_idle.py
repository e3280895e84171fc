"""The idle-GPU policy in the service (issue 17): the demo's scenario with the clock moved on.

dev-pool's file says ``idle: {below_percent: 5, after: 20s, warn: 10s, action: stop}``; the
test sets one server's GPU to 0% and another's to 80% in the simulated cluster (read by the
``dcgm`` source through the API server), moves the service's clock and watches: the idle one
is warned, then stopped through the hub and recorded as culled; the busy one keeps running; a
server whose measurements do not come is never stopped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from service_kit import start_pod
from test_pages import Browser, text
from test_records import until
from waiting import async_wait_for

from jupyter_gpupool.service import clock
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE

T0 = 1_800_000_000.0
DCGM = {
    "utilization_source": "dcgm",
    "dcgm_urls": ["/sim/v1/dcgm/metrics"],
    "utilization_interval": 0.1,
}


def set_idle_policy(pools_dir: Path, policy: str) -> None:
    dev = pools_dir / "dev-pool.yaml"
    dev.write_text(dev.read_text() + f"idle: {policy}\n")


@pytest.fixture
def now(monkeypatch):
    t = [T0]
    monkeypatch.setattr(clock, "now", lambda: t[0])
    return t


async def rows(admin) -> dict[str, dict]:
    return {r["name"]: r for r in await admin.servers(pool="dev-pool")}


async def polled_at(admin, name: str, t: float) -> dict:
    """A server's row once a poll at the service's time ``t`` has measured it."""

    async def check() -> dict | None:
        row = (await rows(admin))[name]
        return row if row["measured_at"] == t else None

    return await async_wait_for(check, what=f"{name} measured at {t}", timeout=10)


async def two_servers(service) -> None:
    admin, cluster = service.admin(), service.cluster
    for user, pod in (("carol", "carol-nb"), ("dave", "dave-nb")):
        a = await admin.admit(user=user, groups=["students"], pools=["dev-pool"], gpus=1)
        await start_pod(cluster, a, pod)
    cluster.set_gpu_utilization("default", "carol-nb", 0)
    cluster.set_gpu_utilization("default", "dave-nb", 80)


async def test_an_idle_server_is_warned_then_stopped_and_a_busy_one_keeps_running(
    start_service, pools_dir, now, tmp_path
):
    set_idle_policy(pools_dir, "{below_percent: 5, after: 20s, warn: 10s, action: stop}")
    db_url = f"sqlite:///{tmp_path / 'idle.sqlite'}"
    service = await start_service(db_url=db_url, **DCGM)
    cluster, admin = service.cluster, service.admin()

    async def stop(user: str, server: str) -> int:
        cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    service.hub.on_stop = stop
    await two_servers(service)
    carol = await polled_at(admin, "carol-nb", T0)
    assert carol["idle"] == {
        "since": T0,
        "warned": False,
        "stops_at": T0 + 20,
        "due_at": T0 + 20,
        "action": "stop",
    }
    assert carol["notice"] is None  # idle, not yet warned: no notice

    # 80%: busy. A poll in flight when his utilization was set brings 0% (idle since T0): the
    # first one that reads his 80% ends that
    async def dave_busy() -> dict | None:
        row = (await rows(admin))["dave-nb"]
        return row if row["gpu_utilization"] == 80 and row["idle"] is None else None

    await async_wait_for(dave_busy, what="dave measured busy, not idle", timeout=10)

    now[0] = T0 + 11  # within the warning
    carol = await polled_at(admin, "carol-nb", now[0])
    assert carol["idle"]["warned"] and carol["idle"]["stops_at"] == T0 + 20
    # the warning is also her server's notice (issue 30): what the lab and the pages show
    assert carol["notice"] == {
        "kind": "idle",
        "words": "this server's GPUs have been idle since 2027-01-15 08:00 UTC: it stops at "
        "2027-01-15 08:00 UTC unless they get busy",
        "deadline": T0 + 20,
        "action": "stop",
    }
    [listed] = (await admin.request("GET", "api/v1/idle")).json()["servers"]
    assert (listed["user"], listed["idle_for"], listed["policy"]) == (
        "carol",
        11,
        "under 5% for 20s (warned 10s before; then stopped)",
    )
    assert service.hub.stopped == []
    # the warning is in the ledger: her session keeps when it was given
    warned = await until(
        db_url,
        "SELECT pod, idle_warned, stopped FROM server_sessions WHERE idle_warned IS NOT NULL",
        lambda r: len(r) == 1,
        "carol's warning in the ledger",
    )
    assert warned == [("carol-nb", T0 + 11, None)]
    page = await idle_page(service)
    assert "carol" in page["idle now"] and "dave" not in page["idle now"]
    assert "under 5% for 20s (warned 10s before; then stopped)" in page["policies"]
    assert "still running" in page["warned"]

    now[0] = T0 + 21  # due
    await async_wait_for(
        lambda: cluster.pod("default", "carol-nb") is None, what="carol's server stopped"
    )
    assert [u for u, _ in service.hub.stopped] == ["carol"]
    assert cluster.pod("default", "dave-nb") is not None  # busy: kept
    ended = await until(
        db_url,
        "SELECT pod, ended FROM server_sessions WHERE ended IS NOT NULL",
        lambda r: len(r) == 1,
        "carol's session to end",
    )
    assert ended == [("carol-nb", "culled")]
    warned_list = (await admin.request("GET", "api/v1/idle")).json()["warned"]
    assert [(w["pod"], w["idle_warned"], w["ended"]) for w in warned_list["servers"]] == [
        ("carol-nb", T0 + 11, "culled")
    ]
    page = await idle_page(service)
    assert "carol" not in page["idle now"] and "culled at" in page["warned"]


async def test_any_gpu_activity_resets_the_clock_and_report_only_lists(
    start_service, pools_dir, now
):
    set_idle_policy(pools_dir, "{below_percent: 5, after: 20s, warn: 10s, action: report}")
    service = await start_service(**DCGM)
    cluster, admin = service.cluster, service.admin()
    await two_servers(service)
    await polled_at(admin, "carol-nb", T0)
    now[0] = T0 + 15
    cluster.set_gpu_utilization("default", "carol-nb", 30)  # she runs something
    carol = await polled_at(admin, "carol-nb", now[0])
    await async_wait_for(
        lambda: _gpu_util(admin, "carol-nb", 30.0), what="carol at 30%", timeout=10
    )
    cluster.set_gpu_utilization("default", "carol-nb", 1)
    now[0] = T0 + 16
    carol = await async_wait_for(
        lambda: _idle_since(admin, "carol-nb", T0 + 16), what="carol idle again from T0+16"
    )
    now[0] = T0 + 60  # long past due: reported, not stopped
    carol = await polled_at(admin, "carol-nb", now[0])
    assert carol["idle"] == {
        "since": T0 + 16,
        "warned": True,
        "stops_at": None,
        "due_at": T0 + 36,
        "action": "report",
    }
    listed = (await admin.request("GET", "api/v1/idle")).json()["servers"]
    assert [(r["user"], r["action"]) for r in listed] == [("carol", "report")]
    assert service.hub.stopped == [] and cluster.pod("default", "carol-nb") is not None
    # the Idle GPUs page lists her with a stop button for the admin, and her warning (the
    # ledger's writes are queued: it shows once written)
    page = await idle_page(service)
    assert "carol" in page["idle now"] and "reported (not stopped)" in page["idle now"]
    assert 'value="carol-nb"' in page["html"] and "admin/servers/stop" in page["html"]

    async def warned() -> str | None:
        section = (await idle_page(service))["warned"]
        return section if "carol" in section else None

    section = await async_wait_for(warned, what="carol's warning on the page", timeout=10)
    assert "still running" in section and "dave" not in section


async def test_no_measurement_is_not_idle_and_exempt_users_are_left_alone(
    start_service, pools_dir, now
):
    set_idle_policy(
        pools_dir, "{below_percent: 5, after: 20s, warn: 10s, exempt: {users: [carol]}}"
    )
    # an exporter that never answers: nothing is measured, nobody is idle
    service = await start_service(**{**DCGM, "dcgm_urls": ["/sim/v1/no-such-exporter"]})
    await two_servers(service)
    admin = service.admin()
    await async_wait_for(
        lambda: _problem(admin), what="the source's problem to be reported", timeout=10
    )
    now[0] = T0 + 3600
    await async_wait_for(lambda: _problem(admin), what="another failed poll", timeout=10)
    assert all(r["idle"] is None for r in (await rows(admin)).values())
    await service.stop()
    # measured: carol (exempt) at 0% is not idle for the policy, dave at 0% is
    service = await start_service(**DCGM)
    service.cluster.set_gpu_utilization("default", "dave-nb", 0)
    admin = service.admin()
    dave = await polled_at(admin, "dave-nb", now[0])
    assert dave["idle"]["since"] == now[0]
    assert (await rows(admin))["carol-nb"]["idle"] is None


async def idle_page(service) -> dict[str, str]:
    """The Idle GPUs page as an admin reads it: its sections' texts, and its HTML."""
    browser = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    code, html, _ = await browser.get("idle")
    assert code == 200, html
    words = text(html)
    policies, _, rest = words.partition("Idle now")
    idle_now, _, warned = rest.partition("Warned in the last")
    return {"policies": policies, "idle now": idle_now, "warned": warned, "html": html}


async def _gpu_util(admin, name: str, value: float) -> bool:
    return (await rows(admin))[name]["gpu_utilization"] == value


async def _idle_since(admin, name: str, t: float) -> dict | None:
    row = (await rows(admin))[name]
    return row if (row["idle"] or {}).get("since") == t else None


async def _problem(admin) -> str | None:
    answer = (await admin.request("GET", "api/v1/servers")).json()
    return answer["utilization"]["problem"]


async def test_the_idle_page_says_what_it_lacks(start_service):
    """Without a utilization source nobody can be idle, and without a database there is no
    ledger of warnings: the page says both instead of showing empty tables."""
    service = await start_service(db_url="")
    page = await idle_page(service)
    assert "No GPU utilization source is configured" in page["policies"]
    assert "dev-pool none" in page["policies"]
    assert "No server's GPUs are idle under a policy" in page["idle now"]
    assert "The ledger is not available: no database is configured." in page["warned"]
