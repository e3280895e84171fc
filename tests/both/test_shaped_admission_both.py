"""Shaped admissions through the service on both clusters (tests/clusters.py), on the demo
cluster (examples/cluster.yaml): a MIG instance of training-pool's MIG A100 (gpu-node-mig-1)
and a replica of inference-pool's time-sliced A10 (gpu-node-shared-1). The pod made from each
answer's overrides is bound by the scheduler (kube-scheduler v1.25 on the real control plane,
which counts the extended resources the nodes' status advertises) to the node the service
named; a whole GPU of the same pool never lands on the time-sliced node, not even when the
node it was admitted on is full by the time its pod comes.

Truth from outside the service: the node each pod is bound to, read back from the cluster's API.
"""

from __future__ import annotations

from typing import Any

import pytest
from clusters import Cluster
from service_kit import pod_for
from waiting import async_wait_for

pytestmark = pytest.mark.timeout(180)


async def bound_to(cluster: Cluster, admission: dict[str, Any], name: str) -> dict[str, Any]:
    """Create the admission's pod; the pod once the scheduler has bound it."""
    await cluster.create_pod("default", pod_for(admission, name))

    async def bound() -> dict[str, Any] | None:
        pod = await cluster.pod("default", name)
        return pod if pod and (pod.get("spec") or {}).get("nodeName") else None

    return await async_wait_for(bound, what=f"pod {name} to be bound", timeout=60)


def filler(node: str, gpus: int) -> dict[str, Any]:
    """A pod that is not a server and takes ``gpus`` GPUs of ``node``."""
    return {
        "metadata": {"name": f"filler-{node}"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
    }


async def running(cluster: Cluster, name: str) -> bool:
    pod = await cluster.pod("default", name)
    return bool(pod and (pod.get("status") or {}).get("phase") == "Running")


async def failed_scheduling(cluster: Cluster, name: str) -> str | None:
    events = await cluster.events_for("default", name)
    return next((e["message"] for e in events if e.get("reason") == "FailedScheduling"), None)


def limits(pod: dict[str, Any]) -> dict[str, str]:
    return pod["spec"]["containers"][0]["resources"]["limits"]


async def test_a_mig_instance_and_a_shared_replica_are_bound_where_the_service_said(
    cluster, start_service
):
    service = await start_service(cluster)
    admin = service.admin()
    rows = {p["name"]: p for p in await admin.pools()}
    training = {s["id"]: s["free"] for s in rows["training-pool"]["shapes"]}
    assert training["mig-1g.10gb"] == 2 and training["mig-3g.40gb"] == 1
    assert {s["id"]: s["free"] for s in rows["inference-pool"]["shapes"]}["shared-4"] == 4

    mig = await admin.admit(
        user="alice", pools=[{"pool": "training-pool", "shape": "mig-1g.10gb"}], gpus=1
    )
    assert (mig["node"], mig["resource"]) == ("gpu-node-mig-1", "nvidia.com/mig-1g.10gb")
    pod = await bound_to(cluster, mig, "alice-mig")
    assert pod["spec"]["nodeName"] == "gpu-node-mig-1"
    assert limits(pod) == {"nvidia.com/mig-1g.10gb": "1"}

    shared = await admin.admit(
        user="bob", pools=[{"pool": "inference-pool", "shape": "shared-4"}], gpus=1
    )
    assert (shared["node"], shared["resource"]) == ("gpu-node-shared-1", "nvidia.com/gpu")
    pod = await bound_to(cluster, shared, "bob-shared")
    assert pod["spec"]["nodeName"] == "gpu-node-shared-1"

    # a whole GPU of the same pool asks nvidia.com/gpu too, and goes to a whole A10 only
    whole_a10 = ("gpu-node-3", "gpu-node-4")
    whole = await admin.admit(
        user="carol", groups=["ml-research"], pools=["inference-pool"], gpus=1
    )
    assert whole["node"] in whole_a10
    pod = await bound_to(cluster, whole, "carol-whole")
    assert pod["spec"]["nodeName"] == whole["node"]
    # (inference-pool lends nothing: carol and dave use ml-research's guarantee there)
    # ... even when the whole A10s are full by the time the pod comes (another workload took
    # them): the replicas free on the time-sliced node are not whole GPUs
    late = await admin.admit(user="dave", groups=["ml-research"], pools=["inference-pool"], gpus=1)
    assert late["node"] in whole_a10
    for node in whole_a10:
        await cluster.create_pod("default", filler(node, 4 - (node == whole["node"])))
        await async_wait_for(
            lambda node=node: running(cluster, f"filler-{node}"),
            what=f"the filler pod of {node} to run",
            timeout=60,
        )
    await cluster.create_pod("default", pod_for(late, "dave-whole"))
    words = await async_wait_for(
        lambda: failed_scheduling(cluster, "dave-whole"),
        what="dave-whole to fail scheduling",
        timeout=60,
    )
    assert "didn't match Pod's node affinity/selector" in words
    pod = await cluster.pod("default", "dave-whole")
    assert pod is not None and "nodeName" not in pod["spec"]
