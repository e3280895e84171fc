"""The ``dcgm`` utilization source finding the DCGM exporter's pods by a label selector
(``dcgm_pod_selector``, ``dcgm_namespace``, ``dcgm_port``), on the simulated cluster.

The exporter pods are made as the GPU Operator's DaemonSet makes them, one per GPU node, through
the Kubernetes API (with the simulator's ``sim.gpupool.jupyter.org/dcgm-exporter`` annotation,
which makes a pod answer ``/metrics`` through the API server's pod proxy: docs/sim.md). A
server's utilization is set with ``PUT /sim/v1/namespaces/NS/pods/NAME/gpu-utilization``, and
everything is read back as a user reads it: ``GET api/v1/servers``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import tornado.httpclient
from clusters import Cluster
from kubernetes_asyncio import client, config
from service_kit import exporter_pod, start_pod
from traitlets import TraitError
from waiting import WaitTimeout, async_wait_for

from jupyter_gpupool.service.app import StartupError
from jupyter_gpupool.sim import SimCluster

OPERATOR_NS = "gpu-operator"
SELECTOR = "app=nvidia-dcgm-exporter"
DISCOVERY = {
    "utilization_source": "dcgm",
    "dcgm_pod_selector": SELECTOR,
    "dcgm_namespace": OPERATOR_NS,
    "utilization_interval": 0.1,
}
#: Servers below 5 % are idle (reported, never stopped): "never idle" is visible in ``idle``.
IDLE = {"below_percent": 5, "after": "1h", "action": "report"}

pytestmark = pytest.mark.timeout(120)


@pytest_asyncio.fixture
async def kube(sim_cluster: SimCluster) -> AsyncIterator[Cluster]:
    """The simulated cluster's Kubernetes API (tests/clusters.py), as kubectl would use it."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=sim_cluster.kubeconfig, client_configuration=cfg)
    api = client.ApiClient(configuration=cfg)
    cluster = Cluster("simulated", sim_cluster.kubeconfig, api)
    cluster.sim = sim_cluster
    await cluster.call(cluster.v1.create_namespace, {"metadata": {"name": OPERATOR_NS}})
    yield cluster
    await api.close()


async def deploy_exporters(kube: Cluster, nodes: list[str] | None = None) -> list[str]:
    """An exporter pod on each of ``nodes`` (default: every node with GPUs), running."""
    if nodes is None:
        nodes = [
            n["metadata"]["name"]
            for n in await kube.list_nodes()
            if int((n["status"].get("allocatable") or {}).get("nvidia.com/gpu", "0"))
        ]
    for node in nodes:
        await kube.create_pod(OPERATOR_NS, exporter_pod(node))
    for node in nodes:
        name = f"nvidia-dcgm-exporter-{node}"

        async def running(name: str = name) -> bool:
            pod = await kube.pod(OPERATOR_NS, name) or {}
            return pod.get("status", {}).get("phase") == "Running"

        await async_wait_for(running, what=f"exporter pod {name} to run", timeout=20)
    return nodes


async def set_utilization(sim: SimCluster, pod: str, percent: int) -> None:
    """``PUT /sim/v1/namespaces/default/pods/POD/gpu-utilization``, as curl would."""
    answer = await tornado.httpclient.AsyncHTTPClient().fetch(
        sim.url + f"/sim/v1/namespaces/default/pods/{pod}/gpu-utilization",
        method="PUT",
        body=json.dumps({"percent": percent}),
        headers={**sim.auth_headers, "Content-Type": "application/json"},
        ssl_options=sim.ssl_context,
    )
    assert answer.code == 200, answer.body


async def servers(admin: Any) -> tuple[dict[str, dict[str, Any]], str | None]:
    """``GET api/v1/servers``: the rows by name, and ``utilization.problem`` (None: none)."""
    answer = (await admin.request("GET", "api/v1/servers")).json()
    return {r["name"]: r for r in answer["servers"]}, answer["utilization"]["problem"]


