"""Partitioned GPU nodes on both clusters (tests/clusters.py): the same cluster file registers a
MIG node, a time-sliced node and a whole-GPU node, and the scheduler — kube-scheduler v1.25 on
the real control plane, the simulated one here — treats their extended resources as counts.

A pod asking ``nvidia.com/mig-1g.10gb: 1`` goes to the MIG node only; one asking for more than
are free stays Pending with a FailedScheduling event saying what is short, in the same words on
both.
"""

from __future__ import annotations

from typing import Any

import pytest
from clusters import CLUSTERS, Cluster, open_cluster
from waiting import async_wait_for

from jupyter_gpupool.core.usage.shapes import node_offer
from jupyter_gpupool.sim import parse_cluster

pytestmark = pytest.mark.timeout(180)

SPEC = """\
nodes:
  - name: mig-node
    gpu:
      count: 1
      product: NVIDIA-A100-SXM4-80GB
      memory: 81920
      mig: {strategy: mixed, devices: {"1g.10gb": 3, "3g.40gb": 1}}
  - name: sliced-node
    gpu: {count: 1, product: NVIDIA-A10, memory: 23028,
          sharing: {strategy: time-slicing, replicas: 4}}
  - name: whole-node
    gpu: {count: 2, product: NVIDIA-A10, memory: 23028}
"""


def pod(name: str, resources: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "python", "resources": {"limits": resources}}]
        },
    }


async def bound(cluster: Cluster, name: str) -> str:
    async def node() -> str | None:
        p = await cluster.pod("default", name)
        return ((p or {}).get("spec") or {}).get("nodeName")

    return await async_wait_for(node, what=f"pod {name} to be bound", timeout=30)


async def failed_scheduling(cluster: Cluster, name: str) -> list[str]:
    async def messages() -> list[str] | None:
        events = await cluster.events_for("default", name)
        found = [e["message"] for e in events if e.get("reason") == "FailedScheduling"]
        return found or None

    return await async_wait_for(messages, what=f"pod {name} to fail scheduling", timeout=30)


@pytest.mark.parametrize("kind", CLUSTERS)
async def test_mig_pods_go_to_the_mig_node_and_one_too_many_stays_pending(
    kind: str, request: pytest.FixtureRequest
) -> None:
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    async with open_cluster(kind, realk8s_kubeconfig=real, spec=parse_cluster(SPEC)) as cluster:
        nodes = {n["metadata"]["name"]: n for n in await cluster.list_nodes()}
        node = nodes["mig-node"]
        offer = node_offer(node["metadata"]["labels"], node["status"]["allocatable"])
        assert {o.shape.id: o.count for o in offer.shapes} == {"mig-1g.10gb": 3, "mig-3g.40gb": 1}
        sliced = nodes["sliced-node"]
        assert sliced["status"]["allocatable"]["nvidia.com/gpu"] == "4"

        for i in range(3):
            await cluster.create_pod("default", pod(f"small-{i}", {"nvidia.com/mig-1g.10gb": "1"}))
        assert [await bound(cluster, f"small-{i}") for i in range(3)] == ["mig-node"] * 3

        await cluster.create_pod("default", pod("one-more", {"nvidia.com/mig-1g.10gb": "1"}))
        await cluster.create_pod("default", pod("too-big", {"nvidia.com/mig-3g.40gb": "2"}))
        assert (await failed_scheduling(cluster, "one-more"))[0] == (
            "0/3 nodes are available: 3 Insufficient nvidia.com/mig-1g.10gb. preemption: 0/3 "
            "nodes are available: 3 No preemption victims found for incoming pod."
        )
        assert (await failed_scheduling(cluster, "too-big"))[0] == (
            "0/3 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb. preemption: 0/3 "
            "nodes are available: 3 No preemption victims found for incoming pod."
        )
        for name in ("one-more", "too-big"):
            p = await cluster.pod("default", name)
            assert p is not None and p["status"]["phase"] == "Pending"
            assert "nodeName" not in p["spec"]
