"""Partitioned GPU nodes on the simulator: MIG (mixed and single), time-slicing, MPS and HAMi.

A cluster file's ``gpu.mig``, ``gpu.sharing`` or ``gpu.hami`` makes a node advertise what
NVIDIA's device plugin and GFD (or HAMi) would, so the product's reader (``core.usage.shapes.
node_offer``) reads back the configured shapes from the Node the API serves; the scheduler and
kubelet count those resources, the kubelet hands out MIG device UUIDs and shared GPUs' UUIDs,
and the DCGM page reports MIG instances as dcgm-exporter does.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import tornado.httpclient
from prometheus_client.parser import text_string_to_metric_families
from waiting import async_wait_for

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.usage.shapes import node_offer
from jupyter_gpupool.sim import SimCluster, parse_cluster

CLUSTER = """\
nodes:
  - name: mig-mixed
    gpu:
      count: 8
      product: NVIDIA-A100-SXM4-80GB
      memory: 81920
      mig: {strategy: mixed, devices: {"3g.40gb": 2, "2g.20gb": 3}}
  - name: mig-single
    gpu:
      count: 2
      product: NVIDIA-A100-SXM4-80GB
      memory: 81920
      mig: {strategy: single, profile: "1g.10gb"}
  - name: sliced
    gpu: {count: 2, product: NVIDIA-A10, memory: 23028,
          sharing: {strategy: time-slicing, replicas: 4}}
  - name: mps
    gpu: {count: 2, product: NVIDIA-A10, memory: 23028,
          sharing: {strategy: mps, replicas: 4, rename: true}}
  - name: hami
    gpu: {count: 2, product: NVIDIA-A10, memory: 23028, hami: {split: 10}}
  - name: whole
    gpu: {count: 2, product: NVIDIA-A10, memory: 23028}
