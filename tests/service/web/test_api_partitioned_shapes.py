"""A pool of partitioned nodes through the API (issue 29): the simulator makes a MIG node (mixed
strategy, some GPUs left whole) and a time-sliced node as NVIDIA's device plugin and GPU Feature
Discovery would; ``GET api/v1/pools`` lists each shape with its free counts, pods using MIG
instances and replicas are counted, and a node being re-partitioned takes nothing new.

Truth from outside the service: the cluster file the test writes (what each node offers) and the
pods it makes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shaped_cluster import one_pool_dir, spec_of
from waiting import async_wait_for

from jupyter_gpupool.client import AdmissionRejected

POOL = "slice-pool"
NODES = [
    {
        "name": "mig-node",
        "labels": {"runwhere.ai/pool": POOL},
        # 2 A100-80GB: 2 x 3g.40gb on the first (6 of its 7 compute slices), 1g.10gb on none, the
        # second GPU left whole
        "gpu": {
            "count": 2,
            "type": "A100-80G",
            "product": "NVIDIA-A100-SXM4-80GB",
            "memory": 81920,
            "mig": {"strategy": "mixed", "devices": {"3g.40gb": 2}},
        },
    },
    {
        "name": "shared-node",
        "labels": {"runwhere.ai/pool": POOL},
        "gpu": {
            "count": 2,
            "type": "A10",
            "product": "NVIDIA-A10",
            "memory": 23028,
            "sharing": {"strategy": "time-slicing", "replicas": 4},
        },
    },
]


@pytest.fixture
def sim_cluster_spec():
    return spec_of(NODES)


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    return one_pool_dir(tmp_path, POOL)


def pod(name: str, node: str, resource: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {"name": "nb", "image": "jupyter/base", "resources": {"limits": {resource: "1"}}}
            ],
        },
    }


def by_id(row: dict) -> dict[str, dict]:
    return {(s["id"], s["model"]): s for s in row["shapes"]}


async def test_a_pool_of_mig_and_time_sliced_nodes_lists_each_shape_with_free_counts(
    start_service,
):
    service = await start_service()
    admin = service.admin()
    [row] = [p for p in await admin.pools() if p["name"] == POOL]
    shapes = by_id(row)
    mig = shapes[("mig-3g.40gb", "A100-80G")]
    assert (mig["kind"], mig["resource"]) == ("mig", "nvidia.com/mig-3g.40gb")
    assert (mig["equivalent"], mig["total"], mig["free"]) == ("3/7", 2, 2)
    assert mig["text"] == "MIG 3g.40gb: 2 free"
    whole = shapes[("whole", "A100-80G")]
    assert (whole["total"], whole["free"], whole["largest_free"]) == (1, 1, 1)
    [shared] = [s for s in row["shapes"] if s["kind"] == "shared-time-slicing"]
    assert (shared["equivalent"], shared["total"], shared["free"]) == ("1/4", 8, 8)
    assert "no memory isolation" in shared["text"] or "nothing" in shared["isolates"]

    # a pod using one 3g.40gb instance and one using a replica: counted where they run
    for name, node, resource in (
        ("mig-nb", "mig-node", "nvidia.com/mig-3g.40gb"),
        ("shared-nb", "shared-node", "nvidia.com/gpu"),
    ):
        service.cluster.store.create("pods", "default", pod(name, node, resource))

    async def row_now() -> dict:
        return next(p for p in await admin.pools() if p["name"] == POOL)

    async def counted() -> bool:
        shapes = by_id(await row_now())
        return (
            shapes[("mig-3g.40gb", "A100-80G")]["free"] == 1
            and shapes[("shared-4", "A10")]["free"] == 7
        )

    await async_wait_for(counted, what="the two pods counted on their shapes", timeout=15)
    shapes = by_id(await row_now())
    assert shapes[("whole", "A100-80G")]["free"] == 1  # the whole GPU is untouched

    # NVIDIA's MIG manager starts a re-partition: the node takes nothing new, and says why;
    # once it reports success, the node's instances are offered again
    service.cluster.label_node("mig-node", "nvidia.com/mig.config.state", "pending")

    async def node_row() -> dict:
        return next(n for n in await admin.nodes() if n["name"] == "mig-node")

    async def blocked() -> bool:
        return "MIG re-partition pending" in str(await node_row())

    await async_wait_for(blocked, what="the MIG node shown re-partitioning", timeout=15)
    # its whole A100 is the pool's only one: no A100 server is admitted meanwhile
    with pytest.raises(AdmissionRejected):
        await admin.admit(user="alice", groups=[], pools=[POOL], gpus=1, gpu_type="A100-80G")
    service.cluster.label_node("mig-node", "nvidia.com/mig.config.state", "success")

    async def back() -> bool:
        return "MIG re-partition" not in str(await node_row())

    await async_wait_for(back, what="the MIG node offered again", timeout=15)
    a = await admin.admit(user="alice", groups=[], pools=[POOL], gpus=1, gpu_type="A100-80G")
    assert a["node"] == "mig-node"
