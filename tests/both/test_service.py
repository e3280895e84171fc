"""The gpupool service on both clusters (tests/clusters.py): admissions, the race of many
concurrent admissions, reclaim, and an API server restart in the middle.

Every check compares the service with what the cluster's API says in a fresh list (the pods the
scheduler really bound, the nodes' allocatable GPUs), not with the service's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest
from clusters import Cluster
from service_kit import pod_for
from waiting import async_wait_for

from jupyter_gpupool.client import AdmissionRejected, GPUPoolClient

pytestmark = pytest.mark.timeout(180)


async def start_pod(cluster: Cluster, admission: dict[str, Any], name: str) -> dict[str, Any]:
    """Create the admission's pod and wait until the scheduler has bound it and it runs."""
    await cluster.create_pod("default", pod_for(admission, name))

    async def running() -> dict[str, Any] | None:
        pod = await cluster.pod("default", name)
        return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

    return await async_wait_for(running, what=f"pod {name} to run", timeout=30)


def gpu_nodes(pods: list[dict[str, Any]]) -> Counter[str]:
    """GPUs asked by the running pods, by node: what the scheduler placed."""
    out: Counter[str] = Counter()
    for p in pods:
        limits = (p["spec"]["containers"][0].get("resources") or {}).get("limits") or {}
        if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running":
            out[p["spec"]["nodeName"]] += int(limits.get("nvidia.com/gpu", 0))
    return out


async def test_admissions_take_the_first_pool_with_room_and_pods_land_there(cluster, start_service):
    service = await start_service(cluster)
    admin = service.admin()
    first = await admin.admit(user="alice", groups=["ml-research"], pools=["dev-pool"], gpus=2)
    assert (first["pool"], first["node"]) == ("dev-pool", "gpu-node-5")
    pod = await start_pod(cluster, first, "alice-nb")
    # the scheduler, told only the admission's overrides, put it where the service said
    assert pod["spec"]["nodeName"] == "gpu-node-5"
    # a student takes dev-pool's other 2 GPUs: the next asker goes to the next pool in its list
    student = await admin.admit(user="sam", groups=["students"], pools=["dev-pool"], gpus=2)
    assert student["node"] == "gpu-node-5"
    await start_pod(cluster, student, "sam-nb")
    second = await admin.admit(
        user="erin", groups=["ml-research"], pools=["dev-pool", "inference-pool"], gpus=2
    )
    assert second["pool"] == "inference-pool"
    pod = await start_pod(cluster, second, "erin-nb")
    assert pod["spec"]["nodeName"] == second["node"]
    picture = await service.settled()
    assert picture["users"] == {"alice": 2, "sam": 2, "erin": 2}
    with pytest.raises(AdmissionRejected, match="dev-pool"):
        await admin.admit(user="dave", pools=["dev-pool"], gpus=1)


async def test_many_concurrent_admissions_never_take_one_gpu_more_than_there_is(
    cluster, start_service
):
    """60 users ask for 1 to 4 GPUs in training-pool (16 GPUs) at once, then every admitted
    pod is created: the real scheduler must be able to place every one of them."""
    service = await start_service(cluster)
    users = [f"u{i:02d}" for i in range(60)]
    rng = random.Random(15)
    asks = {u: rng.choice([1, 2, 4]) for u in users}
    clients = {
        u: GPUPoolClient(service.url, service.hub.user(u, ["ml-research"]), max_clients=2)
        for u in users
    }

    async def one(user: str) -> dict[str, Any] | None:
        try:
            return await clients[user].admit(pools=["training-pool"], gpus=asks[user])
        except AdmissionRejected:
            return None

    try:
        answers = await asyncio.gather(*(one(u) for u in users))
    finally:
        for c in clients.values():
            await c.close()
    admitted = [a for a in answers if a is not None]
    by_node = Counter[str]()
    for a in admitted:
        by_node[a["node"]] += a["gpus"]
    assert admitted and all(n <= 8 for n in by_node.values()), by_node
    # ml-research's limit in training-pool is 16: the pool, not the quota, is what binds here
    assert sum(by_node.values()) <= 16
    for a in admitted:
        await cluster.create_pod("default", pod_for(a, f"{a['user']}-nb"))

    async def all_placed() -> Counter[str] | None:
        pods = await cluster.list_pods("default")
        placed = gpu_nodes(pods)
        return placed if sum(placed.values()) == sum(by_node.values()) else None

    placed = await async_wait_for(all_placed, what="every admitted pod to run", timeout=60)
    assert placed == by_node
    await service.settled()


async def test_reclaim_stops_a_borrower_and_the_newcomer_gets_its_gpus(cluster, start_service):
    service = await start_service(cluster)
    admin = service.admin()
    # dave and carol borrow gpu-node-1 (no guarantee of their own), bob fills gpu-node-2
    d = await admin.admit(user="dave", pools=["training-pool"], gpus=4)
    c = await admin.admit(user="carol", groups=["ml-ops"], pools=["training-pool"], gpus=4)
    assert d["over_quota"] and c["over_quota"] and d["node"] == c["node"]
    await start_pod(cluster, d, "dave-nb")
    await start_pod(cluster, c, "carol-nb")
    b = await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=8)
    await start_pod(cluster, b, "bob-nb")
    await service.settled()

    async def stop(user: str, server: str) -> int:
        # what JupyterHub does when asked to stop a server: KubeSpawner deletes its pod
        await cluster.delete_pod("default", f"{user}-nb")
        return 202

    service.hub.on_stop = stop
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=4)
    assert a["pool"] == "training-pool" and a["node"] == d["node"]
    [victim] = a["reclaimed"]
    assert victim["user"] in ("dave", "carol") and victim["gpus"] == 4
    await cluster.wait_gone("default", f"{victim['user']}-nb")
    other = "carol" if victim["user"] == "dave" else "dave"
    assert await cluster.pod("default", f"{other}-nb") is not None
    # alice's pod fits where the victim was: the scheduler agrees the GPUs are free
    pod = await start_pod(cluster, a, "alice-nb")
    assert pod["spec"]["nodeName"] == d["node"]
    picture = await service.settled()
    assert picture["users"] == {other: 4, "bob": 8, "alice": 4}


async def test_an_api_server_restart_in_the_middle_leaves_usage_equal_to_a_fresh_list(
    cluster, start_service
):
    service = await start_service(cluster)
    admin = service.admin()
    before = await admin.admit(user="alice", groups=["ml-research"], pools=["dev-pool"], gpus=2)
    await start_pod(cluster, before, "alice-nb")
    await service.settled()
    relists = service.ctx.view.stats["lists"]
    await cluster.restart_apiserver()
    # changes while the service's watches are broken and after: a pod goes, a node moves pools,
    # another pod comes
    await cluster.delete_pod("default", "alice-nb")
    await cluster.label("gpu-node-4", "runwhere.ai/pool", "dev-pool")
    after = await admin.admit(user="sam", groups=["students"], pools=["dev-pool"], gpus=2)
    await start_pod(cluster, after, "sam-nb")
    picture = await service.settled(timeout=60)
    assert picture["users"] == {"sam": 2}
    dev = next(p for p in (await admin.pools()) if p["name"] == "dev-pool")
    assert dev["gpu_total"] == 8  # gpu-node-5 and gpu-node-4 now
    assert service.ctx.view.stats["lists"] > relists  # it listed again: the watch broke
