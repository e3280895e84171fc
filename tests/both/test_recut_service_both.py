"""Re-cutting MIG layouts to demand through the service, on both clusters (tests/clusters.py):
on the simulator its MIG manager, on the real control plane the tests' fake MIG manager
(tests/fake_mig_manager.py) take the service's nvidia.com/mig.config label as NVIDIA's does.

training-pool is one 8 x A100-80GB node that may be re-cut. Three users ask for a 1g.10gb
instance, which no node offers yet: they wait in line, the service re-cuts gpu-node-2, they
are admitted as the instances appear and their pods are scheduled there by the cluster's own
scheduler; once they end, the node goes back to whole GPUs. The truth: the API server (the
node's labels and allocatable, where each pod is bound).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clusters import CLUSTERS
from service_kit import HubStub, ServiceProcess, pod_for
from test_mig_recut_both import recut_cluster
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolClient

pytestmark = pytest.mark.timeout(240)

SPEC = """\
nodes:
  - name: gpu-node-2
    labels: {runwhere.ai/pool: training-pool}
    gpu: {count: 8, type: A100-80G, product: NVIDIA-A100-SXM4-80GB, memory: 81920}
"""
POOL = """kind: pool
version: v0.1
pool: {name: training-pool}
nodes:
  gpu-node-2: {gpu-type: A100-80G}
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-1g.10gb]
  unused: 2s
  interval: 1s
"""
MIG = {"pool": "training-pool", "shape": "mig-1g.10gb"}


def write_pool(pools_dir: Path) -> None:
    """training-pool as POOL says, and no other pool."""
    for f in pools_dir.glob("*.yaml"):
        f.unlink()
    (pools_dir / "training-pool.yaml").write_text(POOL)


def labels_of(node: dict[str, Any]) -> dict[str, str]:
    return node["metadata"].get("labels") or {}


@pytest.mark.parametrize("kind", CLUSTERS)
async def test_waiting_students_are_admitted_on_a_node_the_service_re_cut_and_it_goes_home(
    kind: str, hub: HubStub, pools_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    write_pool(pools_dir)
    async with recut_cluster(kind, request, SPEC) as cluster:
        svc = ServiceProcess(cluster, hub, pools_dir, tmp_path / "service.log")  # type: ignore[arg-type]
        await svc.start()
        admin = GPUPoolClient(svc.url, hub.admin("spawner"), request_timeout=10)
        try:
            answers = [
                await admin.admit(user=f"student{i}", pools=[MIG], gpus=1, queue=True)
                for i in range(3)
            ]
            assert all(a.get("queued") for a in answers), answers
            started: set[int] = set()

            async def all_started() -> bool:
                for i, a in enumerate(answers):
                    if i not in started:
                        now = await admin.admission(a["id"])
                        if now["state"] == "admitted":
                            await cluster.create_pod("default", pod_for(now, f"student{i}"))
                            started.add(i)
                return len(started) == 3

            await async_wait_for(all_started, what="three admitted", timeout=90, interval=0.3)

            async def bound() -> bool:
                pods = [await cluster.pod("default", f"student{i}") for i in range(3)]
                return all(((p or {}).get("spec") or {}).get("nodeName") for p in pods)

            await async_wait_for(bound, what="three pods bound", timeout=60, interval=0.3)
            node = await cluster.node("gpu-node-2")
            assert labels_of(node)["nvidia.com/mig.config"] == "all-1g.10gb"
            assert node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
            for i in range(3):
                pod = await cluster.pod("default", f"student{i}")
                assert pod is not None and pod["spec"]["nodeName"] == "gpu-node-2"

            for i in range(3):
                await cluster.delete_pod("default", f"student{i}", grace=0)
                await cluster.wait_gone("default", f"student{i}")

            async def home() -> bool:
                n = await cluster.node("gpu-node-2")
                return (
                    labels_of(n).get("nvidia.com/mig.config") == "all-disabled"
                    and n["status"]["allocatable"].get("nvidia.com/gpu") == "8"
                )

            await async_wait_for(home, what="gpu-node-2 home", timeout=60, interval=0.3)
        finally:
            await admin.close()
            svc.stop()
