"""The ``dcgm`` source's discovery of exporter pods on both clusters (tests/clusters.py): the
same pods made through the Kubernetes API, the same service settings.

The service must read exactly the running pods the selector matches in ``dcgm_namespace``, and
say in words what went wrong when reading them fails. On the simulated cluster they answer and a
server is measured. On the real control plane the simulator's kubelet (``sim.remote``) gives pods
loopback addresses, which kube-apiserver refuses to proxy to (``400 address not allowed``): every
exporter fails, and ``utilization.problem`` names each pod, its node and the API server's answer,
while the service goes on answering.

Last, on the control plane with RBAC on: the Role docs/service.md gives for the exporter's
namespace is what the service needs to list and read the pods (without it, a 403 in words).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusters import Cluster, open_cluster
from kubernetes_asyncio import client, config
from service_kit import exporter_pod, pod_for
from waiting import WaitTimeout, async_wait_for

from jupyter_gpupool.service.cluster.kube import Kube
from jupyter_gpupool.service.monitoring.polling import DCGMSource, SourceError

OPERATOR_NS = "gpu-operator"

pytestmark = pytest.mark.timeout(180)


async def running(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    async def phase() -> dict[str, Any] | None:
        pod = await cluster.pod(namespace, name)
        return pod if (pod or {}).get("status", {}).get("phase") == "Running" else None

    return await async_wait_for(phase, what=f"pod {namespace}/{name} to run", timeout=30)


async def test_the_service_reads_the_matching_running_exporter_pods(
    cluster: Cluster, start_service
) -> None:
    """Exporters on alice's node and on gpu-node-3 in gpu-operator are read; a matching pod in
    another namespace and one that does not run are not. Simulated: alice's server is
    measured. Real: the problem names the two pods, their nodes and the API server's refusal."""
    service = await start_service(
        cluster,
        utilization_source="dcgm",
        dcgm_pod_selector="app=nvidia-dcgm-exporter",
        dcgm_namespace=OPERATOR_NS,
        utilization_interval=0.2,
    )
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    await cluster.create_pod("default", pod_for(a, "alice-nb"))
    assert (await running(cluster, "default", "alice-nb"))["spec"]["nodeName"] == a["node"]

    with contextlib.suppress(client.ApiException):
        await cluster.call(cluster.v1.create_namespace, {"metadata": {"name": OPERATOR_NS}})
    nodes = sorted({a["node"], "gpu-node-3"})
    for node in nodes:
        await cluster.create_pod(OPERATOR_NS, exporter_pod(node))
    await cluster.create_pod("default", exporter_pod("gpu-node-2", "elsewhere"))
    pending = exporter_pod("nowhere", "pending-exporter")
    del pending["spec"]["nodeName"]
    pending["spec"]["nodeSelector"] = {"example.org/no-such-node": "true"}
    await cluster.create_pod(OPERATOR_NS, pending)
    for node in nodes:
        await running(cluster, OPERATOR_NS, f"nvidia-dcgm-exporter-{node}")
    await running(cluster, "default", "elsewhere")

    async def servers() -> tuple[dict[str, dict[str, Any]], str | None]:
        answer = (await admin.request("GET", "api/v1/servers")).json()
        rows = {r["name"]: r for r in answer["servers"]}
        return rows, answer["utilization"]["problem"]

    if not cluster.real:

        async def measured() -> dict[str, Any] | None:
            rows, problem = await servers()
            alice = rows["alice-nb"]
            return {**alice, "problem": problem} if alice["gpus_measured"] else None

        alice = await async_wait_for(measured, what="alice's GPUs measured", timeout=20)
        assert (alice["gpus_measured"], alice["gpu_utilization"], alice["problem"]) == (
            2,
            0.0,
            None,
        )
        return

    expected = "; ".join(
        f"pod {OPERATOR_NS}/nvidia-dcgm-exporter-{node} on {node}: HTTP 400 address not allowed"
        for node in nodes
    )

    async def said() -> tuple[dict[str, dict[str, Any]], str | None] | None:
        rows, problem = await servers()
        named = problem and all(f"exporter-{node} on" in problem for node in nodes)
        return (rows, problem) if named else None

    rows, problem = await async_wait_for(said, what="a problem naming both pods", timeout=30)
    assert problem == expected
    alice = rows["alice-nb"]
    assert (alice["gpus_measured"], alice["gpu_utilization"], alice["idle"]) == (None, None, None)
    # the service goes on answering
    assert (await admin.request("GET", "api/v1/pools")).code == 200