"""

# node -> {shape id: (resource, count, memory MiB)}, as node_offer must read the Node back
EXPECTED = {
    "mig-mixed": {
        "whole": ("nvidia.com/gpu", 6, 81920),
        "mig-3g.40gb": ("nvidia.com/mig-3g.40gb", 2, 40192),
        "mig-2g.20gb": ("nvidia.com/mig-2g.20gb", 3, 19968),
    },
    "mig-single": {"mig-1g.10gb": ("nvidia.com/gpu", 14, 9856)},
    "sliced": {"shared-4": ("nvidia.com/gpu", 8, None)},
    "mps": {"mps-4": ("nvidia.com/gpu.shared", 8, 23028 // 4)},
    "hami": {"hami-10": ("nvidia.com/gpu", 20, 23028 // 10)},
    "whole": {"whole": ("nvidia.com/gpu", 2, 23028)},
}


@pytest.fixture
async def cluster() -> Any:
    async with SimCluster(parse_cluster(CLUSTER), run_processes=True) as c:
        yield c


@pytest.mark.parametrize("node", sorted(EXPECTED))
async def test_node_offer_reads_back_each_configured_shape_from_the_served_node(cluster, node):
    obj = cluster.store.get("nodes", None, node)
    offer = node_offer(obj["metadata"]["labels"], obj["status"]["allocatable"])
    got = {o.shape.id: (o.shape.resource, o.count, o.shape.memory_mib) for o in offer.shapes}
    assert got == EXPECTED[node]
    assert offer.admits


def test_a_whole_gpu_node_carries_exactly_the_labels_and_resources_it_did():
    (node,) = parse_cluster(
        "nodes: [{name: n, gpu: {count: 4, type: A10-24G, product: NVIDIA-A10, memory: 23028}}]"
    ).nodes
    gpu_labels = {k: v for k, v in node.all_labels().items() if "gpu" in k}
    assert gpu_labels == {
        "runwhere.ai/gpu-type": "A10-24G",
        "nvidia.com/gpu.product": "NVIDIA-A10",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.memory": "23028",
    }
    assert node.capacity() == {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"}


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        (
            '{count: 1, product: NVIDIA-A100-SXM4-80GB, mig: {strategy: mixed, devices: {"3g.40gb": 3}}}',
            "nodes[0].gpu.mig: 3 x 3g.40gb need 2 GPUs of A100 80GB (7 compute and 8 memory "
            "slices each), but the node has 1",
        ),
        (
            '{count: 1, product: NVIDIA-A100-SXM4-80GB, mig: {strategy: single, profile: "1g.5gb"}}',
            "nodes[0].gpu.mig: '1g.5gb' is not a MIG profile of the A100 80GB (1g.10gb, "
            "2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)",
        ),
        (
            '{count: 1, product: NVIDIA-A10, mig: {strategy: single, profile: "1g.10gb"}}',
            "nodes[0].gpu.mig: MIG needs gpu.product to name a card the simulator knows "
            "(A100 80GB, A100 40GB, A30), not 'NVIDIA-A10'",
        ),
        (
            "{count: 1, sharing: {strategy: time-slicing, replicas: 1}}",
            "nodes[0].gpu.sharing.replicas: must be a whole number >= 2 (the device plugin "
            "refuses fewer), not 1",
        ),
        (
            "{count: 1, sharing: {strategy: round-robin, replicas: 2}}",
            "nodes[0].gpu.sharing.strategy: must be one of time-slicing, mps",
        ),
        (
            "{count: 1, hami: {split: 4}, sharing: {strategy: mps, replicas: 2}}",
            "nodes[0].gpu.hami: a node's GPUs are cut one way: sharing and hami given",
        ),
        (
            "{count: 0, hami: {split: 4}}",
            "nodes[0].gpu.hami: needs gpu.count: there are no GPUs to cut",
        ),
    ],
)
def test_a_partitioning_that_cannot_be_is_reported_with_file_line_and_field(gpu, message):
    text = f"nodes:\n  - name: n\n    gpu: {gpu}\n"
    with pytest.raises(DocumentError) as err:
        parse_cluster(text, "c.yaml")
    assert str(err.value).splitlines() == [f"c.yaml:3: {message}"]


def pod(name: str, node: str | None, resources: dict[str, str], show: bool = True) -> dict:
    container: dict[str, Any] = {
        "name": "main",
        "image": "python",
        "resources": {"limits": resources},
    }
    if show:
        container["command"] = [
            sys.executable,
            "-c",
            "import os, time; print('GPUS=' + os.environ.get('NVIDIA_VISIBLE_DEVICES', ''),"
            " flush=True); time.sleep(120)",
        ]
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def printed_gpus(cluster: SimCluster, name: str) -> list[str]:
    def log() -> str | None:
        p = cluster.pod("default", name)
        text = cluster.kubelet.read_log(p) if p else ""
        return text if "GPUS=" in text else None

    text = await async_wait_for(log, what=f"pod {name} to print its GPUs", timeout=15)
    value = text.split("GPUS=", 1)[1].splitlines()[0]
    return value.split(",") if value else []


def phase(cluster: SimCluster, name: str) -> str | None:
    p = cluster.pod("default", name)
    return ((p or {}).get("status") or {}).get("phase")


async def test_mig_pods_fit_only_where_an_instance_is_free_and_get_mig_device_uuids(cluster):
    for i in range(3):
        cluster.store.create("pods", "default", pod(f"m{i}", None, {"nvidia.com/mig-3g.40gb": "1"}))
    await async_wait_for(
        lambda: phase(cluster, "m0") == "Running" and phase(cluster, "m1") == "Running",
        what="two 3g.40gb pods to run",
        timeout=15,
    )
    assert cluster.pod("default", "m0")["spec"]["nodeName"] == "mig-mixed"
    last = cluster.pod("default", "m2")
    assert "nodeName" not in last["spec"]
    messages = [e["message"] for e in cluster.events_for("default", "m2")]
    assert messages == [
        "0/6 nodes are available: 6 Insufficient nvidia.com/mig-3g.40gb. preemption: 0/6 nodes "
        "are available: 6 No preemption victims found for incoming pod."
    ]
    uuids = [(await printed_gpus(cluster, n))[0] for n in ("m0", "m1")]
    assert all(u.startswith("MIG-") for u in uuids) and len(set(uuids)) == 2, uuids


async def test_time_sliced_pods_share_their_gpus_uuid(cluster):
    for i in range(5):
        cluster.store.create("pods", "default", pod(f"s{i}", "sliced", {"nvidia.com/gpu": "1"}))
    got = [await printed_gpus(cluster, f"s{i}") for i in range(5)]
    assert all(len(g) == 1 and g[0].startswith("GPU-") for g in got), got
    # four replicas of the first GPU, then the second GPU
    assert len({g[0] for g in got[:4]}) == 1
    assert got[4] != got[0]


def series(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


async def test_the_dcgm_page_reports_mig_instances_by_profile_and_activity(cluster):
    cluster.store.create("pods", "default", pod("m", "mig-mixed", {"nvidia.com/mig-2g.20gb": "1"}))
    await async_wait_for(lambda: phase(cluster, "m") == "Running", what="m to run", timeout=15)
    cluster.set_gpu_utilization("default", "m", 80)
    samples = series(cluster.dcgm_metrics("mig-mixed"))
    active = [(labels, v) for name, labels, v in samples if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    # two 3g.40gb on GPU 0, three 2g.20gb on GPU 1
    assert sorted((lab["gpu"], lab["GPU_I_PROFILE"], lab["GPU_I_ID"]) for lab, _ in active) == [
        ("0", "3g.40gb", "1"),
        ("0", "3g.40gb", "2"),
        ("1", "2g.20gb", "1"),
        ("1", "2g.20gb", "2"),
        ("1", "2g.20gb", "3"),
    ]
    held = [(lab, v) for lab, v in active if lab.get("pod") == "m"]
    assert [(lab["GPU_I_PROFILE"], v) for lab, v in held] == [("2g.20gb", 0.8)]
    util = [labels for name, labels, _ in samples if name == "DCGM_FI_DEV_GPU_UTIL"]
    # the six whole GPUs report utilization; no MIG instance does
    assert sorted(lab["gpu"] for lab in util) == ["2", "3", "4", "5", "6", "7"]
    assert all("GPU_I_ID" not in lab for lab in util)
    used = [
        v
        for name, labels, v in samples
        if name == "DCGM_FI_DEV_FB_USED" and labels.get("pod") == "m"
    ]
    assert used == [19968 * 80 // 100]


async def test_time_sliced_pods_share_their_gpus_series(cluster):
    for name, pct in (("a", 30), ("b", 50)):
        cluster.store.create("pods", "default", pod(name, "sliced", {"nvidia.com/gpu": "1"}))
        await async_wait_for(lambda n=name: phase(cluster, n) == "Running", what=name, timeout=15)
        cluster.set_gpu_utilization("default", name, pct)
    util = [
        (labels, v)
        for name, labels, v in series(cluster.dcgm_metrics("sliced"))
        if name == "DCGM_FI_DEV_GPU_UTIL"
    ]
    by_pod = {lab.get("pod"): (lab["gpu"], lab["UUID"], v) for lab, v in util}
    assert by_pod["a"] == by_pod["b"]
    assert by_pod["a"][0] == "0" and by_pod["a"][2] == 80
    assert by_pod[None][0] == "1"  # the other GPU, free


async def put(cluster: SimCluster, path: str, body: Any) -> tuple[int, Any]:
    resp = await tornado.httpclient.AsyncHTTPClient().fetch(
        cluster.url + path,
        method="PUT",
        body=json.dumps(body),
        headers={"Content-Type": "application/json", **cluster.auth_headers},
        raise_error=False,
        ssl_options=cluster.ssl_context,
    )
    return resp.code, json.loads(resp.body)


def mig_states(cluster: SimCluster, node: str) -> list[str]:
    """Every value the node's nvidia.com/mig.config.state label took, as a watcher saw them."""
    seen: list[str] = []

    def listen(ev: Any) -> None:
        if ev.resource == "nodes" and ev.obj["metadata"]["name"] == node:
            state = ev.obj["metadata"]["labels"].get("nvidia.com/mig.config.state")
            if not seen or seen[-1] != state:
                seen.append(state)

    cluster.store.listeners.append(listen)
    return seen


