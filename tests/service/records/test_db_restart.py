"""The service's database across a SIGKILL and a restart (issue 16), on SQLite and PostgreSQL.

The real service runs in a subprocess (:class:`service_kit.ServiceProcess`) against a simulated
cluster. The truth is read by the test itself: the database through its own SQLAlchemy engine,
the pods from the simulated cluster, the times from its own clock.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from pathlib import Path
from typing import Any

import yaml
from service_kit import HubStub, ServiceProcess, delete_pod, start_pod
from sqlalchemy import Engine, create_engine, select
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolClient
from jupyter_gpupool.core.accounting.ledger import parse_time
from jupyter_gpupool.db.models import ChangeRecord, ServerSession, UsageSample
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE
from jupyter_gpupool.sim import SimCluster, parse_cluster

POOL = "restart-pool"
INTERVAL = 0.5  # history_interval: samples, and sessions marked as seen
#: gpu_hours rounds to 4 decimals: half of that, in hours
ROUNDING = 0.00005
QUOTAS = f"""\
kind: quota
version: v0.1
quota:
  name: restart-quotas
pools:
  {POOL}:
    borrowing: true
    user-default: {{guaranteed: 0, limit: 8}}
    groups:
      team-a: {{guaranteed: 8, limit: 16}}
"""
CHANGE = "replaced the quota documents (restart-quotas)"
A_GPUS, B_GPUS = 4, 2


def cluster_spec():
    return parse_cluster(
        yaml.safe_dump(
            {
                "nodes": [
                    {
                        "name": f"gpu-{i:02d}",
                        "labels": {"runwhere.ai/pool": POOL},
                        "gpu": {"count": 8, "type": "A100-80G"},
                    }
                    for i in range(2)
                ]
            }
        )
    )


def write_pool(pools_dir: Path) -> None:
    for f in pools_dir.iterdir():
        f.unlink()
    doc = {"kind": "pool", "version": "v0.1", "pool": {"name": POOL}, "nodes": {}}
    (pools_dir / f"{POOL}.yaml").write_text(yaml.safe_dump(doc))


@contextmanager
def own_engine(url: str) -> Iterator[Engine]:
    engine = create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


def rows(engine: Engine, table: Any) -> list[dict[str, Any]]:
    """Every row of one of the service's tables, read by the test (ordered by id)."""
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table).order_by(table.c.id))]


def samples(engine: Engine) -> list[dict[str, Any]]:
    return [r for r in rows(engine, UsageSample.__table__) if r["pool"] == POOL]


def sessions_of(engine: Engine, pod: str) -> list[dict[str, Any]]:
    return [r for r in rows(engine, ServerSession.__table__) if r["pod"] == pod]


def changes(engine: Engine) -> list[dict[str, Any]]:
    return rows(engine, ChangeRecord.__table__)


def page_text(html: str) -> str:
    """A page's text as a reader sees it: tags dropped, whitespace squeezed."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


async def running_since(cluster: SimCluster, name: str) -> float:
    """Wait until the pod runs; its containers' ``startedAt`` (whole seconds), as it says."""

    def started() -> float | None:
        status = (cluster.pod("default", name) or {}).get("status") or {}
        if status.get("phase") != "Running":
            return None
        state = status["containerStatuses"][0]["state"]
        return parse_time(state["running"]["startedAt"])

    return await async_wait_for(started, what=f"pod {name} to run", timeout=15)


async def hours_now(admin: GPUPoolClient) -> tuple[float, dict[str, dict[str, Any]], float]:
    """GPU-hours per user from the API, between the test's own clock readings before and after."""
    before = time.time()
    report = await admin.gpu_hours(by="user", since="1h")
    after = time.time()
    return before, {r["subject"]: r for r in report["rows"]}, after


