"""A MIG node re-partitioned while the service runs (issue 29): the simulator's MIG manager moves
``nvidia.com/mig.config.state`` through ``pending`` (and ``rebooting`` when a GPU's MIG mode
changes) to ``success`` and changes the node's allocatable only then; meanwhile the service
admits nothing on that node and says why, and afterwards it offers the new instances.

Truth from outside the service: the simulator's Node object (its labels and allocatable) and
the node the simulator's scheduler binds the admitted pod to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from service_kit import start_pod
from waiting import async_wait_for

from jupyter_gpupool.client import AdmissionRejected
from jupyter_gpupool.sim import parse_cluster

POOL = "mig-pool"
#: 2 A100-80GB: 2 x 3g.40gb on the first, the second whole
NODES = [
    {
        "name": "mig-node",
        "labels": {"runwhere.ai/pool": POOL},
        "gpu": {
            "count": 2,
            "type": "A100-80G",
            "product": "NVIDIA-A100-SXM4-80GB",
            "memory": 81920,
            "mig": {"strategy": "mixed", "devices": {"3g.40gb": 2}},
        },
    }
]
#: the second GPU enters MIG mode too, cut in 7 x 1g.10gb: the MIG manager reboots
NEW_LAYOUT = {"strategy": "mixed", "devices": {"3g.40gb": 2, "1g.10gb": 7}}


@pytest.fixture
def sim_cluster_spec():
    return parse_cluster(yaml.safe_dump({"nodes": NODES}))


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    d = tmp_path / "pools"
    d.mkdir()
    doc = {"kind": "pool", "version": "v0.1", "pool": {"name": POOL}, "nodes": {}}
    (d / f"{POOL}.yaml").write_text(yaml.safe_dump(doc))
    return d


def node_now(service) -> dict:
    return service.cluster.store.get("nodes", None, "mig-node")


async def test_a_node_being_repartitioned_takes_nothing_and_then_offers_its_new_instances(
    start_service,
):
    service = await start_service()
    cluster, admin = service.cluster, service.admin()
    cluster.mig_manager.delay = 3600  # each step waits for the test's advance()

    async def shapes() -> dict[str, tuple[int, int]]:
        [row] = [p for p in await admin.pools() if p["name"] == POOL]
        return {s["id"]: (s["total"], s["free"]) for s in row["shapes"]}

    async def node_row() -> dict:
        return next(n for n in await admin.nodes() if n["name"] == "mig-node")

    async def shown(words: str) -> None:
        async def says() -> bool:
            return words in (await node_row())["reasons"]

        await async_wait_for(says, what=f"mig-node shown as {words!r}", timeout=15)

    assert await shapes() == {"whole": (1, 1), "mig-3g.40gb": (2, 2)}
    before = node_now(service)["status"]["allocatable"]

    node = cluster.repartition("mig-node", NEW_LAYOUT, config="custom-1g")
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "custom-1g"
    for state, words in (
        ("pending", "MIG re-partition pending"),
        ("rebooting", "rebooting to change MIG mode"),
        ("pending", "MIG re-partition pending"),
    ):
        labels = node_now(service)["metadata"]["labels"]
        assert labels["nvidia.com/mig.config.state"] == state
        # the device plugin advertises what it did until the MIG manager is done
        assert node_now(service)["status"]["allocatable"] == before
        await shown(words)
        for entry in ({"pool": POOL, "shape": "mig-3g.40gb"}, POOL):
            with pytest.raises(AdmissionRejected) as refused:
                await admin.admit(user="alice", groups=[], pools=[entry], gpus=1)
            assert words in str(refused.value)
        cluster.mig_manager.advance("mig-node")

    after = node_now(service)
    assert after["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    # nvidia.com/gpu stays, at 0: the kubelet keeps a device resource it saw once
    assert {k: v for k, v in after["status"]["allocatable"].items() if "nvidia" in k} == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "7",
        "nvidia.com/mig-3g.40gb": "2",
    }

    async def offered() -> bool:
        return await shapes() == {"mig-3g.40gb": (2, 2), "mig-1g.10gb": (7, 7)}

    await async_wait_for(offered, what="the new instances offered", timeout=15)
    small = await admin.admit(
        user="alice", groups=[], pools=[{"pool": POOL, "shape": "mig-1g.10gb"}], gpus=1
    )
    assert small["node"] == "mig-node"
    pod = await start_pod(cluster, small, "alice-nb")
    assert pod["spec"]["nodeName"] == "mig-node"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
