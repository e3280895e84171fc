"""Objects read through the API of both clusters at once: the simulated one, and the real control
plane with the simulator's nodes registered (sim.remote), after its controllers have had their
say. What the product reads of nodes and pods must be the same on both."""

from __future__ import annotations

from typing import Any

import pytest
from clusters import open_cluster

pytestmark = pytest.mark.realk8s


def seen(node: dict[str, Any]) -> dict[str, Any]:
    """What the product reads of a node: labels, taints, unschedulable, capacity, allocatable
    and its conditions' statuses."""
    status = node.get("status") or {}
    return {
        "labels": node["metadata"].get("labels") or {},
        "taints": sorted(
            (t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []
        ),
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
        "capacity": status.get("capacity"),
        "allocatable": status.get("allocatable"),
        "conditions": {c["type"]: c["status"] for c in status.get("conditions") or []},
    }


async def test_the_nodes_read_the_same_on_both_clusters(realk8s_kubeconfig):
    async with open_cluster("simulated") as sim:
        simulated = {n["metadata"]["name"]: seen(n) for n in await sim.list_nodes()}
    async with open_cluster("real", realk8s_kubeconfig=realk8s_kubeconfig) as real:
        actual = {n["metadata"]["name"]: seen(n) for n in await real.list_nodes()}
    assert sorted(simulated) == sorted(actual)
    for name, node in actual.items():
        assert simulated[name] == node, name


#: Quantities as a user writes them; the API server stores each in its canonical form.
WRITTEN = {
    "cpu": "1000m",
    "memory": "1024Mi",
    "ephemeral-storage": "1.5Gi",
    "example.com/dongle": "12e6",
    "nvidia.com/gpu": "2",
}


def quantity_pod(name: str) -> dict[str, Any]:
    containers = [
        {"name": "a", "image": "x", "resources": {"limits": WRITTEN}},
        {"name": "b", "image": "x", "resources": {"requests": {"cpu": "0.5", "memory": "2048"}}},
    ]
    return {"metadata": {"name": name}, "spec": {"containers": containers}}


async def test_pod_quantities_come_back_as_the_api_server_writes_them(realk8s_kubeconfig):
    found = {}
    for kind in ("simulated", "real"):
        async with open_cluster(kind, realk8s_kubeconfig=realk8s_kubeconfig) as cluster:
            pod = await cluster.create_pod("default", quantity_pod("quantities"))
            found[kind] = [c["resources"] for c in pod["spec"]["containers"]]
    assert found["simulated"] == found["real"]
    # and they are not what was written (else this test shows nothing)
    assert found["real"][0]["limits"] != WRITTEN
