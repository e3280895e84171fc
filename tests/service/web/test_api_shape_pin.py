"""A pool whose nodes offer ``nvidia.com/gpu`` in two shapes (whole A10s, time-sliced A10s): the
admitted pod is pinned to nodes of its shape, so the scheduler cannot put a whole-GPU server on
a replica when its node filled up meanwhile (issue 29).

Truth from outside the service: the simulator's scheduler, which binds by the pod's resources
and node selector, and its Unschedulable condition.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from service_kit import pod_for
from shaped_cluster import one_pool_dir, spec_of
from waiting import async_wait_for

POOL = "a10-pool"
NODES = [
    {
        "name": "whole-a10",
        "labels": {"runwhere.ai/pool": POOL},
        "gpu": {"count": 1, "type": "A10", "product": "NVIDIA-A10", "memory": 23028},
    },
    {
        "name": "shared-a10",
        "labels": {"runwhere.ai/pool": POOL},
        "gpu": {
            "count": 1,
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


async def test_a_whole_gpu_pod_waits_for_a_whole_gpu_instead_of_taking_a_replica(start_service):
    service = await start_service()
    cluster = service.cluster
    admitted = await service.admin().admit(user="alice", groups=[], pools=[POOL], gpus=1)
    assert admitted["node"] == "whole-a10"
    # another tool's pod takes the whole A10 before alice's pod is made
    other = {
        "metadata": {"name": "batch", "namespace": "default"},
        "spec": {
            "nodeName": "whole-a10",
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }
    cluster.store.create("pods", "default", other)
    cluster.store.create("pods", "default", pod_for(admitted, "alice-nb"))

    def unschedulable() -> bool:
        pod = cluster.pod("default", "alice-nb") or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c.get("reason") == "Unschedulable" for c in conditions)

    await async_wait_for(unschedulable, what="alice's pod found no whole A10", timeout=15)
    assert not (cluster.pod("default", "alice-nb") or {}).get("spec", {}).get("nodeName")
