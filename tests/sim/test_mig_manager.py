"""The simulated MIG manager's re-partitions (sim/nodes/migmanager.py), step by step.

As mig-parted's ``reconfigure-mig.sh`` (the GPU operator's MIG manager): ``pending``, then
``rebooting`` and ``pending`` again only when a GPU must change MIG mode, then ``success`` with
the new allocatable; ``failed`` with the old layout when GPUs it changes are in use. The test
holds each step (a long ``delay``) and moves it on with ``advance``/``finish``, as a clock
moved by hand; truth is the Node the API server serves.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_partitioned_nodes import mig_states, phase, pod, put
from waiting import async_wait_for

from jupyter_gpupool.core.usage.shapes import node_offer
from jupyter_gpupool.sim import SimCluster, parse_cluster

CLUSTER = """\
nodes:
  - name: mig-node
    gpu:
      count: 2
      product: NVIDIA-A100-SXM4-80GB
      memory: 81920
      mig: {strategy: mixed, devices: {"3g.40gb": 2, "1g.10gb": 7}}
"""
# GPU 0: 2 x 3g.40gb, GPU 1: 7 x 1g.10gb; cut anew, GPU 1 holds 3 x 2g.20gb: both stay in MIG
# mode
RECUT = {"strategy": "mixed", "devices": {"3g.40gb": 2, "2g.20gb": 3}}


@pytest.fixture
async def cluster() -> Any:
    async with SimCluster(parse_cluster(CLUSTER), run_processes=False, mig_delay=3600) as c:
        yield c


def served(cluster: SimCluster) -> dict[str, Any]:
    return cluster.store.get("nodes", None, "mig-node")


def offered(cluster: SimCluster) -> dict[str, int]:
    node = served(cluster)
    offer = node_offer(node["metadata"]["labels"], node["status"]["allocatable"])
    return {o.shape.id: o.count for o in offer.shapes}


async def test_no_mig_mode_change_goes_pending_then_success_and_allocatable_changes_last(cluster):
    states = mig_states(cluster, "mig-node")
    before = served(cluster)["status"]["allocatable"]
    code, body = await put(
        cluster, "/sim/v1/nodes/mig-node/mig", {"mig": RECUT, "config": "custom-2g"}
    )
    assert code == 200, body
    assert states == ["pending"]
    assert served(cluster)["status"]["allocatable"] == before
    assert cluster.mig_manager.running("mig-node")
    # the MIG manager takes one change at a time
    code, body = await put(cluster, "/sim/v1/nodes/mig-node/mig", {"mig": RECUT})
    assert code == 409 and "being re-partitioned already" in body["message"]

    cluster.mig_manager.finish("mig-node")
    assert states == ["pending", "success"]
    assert offered(cluster) == {"mig-3g.40gb": 2, "mig-2g.20gb": 3}
    labels = served(cluster)["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == "custom-2g"
    assert labels["nvidia.com/mig-2g.20gb.count"] == "3"
    assert "nvidia.com/mig-1g.10gb.count" not in labels
    assert not cluster.mig_manager.running("mig-node")


async def test_a_pod_that_takes_a_changing_gpu_meanwhile_makes_the_apply_fail(cluster):
    """The scheduler still sees the old instances while the state is pending (the simulator
    does not stop the device plugin): a pod bound to one makes the apply fail."""
    states = mig_states(cluster, "mig-node")
    before = served(cluster)["status"]["allocatable"]
    cluster.repartition("mig-node", RECUT)
    cluster.store.create(
        "pods", "default", pod("late", None, {"nvidia.com/mig-1g.10gb": "1"}, False)
    )
    await async_wait_for(lambda: phase(cluster, "late") == "Running", what="late", timeout=15)
    cluster.mig_manager.finish("mig-node")
    assert states == ["pending", "failed"]
    assert served(cluster)["status"]["allocatable"] == before


async def test_a_node_removed_while_it_is_re_partitioned_ends_it(cluster):
    cluster.repartition("mig-node", {"strategy": "mixed", "devices": {"7g.80gb": 1}})
    cluster.remove_node("mig-node")
    assert not cluster.mig_manager.running("mig-node")


async def test_the_steps_follow_on_their_own_after_the_delay():
    async with SimCluster(parse_cluster(CLUSTER), mig_delay=0) as c:
        states = mig_states(c, "mig-node")
        c.repartition("mig-node", {"strategy": "mixed", "devices": {"7g.80gb": 1}})
        # GPU 1 leaves MIG mode: the MIG manager reboots for it
        await async_wait_for(lambda: states[-1] == "success", what="success", timeout=15)
        assert states == ["pending", "rebooting", "pending", "success"]
        node = c.store.get("nodes", None, "mig-node")
        alloc = {k: v for k, v in node["status"]["allocatable"].items() if "nvidia" in k}
        # the kubelet keeps a device resource it saw once, at 0 (nodestatus/setters.go)
        assert alloc == {
            "nvidia.com/gpu": "1",
            "nvidia.com/mig-7g.80gb": "1",
            "nvidia.com/mig-1g.10gb": "0",
            "nvidia.com/mig-3g.40gb": "0",
        }
