"""Nodes as kube-controller-manager's node lifecycle controller keeps them, on the simulator and on
a real control plane (``realk8s_kubeconfig``): the same scenario, through the sync ``kubernetes``
client, must see the same taints on both.

- a cordoned node (``spec.unschedulable``) gets ``node.kubernetes.io/unschedulable:NoSchedule``;
- a node whose Ready condition is False gets ``node.kubernetes.io/not-ready`` NoSchedule and
  NoExecute, Unknown ``node.kubernetes.io/unreachable`` (NoExecute only while other nodes of its
  zone are Ready: the controller stops evicting when a whole cluster is down);
- uncordon / Ready again removes them; the node's own taints stay; each taint has ``timeAdded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from realk8s import register_node

from jupyter_gpupool.sim import ClusterSpec

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
UNSCHEDULABLE = ("node.kubernetes.io/unschedulable", "NoSchedule")
NOT_READY = [
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "NoExecute"),
]
UNREACHABLE = [
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
]
# A zone of this test's own, so that other tests' nodes on the shared control plane don't change
# the controller's idea of the zone's health.
ZONE = {"topology.kubernetes.io/zone": "test-real-nodes"}


def _taints(core: Any, name: str) -> list[tuple[str, str]]:
    return [(t.key, t.effect) for t in core.read_node(name).spec.taints or []]


def _wait_taints(core: Any, name: str, want: list[tuple[str, str]], timeout: float = 20) -> Any:
    """The node, read fresh, once its taints are ``want`` (the controller writes after the change,
    NoExecute on its next 5 s pass)."""
    deadline = time.monotonic() + timeout
    while True:
        node = core.read_node(name)
        have = [(t.key, t.effect) for t in node.spec.taints or []]
        if have == want:
            return node
        if time.monotonic() > deadline:
            raise AssertionError(f"node {name} has taints {have}, wanted {want}")
        time.sleep(0.1)


def _set_ready(core: Any, name: str, status: str) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    reason = {"True": "KubeletReady", "False": "KubeletNotReady"}.get(status, "NodeStatusUnknown")
    cond = {"type": "Ready", "status": status, "reason": reason, "message": status}
    cond |= {"lastHeartbeatTime": now, "lastTransitionTime": now}
    core.patch_node_status(name, {"status": {"conditions": [cond]}})


def node_lifecycle_scenario(core: Any, prefix: str) -> None:
    """Cordon, uncordon, NotReady, Ready, Unknown, Ready on a node with a taint of its own."""
    node, other = f"{prefix}-a", f"{prefix}-b"
    register_node(core, node, gpus=1, labels=ZONE, taints=[GPU_TAINT])
    register_node(core, other, gpus=1, labels=ZONE)
    own = [(GPU_TAINT["key"], GPU_TAINT["effect"])]
    assert _taints(core, node) == own

    core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon
    cordoned = _wait_taints(core, node, [*own, UNSCHEDULABLE])
    assert cordoned.spec.unschedulable is True
    assert cordoned.spec.taints[-1].time_added is not None
    assert cordoned.spec.taints[0].value == "present"
    core.patch_node(node, {"spec": {"unschedulable": False}})  # kubectl uncordon
    _wait_taints(core, node, own)

    _set_ready(core, node, "False")
    not_ready = _wait_taints(core, node, [*own, *NOT_READY])
    assert all(t.time_added is not None for t in not_ready.spec.taints[1:])
    assert _taints(core, other) == []
    _set_ready(core, node, "True")
    _wait_taints(core, node, own)

    _set_ready(core, node, "Unknown")
    _wait_taints(core, node, [*own, *UNREACHABLE])
    _set_ready(core, node, "True")
    _wait_taints(core, node, own)

    # cordoned and NotReady at once: both, and each goes on its own
    core.patch_node(node, {"spec": {"unschedulable": True}})
    _wait_taints(core, node, [*own, UNSCHEDULABLE])
    _set_ready(core, node, "False")
    both = _wait_taints(core, node, [*own, UNSCHEDULABLE, *NOT_READY], timeout=20)
    assert both.spec.unschedulable is True
    core.patch_node(node, {"spec": {"unschedulable": False}})
    _wait_taints(core, node, [*own, *NOT_READY])
    _set_ready(core, node, "True")
    _wait_taints(core, node, own)


@pytest.fixture
def sim_cluster_spec() -> ClusterSpec:
    return ClusterSpec()


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.realk8s)])
def cluster(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Callable[..., Any]]]:
    """``(core, run)``: a sync ``CoreV1Api`` and how to call a scenario with it (in a thread for
    the simulator, which serves from the test's event loop)."""
    if request.param == "sim":
        sim = request.getfixturevalue("sim_cluster")
        config = sim.kubeconfig

        async def run(fn: Callable[..., Any], *args: Any) -> Any:
            return await asyncio.to_thread(fn, *args)

    else:
        config = str(request.getfixturevalue("realk8s_kubeconfig"))

        async def run(fn: Callable[..., Any], *args: Any) -> Any:
            return fn(*args)

    api = kubernetes.config.new_client_from_config(config_file=config)
    yield kubernetes.client.CoreV1Api(api), run
    api.close()


async def test_the_node_lifecycle_controller_taints(cluster, request):
    core, run = cluster
    prefix = "lifecycle-" + request.node.callspec.id
    try:
        await run(node_lifecycle_scenario, core, prefix)
    finally:
        for name in (f"{prefix}-a", f"{prefix}-b"):
            with contextlib.suppress(kubernetes.client.ApiException):
                await run(core.delete_node, name)