async def test_samples_ledger_and_change_log_survive_a_sigkill_and_a_server_is_counted_once(
    db_url: str, hub: HubStub, pools_dir: Path, tmp_path: Path
) -> None:
    """Samples, sessions and the change log written before a SIGKILL are there after the
    restart; alice's server, running across it, stays one open session counted once from its
    start; bob's, deleted while the service was down, is closed at its last sighting."""
    write_pool(pools_dir)
    async with SimCluster(cluster_spec()) as cluster:
        svc = ServiceProcess(
            cluster,
            hub,
            pools_dir,
            tmp_path / "service.log",
            db_url=db_url,
            extra_args=[f"--GPUPoolService.history_interval={INTERVAL}"],
        )
        admin = GPUPoolClient(svc.url, hub.admin("ops"), request_timeout=10)
        pages = GPUPoolClient(svc.url, hub.user("root", [], [ADMIN_SCOPE]), request_timeout=10)
        with own_engine(db_url) as db:
            try:
                await svc.start()
                # --- before: a change, two servers, samples ----------------------------------
                await admin.put_quotas(QUOTAS)
                a = await admin.admit(user="alice", groups=["team-a"], pools=[POOL], gpus=A_GPUS)
                b = await admin.admit(user="bob", groups=[], pools=[POOL], gpus=B_GPUS)
                a_created = time.time()
                await start_pod(cluster, a, "alice-nb")
                a_started = await running_since(cluster, "alice-nb")
                a_running = time.time()
                b_created = time.time()
                await start_pod(cluster, b, "bob-nb")
                b_started = await running_since(cluster, "bob-nb")
                assert int(a_created) <= a_started <= a_running
                assert int(b_created) <= b_started

                def ready() -> bool:
                    """Both sessions open and seen again since, 3+ samples with both servers."""
                    opened = sessions_of(db, "alice-nb") + sessions_of(db, "bob-nb")
                    seen_again = len(opened) == 2 and all(
                        s["stopped"] is None and s["last_seen"] >= b_created + INTERVAL
                        for s in opened
                    )
                    both = [s for s in samples(db) if s["gpu_used"] == A_GPUS + B_GPUS]
                    return seen_again and len(both) >= 3 and len(changes(db)) == 1

                await async_wait_for(
                    ready, what="2 open sessions, 3 samples and the change", timeout=15
                )

                # --- SIGKILL; bob's server goes while the service is down --------------------
                svc.kill()
                killed = time.time()
                samples_before = samples(db)  # what the killed service had committed
                changes_before = changes(db)
                [alice_before] = sessions_of(db, "alice-nb")
                [bob_before] = sessions_of(db, "bob-nb")
                assert changes_before[0]["what"] == CHANGE
                assert changes_before[0]["who"] == "service ops"
                deleting = time.time()
                await delete_pod(cluster, "bob-nb")
                deleted = time.time()
                restarting = time.time()
                await svc.start()

                # --- the samples from before are there, new ones come ------------------------
                async def new_points() -> list[list[float]] | None:
                    history = await admin.usage_history("6h", pool=POOL)
                    points = history["pools"].get(POOL, [])
                    after = [p for p in points if p[0] >= restarting]
                    return points if len(after) >= 2 else None

                points = await async_wait_for(
                    new_points, what="2 samples after the restart in the API", timeout=15
                )
                said = {p[0]: p[1:3] for p in points}
                for s in samples_before:
                    assert said.get(s["time"]) == [s["gpu_used"], s["gpu_total"]], (
                        f"sample at {s['time']} from before the kill is not in the history API",
                        said,
                    )
                samples_after = samples(db)
                kept = {s["id"]: s for s in samples_after}
                assert all(kept.get(s["id"]) == s for s in samples_before), "a sample was lost"
                assert max(s["time"] for s in samples_before) <= killed
                new = [s for s in samples_after if s["time"] >= restarting]
                assert len(new) >= 2 and len(samples_after) == len(samples_before) + len(new)
                assert all(s["gpu_used"] == A_GPUS for s in new), new  # alice's alone

                # --- the change log ----------------------------------------------------------
                assert changes(db) == changes_before  # kept, and not written twice
                admin_page = page_text((await pages.request("GET", "admin")).text())
                assert f"service ops (API) {CHANGE}" in admin_page

                # --- bob: closed at his last sighting before the kill ------------------------
                [bob] = await async_wait_for(
                    lambda: [s for s in sessions_of(db, "bob-nb") if s["stopped"] is not None],
                    what="bob's session to be closed after the restart",
                )
                assert len(sessions_of(db, "bob-nb")) == 1
                assert bob["started"] == bob_before["started"] == b_started
                assert bob_before["last_seen"] <= bob["stopped"] <= deleted
                assert bob["stopped"] == bob_before["last_seen"]  # the pod says nothing now
                assert bob["ended"] == "stopped"
                assert bob_before["last_seen"] < deleting

                # --- alice: one session, still open, from her pod's start --------------------
                # (2 samples after the restart: its first tick's writes are committed)
                alice_rows = sessions_of(db, "alice-nb")
                assert len(alice_rows) == 1, f"alice's server is one session: {alice_rows}"
                [alice] = alice_rows
                assert alice["stopped"] is None and alice["ended"] is None, (
                    f"alice's server runs across the restart: her session stays open: {alice}"
                )
                assert alice["started"] == alice_before["started"] == a_started
                assert int(a_created) <= alice["started"] <= a_running
                assert alice["last_seen"] >= restarting  # seen by the restarted service

                # --- GPU-hours: alice counted once from her start, bob his session -----------
                asked, hours, answered = await hours_now(admin)
                assert set(hours) == {"alice", "bob"}, hours
                assert hours["alice"]["sessions"] == 1 and hours["bob"]["sessions"] == 1
                low = A_GPUS * (asked - a_started) / 3600 - ROUNDING
                high = A_GPUS * (answered - a_started) / 3600 + ROUNDING
                assert low <= hours["alice"]["gpu_hours"] <= high, (
                    f"alice ran {A_GPUS} GPUs from {a_started} (her pod's start) to about "
                    f"{asked}: {low:.5f}..{high:.5f} GPU-hours, the API says "
                    f"{hours['alice']['gpu_hours']}"
                )
                assert hours["alice"]["within_quota"] == hours["alice"]["gpu_hours"]
                bob_hours = B_GPUS * (bob["stopped"] - bob["started"]) / 3600
                assert abs(hours["bob"]["gpu_hours"] - bob_hours) <= ROUNDING, (hours, bob)
                # by the test's clock: from its pod's start to between its last sighting and
                # its deletion
                assert (
                    B_GPUS * (bob_before["last_seen"] - b_started) / 3600 - ROUNDING
                    <= hours["bob"]["gpu_hours"]
                    <= B_GPUS * (deleted - b_started) / 3600 + ROUNDING
                )
            finally:
                await admin.close()
                await pages.close()
                svc.stop()
