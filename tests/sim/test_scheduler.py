"""The scheduler: where pods land, and the real scheduler's words when they can't."""

from jupyter_gpupool.sim import SimCluster, node_object, parse_cluster
from jupyter_gpupool.sim.scheduler import NodeInfo, find_node, pod_requests


def gpu_pod(gpus, selector=None, tolerations=None, affinity=None, cpu=None):
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    requests = {"cpu": cpu} if cpu else {}
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "nodeSelector": selector or {},
            "tolerations": tolerations or [],
            "affinity": affinity,
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": limits, "requests": requests}}
            ],
        },
    }


def infos(text):
    spec = parse_cluster(text)
    return [NodeInfo.from_node(node_object(n, 0)) for n in spec.nodes]


EXAMPLE_LIKE = """\
nodes:
  - {name: t1, labels: {pool: train}, gpu: {count: 8}}
  - {name: t2, labels: {pool: train}, gpu: {count: 8}}
  - {name: i1, labels: {pool: infer}, gpu: {count: 4}}
  - {name: i2, labels: {pool: infer}, gpu: {count: 4}}
  - {name: d1, labels: {pool: dev}, gpu: {count: 4}}
  - {name: c1, labels: {pool: cpu}}
  - {name: c2, labels: {pool: cpu}}
  - {name: n6, gpu: {count: 4}}
"""


def test_pod_that_fits_goes_to_a_pool_node():
    result = find_node(gpu_pod(2, {"pool": "train"}), infos(EXAMPLE_LIKE))
    assert result.node in ("t1", "t2")
    assert result.feasible == 2


def test_message_matches_the_real_scheduler():
    result = find_node(gpu_pod(16, {"pool": "train"}), infos(EXAMPLE_LIKE))
    assert result.node is None
    assert result.message == (
        "0/8 nodes are available: 6 node(s) didn't match Pod's node affinity/selector, "
        "8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: "
        "2 No preemption victims found for incoming pod, "
        "6 Preemption is not helpful for scheduling."
    )


def test_gpu_already_requested_counts():
    nodes = infos(EXAMPLE_LIKE)
    for n in nodes:
        if n.name in ("i1", "i2"):
            n.requested.gpu = 2
    assert find_node(gpu_pod(2, {"pool": "infer"}), nodes).node in ("i1", "i2")
    result = find_node(gpu_pod(3, {"pool": "infer"}), nodes)
    assert result.node is None
    # i1 and i2, and the CPU nodes c1 and c2
    assert "4 Insufficient nvidia.com/gpu" in result.message


def test_cordoned_notready_and_tainted_nodes_are_skipped_with_reasons():
    nodes = infos(
        """\
nodes:
  - {name: a, gpu: {count: 8}, unschedulable: true}
  - {name: b, gpu: {count: 8}, conditions: {Ready: false}}
  - {name: c, gpu: {count: 8}, taints: [{key: dedicated, value: ml, effect: NoSchedule}]}
  - {name: d, gpu: {count: 8}, conditions: {MemoryPressure: true}}
"""
    )
    result = find_node(gpu_pod(1), nodes)
    assert result.node is None
    assert result.message == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: ml}, "
        "1 node(s) had untolerated taint {node.kubernetes.io/memory-pressure: }, "
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }, "
        "1 node(s) were unschedulable. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    tolerant = gpu_pod(1, tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml"}])
    assert find_node(tolerant, nodes).node == "c"


def test_required_node_affinity_and_preferred_weights():
    nodes = infos(EXAMPLE_LIKE)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "pool", "operator": "In", "values": ["infer", "dev"]}
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["dev"]}]
                    },
                }
            ],
        }
    }
    assert find_node(gpu_pod(1, affinity=affinity), nodes).node == "d1"
    result = find_node(gpu_pod(5, affinity=affinity), nodes)
    assert result.message == (
        "0/8 nodes are available: 5 node(s) didn't match Pod's node affinity/selector, "
        "6 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: "
        "3 No preemption victims found for incoming pod, "
        "5 Preemption is not helpful for scheduling."
    )


def test_cpu_and_memory_requests_count():
    nodes = infos("nodes:\n  - {name: small, cpu: '4', memory: 8Gi}\n")
    assert find_node(gpu_pod(0, cpu="3"), nodes).node == "small"
    result = find_node(gpu_pod(0, cpu="5"), nodes)
    assert result.message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_requests_sum_containers_and_take_the_largest_init_container():
    pod = gpu_pod(2)
    pod["spec"]["containers"].append(
        {"name": "side", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    )
    pod["spec"]["initContainers"] = [
        {"name": "init", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    ]
    req = pod_requests(pod)
    assert (req.gpu, req.cpu_m, req.memory) == (4, 500, 1024**3)


async def test_pending_pod_is_retried_when_capacity_frees():
    spec = parse_cluster("nodes:\n  - {name: g, gpu: {count: 4}}\n")
    async with SimCluster(spec) as cluster:
        store = cluster.store
        first = gpu_pod(3)
        first["metadata"]["name"] = "first"
        store.create("pods", "default", first)
        second = gpu_pod(2)
        second["metadata"]["name"] = "second"
        store.create("pods", "default", second)
        await cluster.wait_for(
            lambda: cluster.pod("default", "first")["status"]["phase"] == "Running"
        )
        await cluster.wait_for(
            lambda: any(
                e["reason"] == "FailedScheduling" for e in cluster.events_for("default", "second")
            )
        )
        cond = next(
            c
            for c in cluster.pod("default", "second")["status"]["conditions"]
            if c["type"] == "PodScheduled"
        )
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
        assert cond["message"] == (
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: "
            "0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
        store.delete("pods", "default", "first")
        await cluster.wait_for(
            lambda: cluster.pod("default", "second")["spec"].get("nodeName") == "g"
        )


async def test_pending_pod_is_retried_when_a_node_is_added_or_uncordoned():
    spec = parse_cluster("nodes:\n  - {name: g, gpu: {count: 4}, unschedulable: true}\n")
    async with SimCluster(spec) as cluster:
        pod = gpu_pod(4)
        cluster.store.create("pods", "default", pod)
        await cluster.wait_for(lambda: cluster.events_for("default", "p"))
        assert cluster.pod("default", "p")["spec"].get("nodeName") is None
        cluster.cordon("g", False)
        await cluster.wait_for(lambda: cluster.pod("default", "p")["spec"].get("nodeName") == "g")
        big = gpu_pod(8)
        big["metadata"]["name"] = "big"
        cluster.store.create("pods", "default", big)
        await cluster.wait_for(lambda: cluster.events_for("default", "big"))
        cluster.add_node({"name": "h", "gpu": {"count": 8}})
        await cluster.wait_for(lambda: cluster.pod("default", "big")["spec"].get("nodeName") == "h")


def test_a_pod_that_may_not_preempt_says_so():
    # kube-scheduler v1.25's words for a pod of a PriorityClass with preemptionPolicy: Never
    pod = gpu_pod(1)
    pod["spec"]["preemptionPolicy"] = "Never"
    result = find_node(pod, infos("nodes:\n  - {name: c}\n"))
    assert result.message == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
