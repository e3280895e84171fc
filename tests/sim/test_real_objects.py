"""What the API server makes of a minimal pod, and the shape of the events the control plane
writes about it: the same scenario on the simulator and on a real v1.25 control plane
(``../shared/realk8s``, tests/realk8s.py), so that where the two differ the simulator is wrong.

Measured on the real one: the scheduler records its events through ``events.k8s.io/v1`` (as
core/v1 they read ``eventTime`` with microseconds, ``action``, ``reportingComponent``,
``reportingInstance``, an empty ``source`` and null ``firstTimestamp``/``lastTimestamp``), while
components on client-go's legacy recorder (the kubelet, the replicaset controller) write
``source``, ``firstTimestamp``/``lastTimestamp`` and ``count`` with a null ``eventTime`` and empty
reporting fields. Pods get the ``DefaultTolerationSeconds`` not-ready/unreachable tolerations and
the ``ServiceAccount`` admission's ``default`` account.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from jupyter_gpupool.sim import ClusterSpec, parse_cluster

NODE = "objects-1"
NS = "default"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE = {**NOT_READY, "key": "node.kubernetes.io/unreachable"}

#: kube-apiserver v1.25's defaults (and admission's additions) for a pod that sets none.
POD_DEFAULTS = {
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "serviceAccountName": "default",
    "serviceAccount": "default",
    "securityContext": {},
    "schedulerName": "default-scheduler",
    "tolerations": [NOT_READY, UNREACHABLE],
    "priority": 0,
    "enableServiceLinks": True,
    "preemptionPolicy": "PreemptLowerPriority",
}
CONTAINER_DEFAULTS = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "imagePullPolicy": "Always",  # no tag: latest
    "resources": {},
}


class Cluster:
    """A sync ``CoreV1Api`` on either cluster, called from a thread (the simulator serves from
    the test's event loop)."""

    def __init__(self, core: Any) -> None:
        self.core = core

    async def __call__(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kw)

    async def raw(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        answer = await self(fn, *args, _preload_content=False, **kw)
        return json.loads(answer.data)


@pytest.fixture
def sim_cluster_spec() -> ClusterSpec:
    return parse_cluster(f"nodes:\n  - {{name: {NODE}, gpu: {{count: 1}}}}\n")


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.realk8s)])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if request.param == "sim":
        sim = request.getfixturevalue("sim_cluster")
        api = kubernetes.config.new_client_from_config(config_file=sim.kubeconfig)
    else:
        import realk8s

        kubeconfig = request.getfixturevalue("realk8s_kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        core = kubernetes.client.CoreV1Api(api)
        try:
            core.read_node(NODE)
        except ApiException:
            realk8s.register_node(core, NODE, gpus=1)
    yield Cluster(kubernetes.client.CoreV1Api(api))
    api.close()


def _pod(name: str, image: str = "busybox", **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": image}
    if "gpus" in spec:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(spec.pop("gpus"))}}
    return {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}


def _name(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:6]}"  # the real control plane lives for the whole run


