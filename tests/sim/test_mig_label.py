"""The simulated MIG manager follows the node's ``nvidia.com/mig.config`` label, as NVIDIA's does
(sim/nodes/migmanager.py, sim/nodes/migplan.py; mig-parted's ``pkg/mig/reconfigure``): any
client's PATCH of the label starts it, a watch on the node sees the states in order, and the
allocatable and GFD's labels change after ``success``. Truth is what the API server serves.

gpu-node-2 of examples/cluster.yaml has 8 whole A100-SXM4-80GB GPUs.
"""

from __future__ import annotations

from typing import Any

import pytest
from clusters import Cluster, open_cluster
from mig_states import device_resources, gpu_labels, watch_node
from waiting import async_wait_for

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.sim import parse_cluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

pytestmark = pytest.mark.timeout(120)

NODE = "gpu-node-2"
CONFIG = "nvidia.com/mig.config"
WHOLE = {"nvidia.com/gpu": "8"}
SLICED = {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}


@pytest.fixture
async def cluster() -> Any:
    async with open_cluster("simulated") as c:
        yield c


async def node(cluster: Cluster) -> dict[str, Any]:
    return await cluster.node(NODE)


async def settled(cluster: Cluster, allocatable: dict[str, str]) -> dict[str, Any]:
    """The node, once its allocatable devices are ``allocatable``."""

    async def there() -> dict[str, Any] | None:
        n = await node(cluster)
        return n if device_resources(n) == allocatable else None

    return await async_wait_for(there, what=f"{NODE} to offer {allocatable}", timeout=15)


