"""The scheduler's refusal in its own words, on the simulator and on a real kube-scheduler v1.25.

The same five nodes on both clusters (a 4-GPU and a 1-GPU node, a tainted one, a cordoned one and
a small CPU-only one) and one pod per scenario that fits none of them. The FailedScheduling
event's message (and the PodScheduled condition's) must be the real scheduler's, word for word:
every failing filter of every node counted (a node fails several at once, so the counts add up to
more than the node count), sorted as strings, then the preemption sentence. The expected messages
were read from the real cluster.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import realk8s

from jupyter_gpupool.sim import ClusterSpec, parse_cluster

TAINT = {"key": "gpu", "value": "broken", "effect": "NoSchedule"}

SIM_NODES = """\
nodes:
  - {name: big, cpu: "8", memory: 32Gi, labels: {pool: a}, gpu: {count: 4}}
  - {name: small, cpu: "8", memory: 32Gi, labels: {pool: b}, gpu: {count: 1}}
  - name: tainted
    cpu: "8"
    memory: 32Gi
    labels: {pool: a}
    gpu: {count: 8}
    taints: [{key: gpu, value: broken, effect: NoSchedule}]
  - {name: cordoned, cpu: "8", memory: 32Gi, labels: {pool: a}, gpu: {count: 8}, unschedulable: true}
  - {name: plain, cpu: "2", memory: 4Gi}
"""

# The nodes' part of every message below, for the tainted and the cordoned node: the cordoned
# node fails NodeUnschedulable and, with the taint the node controller puts on it, TaintToleration.
BLOCKED = (
    "1 node(s) had untolerated taint {gpu: broken}, "
    "1 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }, "
    "1 node(s) were unschedulable"
)
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


def pod(
    name: str,
    gpus: int = 0,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu} if cpu else {}
    if memory:
        requests["memory"] = memory
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "x", "resources": {"limits": limits, "requests": requests}}
        ]
    }
    if selector:
        spec["nodeSelector"] = selector
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name}, "spec": spec}


def pool_b_or_tainted() -> dict[str, Any]:
    """Required affinity: the ``pool=b`` node (too small) or the tainted node, by name."""
    terms = [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["tainted"]}]},
    ]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


SCENARIOS = {
    "too-big-for-every-node": (
        pod("too-big", 16),
        f"0/5 nodes are available: {BLOCKED}, 5 Insufficient nvidia.com/gpu. "
        f"preemption: 0/5 nodes are available: 2 {NOT_HELPFUL}, 3 {NO_VICTIMS}.",
    ),
    "selector-matches-no-node": (
        pod("no-match", 1, selector={"pool": "zzz"}),
        f"0/5 nodes are available: 1 Insufficient nvidia.com/gpu, {BLOCKED}, "
        "5 node(s) didn't match Pod's node affinity/selector. "
        f"preemption: 0/5 nodes are available: 5 {NOT_HELPFUL}.",
    ),
    "tainted-node-or-too-small-node": (
        pod("taint-or-small", 2, affinity=pool_b_or_tainted()),
        f"0/5 nodes are available: {BLOCKED}, 2 Insufficient nvidia.com/gpu, "
        "3 node(s) didn't match Pod's node affinity/selector. "
        f"preemption: 0/5 nodes are available: 1 {NO_VICTIMS}, 4 {NOT_HELPFUL}.",
    ),
    "selector-and-too-big": (
        pod("pool-a", 16, selector={"pool": "a"}),
        f"0/5 nodes are available: {BLOCKED}, "
        "2 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu. "
        f"preemption: 0/5 nodes are available: 1 {NO_VICTIMS}, 4 {NOT_HELPFUL}.",
    ),
    "mix-of-resources": (
        pod("mix", 6, cpu="4", memory="16Gi"),
        f"0/5 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, {BLOCKED}, "
        "3 Insufficient nvidia.com/gpu. "
        f"preemption: 0/5 nodes are available: 2 {NOT_HELPFUL}, 3 {NO_VICTIMS}.",
    ),
    "every-resource-short": (
        pod("all-short", 16, cpu="100", memory="1Ti"),
        f"0/5 nodes are available: {BLOCKED}, 5 Insufficient cpu, 5 Insufficient memory, "
        "5 Insufficient nvidia.com/gpu. "
        f"preemption: 0/5 nodes are available: 2 {NOT_HELPFUL}, 3 {NO_VICTIMS}.",
    ),
    "tolerates-everything-too-big": (
        pod("tolerant", 16, tolerations=[{"operator": "Exists"}]),
        "0/5 nodes are available: 5 Insufficient nvidia.com/gpu. "
        f"preemption: 0/5 nodes are available: 5 {NO_VICTIMS}.",
    ),
}


def refusal(core: Any, body: dict[str, Any], timeout: float = 30.0) -> tuple[str, str]:
    """Create ``body``; wait for the scheduler to refuse it; return the PodScheduled condition's
    message and the FailedScheduling event's (sync ``CoreV1Api``)."""
    name = body["metadata"]["name"]
    core.create_namespaced_pod("default", body)
    deadline = time.monotonic() + timeout
    while True:
        p = core.read_namespaced_pod(name, "default")
        assert not p.spec.node_name, f"{name} was bound to {p.spec.node_name}"
        cond = next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
        events = core.list_namespaced_event(
            "default",
            field_selector=f"involvedObject.name={name},reason=FailedScheduling",
        ).items
        if cond is not None and cond.status == "False" and events:
            return cond.message, events[-1].message
        assert time.monotonic() < deadline, f"no refusal for {name}"
        time.sleep(0.2)