async def problem_becomes(admin: Any, text: str, timeout: float = 15) -> None:
    """Wait until ``utilization.problem`` is ``text``; else fail saying what it was."""
    seen: list[str | None] = []

    async def said() -> bool:
        seen.append((await servers(admin))[1])
        return seen[-1] == text

    try:
        await async_wait_for(said, what=f"utilization.problem {text!r}", timeout=timeout)
    except WaitTimeout as e:
        raise AssertionError(f"{e}; it was {seen[-1]!r}") from None


async def two_servers(service: Any) -> tuple[str, str]:
    """alice (2 GPUs, training-pool) and bob (1 GPU, dev-pool) run: their nodes."""
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    b = await admin.admit(user="bob", groups=[], pools=["dev-pool"], gpus=1)
    alice = await start_pod(service.cluster, a, "alice-nb")
    bob = await start_pod(service.cluster, b, "bob-nb")
    assert alice["spec"]["nodeName"] != bob["spec"]["nodeName"]
    return alice["spec"]["nodeName"], bob["spec"]["nodeName"]


async def test_exporter_pods_found_by_label_measure_their_nodes_servers(
    start_service, kube: Cluster
) -> None:
    """Every GPU node's exporter pod is read through the pod proxy: alice's utilization, set
    in the simulator, shows in her row. Her node's exporter pod deleted, her numbers go stale
    and she is not idle, while bob on another node stays measured (and idle at 0 %)."""
    assert kube.sim is not None
    service = await start_service(**DISCOVERY, idle_policy=IDLE)
    admin = service.admin()
    alice_node, bob_node = await two_servers(service)
    await deploy_exporters(kube)
    await set_utilization(kube.sim, "alice-nb", 80)

    async def measured() -> dict[str, dict[str, Any]] | None:
        rows, _ = await servers(admin)
        got = (rows["alice-nb"]["gpu_utilization"], rows["bob-nb"]["gpu_utilization"])
        return rows if got == (80.0, 0.0) else None

    rows = await async_wait_for(measured, what="alice at 80 %, bob at 0 %", timeout=15)
    assert (rows["alice-nb"]["gpus_measured"], rows["bob-nb"]["gpus_measured"]) == (2, 1)
    assert rows["alice-nb"]["idle"] is None and rows["bob-nb"]["idle"] is not None

    # alice idles too: now both are idle under the policy
    await set_utilization(kube.sim, "alice-nb", 0)

    async def alice_idle() -> bool:
        rows, _ = await servers(admin)
        return rows["alice-nb"]["idle"] is not None

    await async_wait_for(alice_idle, what="alice idle at 0 %", timeout=15)

    # her node's exporter goes away: no measurement of her is no idleness; bob is still read
    await kube.delete_pod(OPERATOR_NS, f"nvidia-dcgm-exporter-{alice_node}", grace=0)
    await kube.wait_gone(OPERATOR_NS, f"nvidia-dcgm-exporter-{alice_node}")

    async def alice_stale() -> dict[str, dict[str, Any]] | None:
        rows, _ = await servers(admin)
        alice = rows["alice-nb"]
        return rows if alice["gpu_utilization"] is None and alice["idle"] is None else None

    # (the poll that finds her numbers stale ends her idle time)
    rows = await async_wait_for(alice_stale, what="alice stale and not idle", timeout=15)
    assert rows["alice-nb"]["measured_at"] is None
    bob_at = rows["bob-nb"]["measured_at"]

    async def bob_read_again() -> dict[str, Any] | None:
        rows, problem = await servers(admin)
        bob = rows["bob-nb"]
        return {"bob": bob, "problem": problem} if bob["measured_at"] != bob_at else None

    later = await async_wait_for(bob_read_again, what="a later poll of bob's node", timeout=15)
    assert later["bob"]["gpu_utilization"] == 0.0 and later["bob"]["idle"] is not None
    assert later["problem"] is None  # the other exporters answer: nothing wrong with the source
    rows, _ = await servers(admin)
    assert rows["alice-nb"]["gpu_utilization"] is None and rows["alice-nb"]["idle"] is None
    assert bob_node != alice_node