# --- the documented RBAC for the exporter's pods, on a control plane with RBAC on --------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "service.md"
HUB_NS, HUB_SA = "jhub", "hub"  # the service account the docs bind (``NAMESPACE``: the hub's)


def documented_dcgm_rbac() -> list[dict[str, Any]]:
    """The Role and RoleBinding of docs/service.md's ``gpupool-dcgm-rbac.yaml``, as
    ``kubectl apply -n gpu-operator`` places them (the subject in the hub's namespace)."""
    text = DOCS.read_text()
    [block] = re.findall(r"^```yaml\n(# gpupool-dcgm-rbac\.yaml.*?)^```", text, flags=re.M | re.S)
    docs = [d for d in yaml.safe_load_all(block) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = OPERATOR_NS
        for subject in doc.get("subjects") or []:
            subject["namespace"] = HUB_NS
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"], docs
    return docs


async def service_account_kube(cluster: Cluster) -> tuple[Kube, client.ApiClient]:
    """The service's own Kubernetes client (service/cluster/kube.py) with a token of the hub's
    service account (TokenRequest API), nothing else granted."""
    v1 = cluster.v1
    for ns in (HUB_NS, OPERATOR_NS):
        with contextlib.suppress(client.ApiException):
            await cluster.call(v1.create_namespace, {"metadata": {"name": ns}})
    with contextlib.suppress(client.ApiException):
        await cluster.call(
            v1.create_namespaced_service_account, HUB_NS, {"metadata": {"name": HUB_SA}}
        )
    answer = await cluster.call(
        v1.create_namespaced_service_account_token,
        HUB_SA,
        HUB_NS,
        {"spec": {"expirationSeconds": 3600}},
    )
    cfg = client.Configuration()
    await config.load_kube_config(config_file=cluster.kubeconfig, client_configuration=cfg)
    cfg.api_key = {"BearerToken": answer["status"]["token"]}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    api = client.ApiClient(configuration=cfg)
    return Kube(api, attempts=1), api


@pytest.mark.realk8s
async def test_the_documented_rbac_lets_the_service_find_and_read_the_exporter_pods(
    realk8s_rbac_kubeconfig: Path,
) -> None:
    """Real control plane with ``AUTHZ=Node,RBAC``: without the docs' Role the list is refused
    and the source says so in words; with it (``kubectl apply -n gpu-operator``), the pods are
    listed and read, and only the pod's loopback address stops the read (``address not
    allowed``, as on the RBAC-less control plane), not RBAC."""
    async with open_cluster(
        "real", realk8s_kubeconfig=realk8s_rbac_kubeconfig, authz="Node,RBAC"
    ) as cluster:
        kube, api = await service_account_kube(cluster)
        try:
            await cluster.create_pod(OPERATOR_NS, exporter_pod("gpu-node-1"))
            await running(cluster, OPERATOR_NS, "nvidia-dcgm-exporter-gpu-node-1")
            source = DCGMSource(
                [],
                kube.get_text,
                pod_selector="app=nvidia-dcgm-exporter",
                namespace=OPERATOR_NS,
                list_pods=kube.list_pods,
            )
            who = f"system:serviceaccount:{HUB_NS}:{HUB_SA}"
            with pytest.raises(SourceError) as refused:
                await source.fetch()
            assert str(refused.value) == (
                "cannot list the DCGM exporter's pods (app=nvidia-dcgm-exporter in "
                f'gpu-operator): HTTP 403 pods is forbidden: User "{who}" cannot list '
                f'resource "pods" in API group "" in the namespace "{OPERATOR_NS}"'
            )
            rbac = client.RbacAuthorizationV1Api(cluster.api)
            role, binding = documented_dcgm_rbac()
            await cluster.call(rbac.create_namespaced_role, OPERATOR_NS, role)
            await cluster.call(rbac.create_namespaced_role_binding, OPERATOR_NS, binding)

            seen: list[str] = []

            async def read() -> str | None:
                try:
                    await source.fetch()
                except SourceError as e:
                    seen.append(str(e))
                    return None if "forbidden" in str(e) else str(e)
                return "read"

            try:
                said = await async_wait_for(read, what="the Role to take effect", timeout=20)
            except WaitTimeout as e:
                raise AssertionError(f"{e}; the source said: {seen[-1:]}") from None
            assert said == (
                "pod gpu-operator/nvidia-dcgm-exporter-gpu-node-1 on gpu-node-1: "
                "HTTP 400 address not allowed"
            )
        finally:
            await api.close()