@pytest.fixture
def sim_cluster_spec() -> ClusterSpec:
    return parse_cluster(SIM_NODES)


@pytest.fixture(scope="module")
def real_scheduling_core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A control plane of its own (the messages count every node, so no other test's nodes may
    be there), with the simulator's five nodes registered."""
    where, unpacked = tmp_path_factory.mktemp("realk8s") / "cp", realk8s.binaries(tmp_path_factory)
    for kubeconfig in realk8s.start(where, unpacked=unpacked):
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        core = kubernetes.client.CoreV1Api(api)
        realk8s.register_node(core, "big", gpus=4, labels={"pool": "a"})
        realk8s.register_node(core, "small", gpus=1, labels={"pool": "b"})
        realk8s.register_node(core, "tainted", gpus=8, labels={"pool": "a"}, taints=[TAINT])
        realk8s.register_node(core, "cordoned", gpus=8, labels={"pool": "a"})
        realk8s.register_node(core, "plain", cpu="2", memory="4Gi")
        core.patch_node("cordoned", {"spec": {"unschedulable": True}})
        # the node controller taints the cordoned node; the messages count that taint
        deadline = time.monotonic() + 20
        while not (core.read_node("cordoned").spec or kubernetes.client.V1NodeSpec()).taints:
            assert time.monotonic() < deadline, "the cordoned node got no unschedulable taint"
            time.sleep(0.2)
        yield core
        api.close()


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.realk8s)])
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A sync ``CoreV1Api`` on the simulator or on the real control plane."""
    if request.param == "real":
        yield request.getfixturevalue("real_scheduling_core")
        return
    sim = request.getfixturevalue("sim_cluster")
    api = kubernetes.config.new_client_from_config(config_file=sim.kubeconfig)
    yield kubernetes.client.CoreV1Api(api)
    api.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_failed_scheduling_says_what_kube_scheduler_says(cluster, scenario):
    body, expected = SCENARIOS[scenario]
    # The simulator serves from this test's event loop: the blocking client runs in a thread.
    condition, event = await asyncio.to_thread(refusal, cluster, body)
    assert event == expected
    assert condition == expected
