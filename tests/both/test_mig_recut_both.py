"""Re-cutting a node by its ``nvidia.com/mig.config`` label on both clusters (tests/clusters.py):
the simulated MIG manager on the simulator, and on the real control plane the tests' fake MIG
manager (tests/fake_mig_manager.py), which writes the states, the status and GFD's labels through
the real API server as mig-parted, the device plugin (through the kubelet) and GFD do.

The same label sequence gives the same states, in order, as a watch on the node sees them, and
the same allocatable and ``nvidia.com/`` labels at the end of each change.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from clusters import CLUSTERS, Cluster, open_cluster
from fake_mig_manager import FakeMigManager
from mig_states import device_resources, gpu_labels, watch_node
from waiting import async_wait_for

from jupyter_gpupool.sim import parse_cluster

pytestmark = pytest.mark.timeout(180)

NODE = "gpu-node-2"
CONFIG = "nvidia.com/mig.config"
SPEC = """\
nodes:
  - name: gpu-node-2
    gpu: {count: 8, type: A100-80G, product: NVIDIA-A100-SXM4-80GB, memory: 81920}
"""
GFD_WHOLE = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81920",
}
MIG_1G = {
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig-1g.10gb.count": "56",
    "nvidia.com/mig-1g.10gb.memory": "9856",
    "nvidia.com/mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
    "nvidia.com/mig-1g.10gb.replicas": "1",
    "nvidia.com/mig-1g.10gb.sharing-strategy": "none",
    "nvidia.com/mig-1g.10gb.slices.ci": "1",
    "nvidia.com/mig-1g.10gb.slices.gi": "1",
}
REBOOT = ["pending", "rebooting", "pending", "success"]
# (the label's value, the states, then the allocatable devices and nvidia.com/ labels)
SEQUENCE = [
    (
        "all-1g.10gb",
        REBOOT,
        {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"},
        {**GFD_WHOLE, **MIG_1G},
    ),
    (
        "all-disabled",
        REBOOT,
        {"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "0"},
        GFD_WHOLE,
    ),
    ("all-9g.90gb", ["failed"], {"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "0"}, GFD_WHOLE),
]


@contextlib.asynccontextmanager
async def recut_cluster(
    kind: str, request: pytest.FixtureRequest, spec: str = SPEC
) -> AsyncIterator[Cluster]:
    """The cluster ``kind`` with ``spec``'s nodes (SPEC's by default) and a MIG manager
    following their label."""
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    async with open_cluster(kind, realk8s_kubeconfig=real, spec=parse_cluster(spec)) as cluster:
        if cluster.nodes is None:
            yield cluster
            return
        async with FakeMigManager(cluster.nodes):
            yield cluster


async def settled(cluster: Cluster, devices: dict[str, str], labels: dict[str, str]) -> None:
    async def there() -> dict[str, Any] | None:
        n = await cluster.node(NODE)
        return n if device_resources(n) == devices and gpu_labels(n) == labels else None

    async def last() -> str:
        n = await cluster.node(NODE)
        return f"{device_resources(n)} {gpu_labels(n)}"

    try:
        await async_wait_for(there, what=f"{NODE} to offer {devices}", timeout=20)
    except AssertionError as e:
        raise AssertionError(f"{e}; the node has {await last()}") from None


@pytest.mark.parametrize("kind", CLUSTERS)
async def test_the_same_labels_give_the_same_states_allocatable_and_labels(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async with recut_cluster(kind, request) as cluster, watch_node(cluster, NODE) as seen:
        for value, states, devices, labels in SEQUENCE:
            seen.clear()
            await cluster.label(NODE, CONFIG, value)
            assert await seen.until() == states, value
            state = "failed" if states[-1] == "failed" else "success"
            want = {**labels, CONFIG: value, "nvidia.com/mig.config.state": state}
            await settled(cluster, devices, want)


@pytest.mark.parametrize("kind", CLUSTERS)
async def test_a_pod_holding_a_gpu_makes_the_recut_fail_on_both(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async with recut_cluster(kind, request) as cluster, watch_node(cluster, NODE) as seen:
        limits = {"nvidia.com/gpu": "1"}
        body = {
            "metadata": {"name": "holder"},
            "spec": {
                "containers": [{"name": "main", "image": "python", "resources": {"limits": limits}}]
            },
        }
        await cluster.create_pod("default", body)

        async def runs() -> bool:
            p = await cluster.pod("default", "holder")
            return ((p or {}).get("status") or {}).get("phase") == "Running"

        await async_wait_for(runs, what="the pod holding a GPU to run", timeout=30)
        await cluster.label(NODE, CONFIG, "all-1g.10gb")
        assert await seen.until() == ["pending", "failed"]
        want = {**GFD_WHOLE, CONFIG: "all-1g.10gb", "nvidia.com/mig.config.state": "failed"}
        await settled(cluster, {"nvidia.com/gpu": "8"}, want)
