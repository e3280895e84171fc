"""Re-cutting MIG layouts to demand, in the service on the simulated cluster: the issue's demo
scenario. Six users ask training-pool for a 1g.10gb instance; gpu-node-mig-1 has two. The
service re-cuts the idle 8-GPU gpu-node-2 by its nvidia.com/mig.config label, the simulator's
MIG manager takes the label as NVIDIA's does (pending, rebooting, pending, success, then the
device plugin's resources), the four others are admitted from the line and run there; once
they end and the instances stood unused, gpu-node-2 goes back to 8 whole GPUs.

The truth: the simulated cluster's own store (the node's labels and allocatable, where each pod
runs), and the change log the service keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service_kit import delete_pod, start_pod
from test_pages import Browser, text
from waiting import async_wait_for

from jupyter_gpupool.service.web.auth import ADMIN_SCOPE
from jupyter_gpupool.sim import SimCluster

MIG = {"pool": "training-pool", "shape": "mig-1g.10gb"}
RECUT = """
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-1g.10gb, all-balanced]
  unused: 3s
  interval: 1s
"""


def node(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.store.get("nodes", None, name)


def where(cluster: SimCluster, pod: str) -> str | None:
    return (cluster.pod("default", pod) or {}).get("spec", {}).get("nodeName")


async def test_six_students_get_1g_instances_from_a_re_cut_node_that_goes_home_unused(
    start_service, sim_cluster, pools_dir: Path
):
    with (pools_dir / "training-pool.yaml").open("a") as f:
        f.write(RECUT)
    service = await start_service()
    admin = service.admin()
    answers = [
        await admin.admit(user=f"student{i}", pools=[MIG], gpus=1, queue=True) for i in range(6)
    ]
    assert [a.get("queued", False) for a in answers] == [False, False, True, True, True, True]
    started = set()
    for i, a in enumerate(answers[:2]):
        await start_pod(sim_cluster, a, f"jupyter-student{i}")
        started.add(i)

    async def all_running() -> bool:
        for i, a in enumerate(answers):
            if i in started:
                continue
            now = await admin.admission(a["id"])  # asking keeps it in line
            if now["state"] == "admitted":
                await start_pod(sim_cluster, now, f"jupyter-student{i}")
                started.add(i)
        return len(started) == 6

    await async_wait_for(all_running, what="all six students running", timeout=60, interval=0.2)
    gpu2 = node(sim_cluster, "gpu-node-2")
    assert gpu2["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert gpu2["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert gpu2["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    on = sorted(where(sim_cluster, f"jupyter-student{i}") or "" for i in range(6))
    assert on == ["gpu-node-2"] * 4 + ["gpu-node-mig-1"] * 2, on
    words = [c.what for c in service.ctx.changes.latest()]
    assert any(
        w.startswith("gpu-node-2 re-cut to all-1g.10gb at ")
        and "for 4 waiting requests of 1g.10gb" in w
        for w in words
    ), words

    # the pool's page and the health page say it, as the change log does
    admin_page = Browser(service, service.hub.user("ops", [], [ADMIN_SCOPE]))
    status, html, _ = await admin_page.get("pools/training-pool")
    assert status == 200
    assert "MIG re-cuts" in text(html) and "gpu-node-2 re-cut to all-1g.10gb at" in text(html)
    status, html, _ = await admin_page.get("health")
    assert status == 200 and "re-cut gpu-node-2" in text(html)

    for i in range(6):
        await delete_pod(sim_cluster, f"jupyter-student{i}")

    def home() -> bool:
        n = node(sim_cluster, "gpu-node-2")
        return (
            n["metadata"]["labels"].get("nvidia.com/mig.config") == "all-disabled"
            and n["status"]["allocatable"].get("nvidia.com/gpu") == "8"
        )

    await async_wait_for(home, what="gpu-node-2 back to 8 whole GPUs", timeout=30, interval=0.2)
    words = [c.what for c in service.ctx.changes.latest()]
    assert any(
        w.startswith("gpu-node-2 back to all-disabled: its instances stood unused") for w in words
    ), words
    health = await admin.health()
    (row,) = [r for r in health["recuts"] if r["node"] == "gpu-node-2"]
    assert row["config"] == "all-disabled", row
