"""Re-cuts asked before a restart of the service, followed after it (issue 41): the service asks
gpu-node-2 to be re-cut, dies while the MIG manager works, and the next run of the service
reads what it asked from the node's labels (when, for which shape, the MIG manager's state),
says it in the health report, records its end in the change log, and does not ask again.
A re-cut that failed while the service was away is a problem in the health report.

The truth: the simulated cluster's node labels (written by the first run and by the
simulator's MIG manager), and the second run's HTTP answers (``GET api/v1/health``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from waiting import async_wait_for

from jupyter_gpupool.sim import SimCluster

pytestmark = pytest.mark.timeout(120)

POOL = "training-pool"
RECUT = """
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-7g.80gb]
  unused: 30m
  interval: 1h
"""
AT = "gpupool.jupyter.org/recut-at"


def labels(cluster: SimCluster, name: str) -> dict[str, str]:
    return cluster.store.get("nodes", None, name)["metadata"]["labels"]


async def asked_and_stopped(start_service, sim_cluster: SimCluster, pools_dir: Path) -> str:
    """The first run asks gpu-node-2 to be re-cut for a waiting request, then stops; the
    re-cut's asking time as its label says."""
    with (pools_dir / "training-pool.yaml").open("a") as f:
        f.write(RECUT)
    sim_cluster.mig_manager.delay = 3600.0  # under way until the test finishes it
    first = await start_service()
    shape = [{"pool": POOL, "shape": "mig-7g.80gb"}]
    await first.admin().admit(user="alice", groups=[], pools=shape, gpus=1, queue=True)
    await async_wait_for(
        lambda: labels(sim_cluster, "gpu-node-2").get("nvidia.com/mig.config") == "all-7g.80gb",
        what="gpu-node-2 asked to be re-cut",
        timeout=20,
        interval=0.1,
    )
    await first.stop()
    return labels(sim_cluster, "gpu-node-2")[AT]


def recut_rows(health: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in health["recuts"] if r["node"] == "gpu-node-2"]


async def test_a_re_cut_under_way_at_a_restart_is_followed_to_its_end(
    start_service, sim_cluster: SimCluster, pools_dir: Path, now: list[float]
) -> None:
    asked = await asked_and_stopped(start_service, sim_cluster, pools_dir)
    second = await start_service()
    admin = second.admin()

    async def rows() -> list[dict[str, Any]] | None:
        return recut_rows(await admin.health()) or None

    (row,) = await async_wait_for(rows, what="the re-cut in the health report", timeout=10)
    assert (row["config"], row["shape"], row["state"]) == ("all-7g.80gb", "mig-7g.80gb", "pending")
    assert "taken up after the service restarted" in row["words"], row
    sim_cluster.mig_manager.finish("gpu-node-2")

    async def done() -> dict[str, Any] | None:
        got = recut_rows(await admin.health())
        return got[0] if got and got[0]["state"] == "success" else None

    row = await async_wait_for(done, what="the re-cut followed to success", timeout=20)
    words = [c.what for c in second.ctx.changes.latest()]
    assert any(w.startswith("gpu-node-2 re-cut to all-7g.80gb") and "done in" in w for w in words)
    # not asked again: the first run's asking time is still the node's
    assert labels(sim_cluster, "gpu-node-2")[AT] == asked


async def test_a_re_cut_that_failed_while_the_service_was_away_is_a_problem(
    start_service, sim_cluster: SimCluster, pools_dir: Path, now: list[float]
) -> None:
    await asked_and_stopped(start_service, sim_cluster, pools_dir)
    sim_cluster.label_node("gpu-node-2", "nvidia.com/mig.config.state", "failed")
    second = await start_service()

    async def problem() -> list[str] | None:
        health = await second.admin().health()
        found = [p for p in health["problems"] if "gpu-node-2" in p]
        return found or None

    (words,) = await async_wait_for(problem, what="the failed re-cut as a problem", timeout=10)
    assert "failed" in words, words