async def test_no_pod_matching_the_selector_is_a_problem_in_words(
    start_service, kube: Cluster
) -> None:
    """Nothing matches: ``utilization.problem`` says so; pods that match but do not run yet
    are told apart; once an exporter runs, the server on its node is measured."""
    assert kube.sim is not None
    service = await start_service(**DISCOVERY)
    admin = service.admin()
    alice_node, _ = await two_servers(service)

    await problem_becomes(admin, f"no pods match {SELECTOR} in {OPERATOR_NS}")
    # the selector's label in another namespace does not count
    await kube.create_pod("default", exporter_pod(alice_node))
    pending = exporter_pod(alice_node)
    del pending["spec"]["nodeName"]
    pending["spec"]["nodeSelector"] = {"example.org/no-such-node": "true"}
    await kube.create_pod(OPERATOR_NS, pending)
    await problem_becomes(
        admin, f"1 pod matches {SELECTOR} in {OPERATOR_NS}, but none is running on a node"
    )
    rows, _ = await servers(admin)
    assert rows["alice-nb"]["gpu_utilization"] is None

    await kube.delete_pod(OPERATOR_NS, pending["metadata"]["name"], grace=0)
    await kube.wait_gone(OPERATOR_NS, pending["metadata"]["name"])
    await deploy_exporters(kube, [alice_node])

    async def alice_measured() -> tuple[dict[str, dict[str, Any]], str] | None:
        rows, problem = await servers(admin)
        return (rows, problem) if rows["alice-nb"]["gpus_measured"] == 2 else None

    rows, problem = await async_wait_for(alice_measured, what="alice measured", timeout=15)
    assert problem is None and rows["bob-nb"]["gpu_utilization"] is None  # none on his node


async def test_urls_and_a_selector_are_read_together_each_gpu_once(
    start_service, kube: Cluster
) -> None:
    """``dcgm_urls`` and ``dcgm_pod_selector`` both given: every page is read; a GPU on two
    of them (the simulator's whole-cluster page and its node's exporter pod) counts once, and
    a URL that fails does not stop the others."""
    service = await start_service(
        **DISCOVERY, dcgm_urls=["/sim/v1/dcgm/metrics", "/sim/v1/no-such-exporter"]
    )
    admin = service.admin()
    alice_node, _ = await two_servers(service)
    await deploy_exporters(kube, [alice_node])

    async def both_measured() -> tuple[dict[str, dict[str, Any]], str] | None:
        rows, problem = await servers(admin)
        ok = all(rows[n]["gpus_measured"] is not None for n in ("alice-nb", "bob-nb"))
        return (rows, problem) if ok else None

    rows, problem = await async_wait_for(both_measured, what="both measured", timeout=15)
    assert (rows["alice-nb"]["gpus_measured"], rows["bob-nb"]["gpus_measured"]) == (2, 1)
    assert problem is None


async def test_dcgm_needs_urls_or_a_selector_and_a_valid_one(start_service) -> None:
    with pytest.raises(StartupError) as refused:
        await start_service(utilization_source="dcgm")
    assert str(refused.value).startswith(
        'utilization_source is "dcgm" but dcgm_urls is empty and dcgm_pod_selector is not set'
    )
    assert 'dcgm_pod_selector = "app=nvidia-dcgm-exporter"' in str(refused.value)
    with pytest.raises(StartupError, match="dcgm_pod_selector is not set"):
        await start_service(utilization_source="dcgm", dcgm_pod_selector="   ")
    with pytest.raises(TraitError, match=r'dcgm_pod_selector: invalid label selector "app in"'):
        await start_service(**{**DISCOVERY, "dcgm_pod_selector": "app in"})
    with pytest.raises(TraitError, match="dcgm_namespace must be a namespace name"):
        await start_service(**{**DISCOVERY, "dcgm_namespace": "GPU Operator"})
    with pytest.raises(TraitError, match="dcgm_port must be a port number from 1 to 65535"):
        await start_service(**{**DISCOVERY, "dcgm_port": 0})