async def test_repartitioning_goes_through_pending_to_success_and_changes_allocatable(cluster):
    """GPU 1 leaves MIG mode (its 2g.20gb go): the simulated MIG manager reboots for it."""
    states = mig_states(cluster, "mig-mixed")
    code, body = await put(
        cluster,
        "/sim/v1/nodes/mig-mixed/mig",
        {"mig": {"strategy": "mixed", "devices": {"1g.10gb": 7}}, "config": "all-1g"},
    )
    assert code == 200, body
    assert body["metadata"]["labels"]["nvidia.com/mig.config.state"] == "pending"
    await async_wait_for(lambda: states[-1] == "success", what="success", timeout=15)
    assert states == ["pending", "rebooting", "pending", "success"]
    node = cluster.store.get("nodes", None, "mig-mixed")
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g"
    offer = node_offer(node["metadata"]["labels"], node["status"]["allocatable"])
    assert {o.shape.id: o.count for o in offer.shapes} == {"whole": 7, "mig-1g.10gb": 7}
    assert offer.admits
    cluster.store.create("pods", "default", pod("one", None, {"nvidia.com/mig-1g.10gb": "1"}))
    await async_wait_for(lambda: phase(cluster, "one") == "Running", what="one", timeout=15)
    assert (await printed_gpus(cluster, "one"))[0].startswith("MIG-")


async def test_repartitioning_gpus_in_use_fails_and_leaves_the_layout(cluster):
    cluster.store.create(
        "pods", "default", pod("busy", "mig-mixed", {"nvidia.com/mig-3g.40gb": "1"})
    )
    await async_wait_for(lambda: phase(cluster, "busy") == "Running", what="busy", timeout=15)
    before = cluster.store.get("nodes", None, "mig-mixed")["status"]["allocatable"]
    states = mig_states(cluster, "mig-mixed")
    code, body = await put(
        cluster,
        "/sim/v1/nodes/mig-mixed/mig",
        {"mig": {"strategy": "mixed", "devices": {"1g.10gb": 7}}},
    )
    assert code == 409, body
    assert "in use (by default/busy)" in body["message"]
    assert states == ["pending", "failed"]
    node = cluster.store.get("nodes", None, "mig-mixed")
    assert node["status"]["allocatable"] == before
    offer = node_offer(node["metadata"]["labels"], node["status"]["allocatable"])
    assert offer.repartitioning == "MIG re-partition failed"


async def test_a_layout_that_does_not_fit_is_refused_before_anything_changes(cluster):
    states = mig_states(cluster, "mig-mixed")
    code, body = await put(
        cluster, "/sim/v1/nodes/mig-mixed/mig", {"mig": {"strategy": "single", "profile": "9g.1gb"}}
    )
    assert code == 400
    assert "'9g.1gb' is not a MIG profile of the A100 80GB" in body["message"]
    assert states == []