async def _create(cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
    """The pod as the create request's answer has it (before any scheduler or kubelet)."""
    return await cluster.raw(cluster.core.create_namespaced_pod, NS, body)


async def _event(cluster: Cluster, pod: dict[str, Any], reason: str) -> dict[str, Any]:
    uid = pod["metadata"]["uid"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        events = await cluster.raw(cluster.core.list_namespaced_event, NS)
        for e in events["items"]:
            if e["involvedObject"].get("uid") == uid and e.get("reason") == reason:
                return e
        await asyncio.sleep(0.2)
    raise AssertionError(f"no {reason} event for {pod['metadata']['name']}")


async def test_a_minimal_pod_gets_the_api_servers_defaults(cluster):
    pod = await _create(cluster, _pod(_name("minimal")))
    spec = pod["spec"]
    assert {k: spec.get(k) for k in POD_DEFAULTS} == POD_DEFAULTS
    (container,) = spec["containers"]
    assert {k: container.get(k) for k in CONTAINER_DEFAULTS} == CONTAINER_DEFAULTS
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert "generation" not in pod["metadata"]  # pods have none in v1.25


async def test_a_tagged_image_is_pulled_if_not_present_and_own_tolerations_are_kept(cluster):
    own = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    pod = await _create(
        cluster,
        _pod(_name("tagged"), "busybox:1.36", tolerations=[gpu, own], serviceAccountName="default"),
    )
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    # DefaultTolerationSeconds adds only the toleration the pod does not have, after its own.
    assert pod["spec"]["tolerations"] == [gpu, own, UNREACHABLE]
    latest = await _create(
        cluster,
        _pod(
            _name("latest"),
            "busybox:latest",
            tolerations=[
                {"operator": "Exists"}  # tolerates every taint: nothing is added
            ],
        ),
    )
    assert latest["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert latest["spec"]["tolerations"] == [{"operator": "Exists"}]


def _assert_scheduler_shape(event: dict[str, Any], action: str) -> None:
    assert MICRO.match(event["eventTime"]), event
    assert (event["firstTimestamp"], event["lastTimestamp"]) == (None, None)
    assert event["source"] == {}
    assert event["action"] == action
    assert event["reportingComponent"] == "default-scheduler"
    assert event["reportingInstance"].startswith("default-scheduler-")
    assert "count" not in event and "series" not in event
    assert re.match(rf"^{event['involvedObject']['name']}\.[0-9a-f]+$", event["metadata"]["name"])
    assert event["involvedObject"]["kind"] == "Pod"
    assert event["involvedObject"]["apiVersion"] == "v1"


async def test_the_schedulers_events_have_the_events_api_shape(cluster):
    refused = await _create(cluster, _pod(_name("huge"), gpus=99))
    placed = await _create(cluster, _pod(_name("small")))
    failed = await _event(cluster, refused, "FailedScheduling")
    _assert_scheduler_shape(failed, "Scheduling")
    assert failed["type"] == "Warning"
    scheduled = await _event(cluster, placed, "Scheduled")
    _assert_scheduler_shape(scheduled, "Binding")
    assert scheduled["type"] == "Normal"
    assert scheduled["message"].startswith(
        f"Successfully assigned {NS}/{placed['metadata']['name']} to "
    )


async def test_the_sim_kubelets_events_have_the_legacy_recorders_shape(sim_cluster):
    """The real control plane has no kubelet; v1.25's kubelet records through client-go's legacy
    recorder, whose shape the replicaset controller shows on the real one (measured)."""
    api = kubernetes.config.new_client_from_config(config_file=sim_cluster.kubeconfig)
    cluster = Cluster(kubernetes.client.CoreV1Api(api))
    try:
        pod = await _create(cluster, _pod("started"))
        event = await _event(cluster, pod, "Started")
        listed = await cluster.raw(cluster.core.list_namespaced_event, NS)
    finally:
        await asyncio.to_thread(api.close)
    assert event["source"] == {"component": "kubelet", "host": NODE}
    assert (
        SECONDS.match(event["firstTimestamp"]) and event["lastTimestamp"] == event["firstTimestamp"]
    )
    assert event["count"] == 1
    assert event["eventTime"] is None
    assert (event["reportingComponent"], event["reportingInstance"]) == ("", "")
    assert "action" not in event
    # v1.25's kubelet: the image (pulled: no tag means latest, Always), created, started
    mine = [e for e in listed["items"] if e["involvedObject"]["uid"] == pod["metadata"]["uid"]]
    assert [(e["reason"], e["message"]) for e in mine if e["source"]] == [
        ("Pulling", 'Pulling image "busybox"'),
        ("Pulled", 'Successfully pulled image "busybox" in 0s'),
        ("Created", "Created container c"),
        ("Started", "Started container c"),
    ]