def gpu_pod(name: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "python",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    spec = {"containers": [container], "nodeSelector": {"kubernetes.io/hostname": NODE}}
    spec["tolerations"] = [{"operator": "Exists"}]
    return {"metadata": {"name": name}, "spec": spec}


async def running(cluster: Cluster, name: str) -> None:
    async def phase() -> bool:
        p = await cluster.pod("default", name)
        return ((p or {}).get("status") or {}).get("phase") == "Running"

    await async_wait_for(phase, what=f"pod {name} to run", timeout=15)


async def test_the_label_recuts_a_whole_gpu_node_into_instances_and_back(cluster):
    assert device_resources(await node(cluster)) == WHOLE
    async with watch_node(cluster, NODE) as seen:
        await cluster.label(NODE, CONFIG, "all-1g.10gb")  # kubernetes_asyncio's patch_node
        # every GPU enters MIG mode: the MIG manager reboots for it
        assert await seen.until() == ["pending", "rebooting", "pending", "success"]
        sliced = await settled(cluster, SLICED)
        labels = gpu_labels(sliced)
        assert labels[CONFIG] == "all-1g.10gb"
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        assert labels["nvidia.com/mig-1g.10gb.count"] == "56"
        assert labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
        assert sliced["status"]["capacity"]["nvidia.com/mig-1g.10gb"] == "56"

        seen.clear()
        await cluster.label(NODE, CONFIG, "all-disabled")
        assert await seen.until() == ["pending", "rebooting", "pending", "success"]
        # the kubelet keeps the instances' resource, at 0
        back = await settled(cluster, {**WHOLE, "nvidia.com/mig-1g.10gb": "0"})
        assert "nvidia.com/mig-1g.10gb.count" not in gpu_labels(back)
        assert "nvidia.com/mig.strategy" not in gpu_labels(back)


async def test_an_unknown_config_fails_at_once_and_leaves_the_layout(cluster):
    before = await node(cluster)
    async with watch_node(cluster, NODE) as seen:
        await cluster.label(NODE, CONFIG, "all-9g.90gb")
        # mig-parted's `assert --valid-config` fails before anything is pending
        assert await seen.until() == ["failed"]
    after = await node(cluster)
    assert after["status"] == before["status"]
    assert gpu_labels(after) == {**gpu_labels(before), CONFIG: "all-9g.90gb"} | {
        "nvidia.com/mig.config.state": "failed"
    }


async def test_a_pod_holding_a_gpu_makes_the_recut_fail_and_leaves_the_layout(cluster):
    await cluster.create_pod("default", gpu_pod("holder"))
    await running(cluster, "holder")
    async with watch_node(cluster, NODE) as seen:
        await cluster.label(NODE, CONFIG, "all-1g.10gb")
        assert await seen.until() == ["pending", "failed"]
    assert device_resources(await node(cluster)) == WHOLE
    assert cluster.sim is not None and cluster.sim.layouts.get(NODE) is None


async def test_a_config_for_another_card_goes_pending_then_success_and_changes_nothing(cluster):
    """all-1g.5gb's rules are for the A100 40 GB: mig-parted's assert finds GPUs it matched no
    rule to, so the config is not "already applied", and its apply walks no GPU."""
    before = await node(cluster)
    async with watch_node(cluster, NODE) as seen:
        await cluster.label(NODE, CONFIG, "all-1g.5gb")
        assert await seen.until() == ["pending", "success"]
    assert (await node(cluster))["status"] == before["status"]


async def test_the_same_value_again_does_nothing_and_a_config_already_applied_succeeds_at_once(
    cluster,
):
    async with watch_node(cluster, NODE) as seen:
        await cluster.label(NODE, CONFIG, "all-disabled")
        # every GPU is whole already: `nvidia-mig-parted assert` passes, no pending
        assert await seen.until() == ["success"]
        seen.clear()
        # not applied (no rule for this card), so each time it is taken up it goes pending
        await cluster.label(NODE, CONFIG, "all-1g.5gb")
        assert await seen.until() == ["pending", "success"]
        updates = seen.updates
        await cluster.label(NODE, CONFIG, "all-1g.5gb")  # the same value: no update at all
        await cluster.label(NODE, "example.com/after", "1")  # another label: not a change
        await cluster.label(NODE, "example.com/later", "1")  # a later update, to wait for
        await async_wait_for(lambda: seen.updates >= updates + 2, what="the later updates")
        assert cluster.sim is not None and not cluster.sim.mig_manager.running(NODE)
        assert seen.states == ["pending", "success"] and seen.updates == updates + 2


async def test_changes_while_one_is_under_way_are_taken_up_after_it_the_latest_only(cluster):
    assert cluster.sim is not None
    manager = cluster.sim.mig_manager
    manager.delay = 3600  # each step waits for the test's finish()
    async with watch_node(cluster, NODE) as seen:
        await cluster.label(NODE, CONFIG, "all-1g.10gb")
        await async_wait_for(lambda: seen.states == ["pending"], what="pending")
        await cluster.label(NODE, CONFIG, "all-3g.40gb")
        await cluster.label(NODE, CONFIG, "all-2g.20gb")
        manager.finish(NODE)
        await async_wait_for(lambda: manager.running(NODE), what="the next change to start")
        manager.finish(NODE)
        await seen.until("success")
        # 1g.10gb to 2g.20gb keeps every GPU in MIG mode: no reboot; 3g.40gb is never applied
        assert seen.states == ["pending", "rebooting", "pending", "success", "pending", "success"]
    await settled(
        cluster,
        {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0", "nvidia.com/mig-2g.20gb": "24"},
    )


OWN_CONFIGS = """\
mig-parted-config:
  version: v1
  mig-configs:
    two-sliced:
      - devices: [6, 7]
        mig-enabled: true
        mig-devices: {"1g.10gb": 7}
      - devices: [0, 1, 2, 3, 4, 5]
        mig-enabled: false
    gpu-0-whole:
      - devices: [0]
        mig-enabled: false
    too-many:
      - devices: all
        mig-enabled: true
        mig-devices: {"3g.40gb": 3}
nodes:
  - name: gpu-node-2
    gpu: {count: 8, product: NVIDIA-A100-SXM4-80GB, memory: 81920}
"""


async def test_the_cluster_files_own_configs_cut_gpu_by_gpu_and_pods_keep_their_gpus():
    async with open_cluster("simulated", spec=parse_cluster(OWN_CONFIGS)) as cluster:
        assert cluster.sim is not None
        await cluster.create_pod("default", gpu_pod("holder"))
        await running(cluster, "holder")
        pod = await cluster.pod("default", "holder")
        assert pod is not None
        assert cluster.sim.kubelet.devices.of_pod(pod["metadata"]["uid"]) == {"main": [0]}
        async with watch_node(cluster, NODE) as seen:
            # the pod holds GPU 0, which stays whole: the re-cut goes ahead
            await cluster.label(NODE, CONFIG, "two-sliced")
            assert await seen.until() == ["pending", "rebooting", "pending", "success"]
            await settled(cluster, {"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "14"})
            held = cluster.sim.kubelet.devices.of_pod(pod["metadata"]["uid"])
            assert [cluster.sim.kubelet.devices.gpu_index(NODE, k) for k in held["main"]] == [0]

            seen.clear()
            # no rule for GPUs 1-7: mig-parted leaves them as they are, and the config is not
            # "already applied" (its assert wants every GPU matched)
            await cluster.label(NODE, CONFIG, "gpu-0-whole")
            assert await seen.until() == ["pending", "success"]
            await settled(cluster, {"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "14"})

            seen.clear()
            await cluster.label(NODE, CONFIG, "all-1g.10gb")  # not in this file
            assert await seen.until() == ["failed"]
            await cluster.delete_pod("default", "holder", grace=0)
            await cluster.wait_gone("default", "holder")
            seen.clear()
            # three 3g.40gb do not fit one A100: mig-parted's apply fails
            await cluster.label(NODE, CONFIG, "too-many")
            assert await seen.until() == ["pending", "rebooting", "pending", "failed"]
        await settled(cluster, {"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "14"})


def test_a_cluster_files_mig_parted_config_is_checked():
    with pytest.raises(DocumentError) as bad:
        parse_cluster("mig-parted-config: {mig-configs: {x: [{devices: some}]}}\nnodes: []\n")
    assert [str(p) for p in bad.value.problems] == [
        "<cluster>:1: mig-parted-config: mig-configs.x[0].devices: must be all or a list of "
        "GPU indexes"
    ]
    assert example_cluster_spec().mig_configs is None  # the GPU operator's defaults
