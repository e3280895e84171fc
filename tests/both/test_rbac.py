"""The gpupool service under ``AUTHZ=Node,RBAC`` with exactly the RBAC of docs/service.md (issue 15).

The RBAC documents are read out of docs/service.md itself (its YAML blocks of kind
ClusterRole, ClusterRoleBinding, Role, RoleBinding and ServiceAccount) and applied as documented
(``kubectl apply -n NAMESPACE``), the docs' ``NAMESPACE`` placeholder becoming :data:`NAMESPACE`.
The docs bind zero-to-jupyterhub's ``hub`` service account, which the chart creates, not the docs:
the test creates it when the docs have no ServiceAccount document. The service then runs with a
token of that service account (TokenRequest API) and does everything it does against Kubernetes:
list and watch nodes and pods, read and label nodes, keep its registry ConfigMap (create, read,
replace) and delete a borrower's pod when it reclaims GPUs the hub cannot stop. No call may be
refused. The service reads no events (it calls nothing else: service/cluster/kube.py, cluster/watch.py).

Real cluster only: the simulated cluster has no authorization (every call is allowed), so this is
one of the known differences between the two clusters.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusters import Cluster, open_cluster
from kubernetes_asyncio import client, config
from service_kit import pod_for
from waiting import async_wait_for

pytestmark = pytest.mark.realk8s

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "service.md"
TEST_POOLS = REPO / "tests" / "service" / "pools"
#: What the docs' ``NAMESPACE`` placeholder stands for here: the hub's namespace.
NAMESPACE = "jhub"
PLACEHOLDER = "NAMESPACE"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
NAMESPACED = ("ServiceAccount", "Role", "RoleBinding")
POOL_LABEL = "runwhere.ai/pool"
CONFIGMAP = "gpupool-pools"  # the service's default configmap_name
PODS_NAMESPACE = "default"  # not the service's: deleting a pod there needs the ClusterRole


# --- the documented RBAC -------------------------------------------------------------------------


def documented_rbac(text: str) -> list[dict[str, Any]]:
    """The RBAC documents of docs/service.md's YAML blocks, placed in :data:`NAMESPACE`."""
    found: list[dict[str, Any]] = []
    for block in re.findall(r"^```yaml\n(.*?)^```", text, flags=re.M | re.S):
        for doc in yaml.safe_load_all(block):
            if isinstance(doc, dict) and doc.get("kind") in RBAC_KINDS:
                found.append(_placed(doc))
    return found


def _placed(doc: dict[str, Any]) -> dict[str, Any]:
    """``kubectl apply -n NAMESPACE``: namespaced objects and the subjects go to NAMESPACE."""
    doc = copy.deepcopy(doc)
    meta = doc.setdefault("metadata", {})
    if doc["kind"] in NAMESPACED and meta.get("namespace", PLACEHOLDER) == PLACEHOLDER:
        meta["namespace"] = NAMESPACE
    for subject in doc.get("subjects") or []:
        if subject.get("namespace") == PLACEHOLDER:
            subject["namespace"] = NAMESPACE
    return doc


def bound_service_account(docs: list[dict[str, Any]]) -> tuple[str, str]:
    """(namespace, name) of the one service account the documented bindings grant to."""
    accounts = {
        (s["namespace"], s["name"])
        for d in docs
        for s in d.get("subjects") or []
        if s.get("kind") == "ServiceAccount"
    }
    assert len(accounts) == 1, f"docs/service.md should bind one service account: {accounts}"
    return accounts.pop()


async def status_of(fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> int:
    """The HTTP status of one API call (its body read and dropped)."""
    resp = await fn(*args, _preload_content=False, **kwargs)
    try:
        await resp.read()
    finally:
        resp.release()
    return int(resp.status)


async def apply(cluster: Cluster, doc: dict[str, Any]) -> None:
    """``kubectl apply`` of one document, as the admin: create, or replace what is there."""
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    v1 = cluster.v1
    kind, name = doc["kind"], doc["metadata"]["name"]
    ns = doc["metadata"].get("namespace")
    create, replace = {
        "ServiceAccount": (
            v1.create_namespaced_service_account,
            v1.replace_namespaced_service_account,
        ),
        "ClusterRole": (rbac.create_cluster_role, rbac.replace_cluster_role),
        "ClusterRoleBinding": (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding),
        "Role": (rbac.create_namespaced_role, rbac.replace_namespaced_role),
        "RoleBinding": (rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding),
    }[kind]
    try:
        await cluster.call(create, *((ns,) if ns else ()), doc)
    except client.ApiException as e:
        if e.status != 409:
            raise
        await cluster.call(replace, name, *((ns,) if ns else ()), doc)


async def ensure_namespace(cluster: Cluster, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        await cluster.call(cluster.v1.create_namespace, {"metadata": {"name": name}})


def write_kubeconfig(admin: Path, token: str, namespace: str, user: str, path: Path) -> Path:
    """A kubeconfig with ``token``, the server and CA of the ``admin`` kubeconfig, and its
    context in ``namespace``."""
    cluster = yaml.safe_load(admin.read_text())["clusters"][0]["cluster"]
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "sa", "context": {"cluster": "test", "user": user, "namespace": namespace}}
        ],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


async def token_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig with a TokenRequest token of ``namespace/account`` (server and CA the
    admin's), its context in ``namespace``."""
    v1 = cluster.v1
    with contextlib.suppress(client.ApiException):  # z2jh's chart creates it, not the docs
        await cluster.call(
            v1.create_namespaced_service_account,
            namespace,
            {"metadata": {"name": account, "namespace": namespace}},
        )
    request = {"spec": {"expirationSeconds": 3600}}
    answer = await cluster.call(
        v1.create_namespaced_service_account_token, account, namespace, request
    )
    token = answer["status"]["token"]
    return write_kubeconfig(Path(cluster.kubeconfig), token, namespace, account, path)


@contextlib.asynccontextmanager
async def api_client(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    api = client.ApiClient(configuration=cfg)
    try:
        yield api
    finally:
        await api.close()


# --- what the service logs -----------------------------------------------------------------------


class Warnings(logging.Handler):
    """WARNING and above from the service's loggers (which may not propagate to caplog's root
    logger: the service routes them to its own handlers)."""

    LOGGERS = ("jupyter_gpupool", "GPUPoolService", "tornado.application")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self) -> list[str]:
        return [f"{r.name} {r.levelname}: {r.getMessage()}" for r in self.records]

    def forbidden(self) -> list[str]:
        return [line for line in self.lines() if re.search(r"forbidden|\b403\b", line, re.I)]

    @contextlib.contextmanager
    def listening(self) -> Iterator[Warnings]:
        """Capture; a failure inside gets what was logged as a note."""
        loggers = [logging.getLogger(name) for name in self.LOGGERS]
        for logger in loggers:
            logger.addHandler(self)
        try:
            yield self
        except BaseException as e:
            if self.records:
                e.add_note("the service logged:\n" + "\n".join(self.lines()))
            raise
        finally:
            for logger in loggers:
                logger.removeHandler(self)


# --- the test ------------------------------------------------------------------------------------


async def node_labels(cluster: Cluster, name: str) -> dict[str, str]:
    return dict((await cluster.node(name))["metadata"].get("labels") or {})


async def start_pod_for(cluster: Cluster, admission: dict[str, Any], name: str) -> None:
    """Create the admission's pod as the spawner would (as the admin) and wait until it runs
    on the node the admission reserved."""
    await cluster.create_pod(PODS_NAMESPACE, pod_for(admission, name, PODS_NAMESPACE))

    async def running() -> bool:
        pod = await cluster.pod(PODS_NAMESPACE, name) or {}
        node = (pod.get("spec") or {}).get("nodeName")
        return node == admission["node"] and (pod.get("status") or {}).get("phase") == "Running"

    await async_wait_for(running, what=f"pod {name} running on {admission['node']}", timeout=30)


async def test_the_service_needs_no_more_than_the_documented_rbac(
    realk8s_rbac_kubeconfig: Path, start_service, tmp_path: Path
) -> None:
    """With a token of the service account docs/service.md binds, and only the RBAC it
    documents, every Kubernetes call the service makes succeeds: no 403 in answers or logs."""
    docs = documented_rbac(DOCS.read_text())
    assert {d["kind"] for d in docs} >= {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    sa_namespace, sa_name = bound_service_account(docs)
    async with open_cluster(
        "real", realk8s_kubeconfig=realk8s_rbac_kubeconfig, authz="Node,RBAC"
    ) as cluster:
        await ensure_namespace(cluster, NAMESPACE)
        for doc in docs:
            await apply(cluster, doc)
        kubeconfig = await token_kubeconfig(cluster, sa_namespace, sa_name, tmp_path / "sa.yaml")
        await _check_restricted(kubeconfig)
        with Warnings().listening() as logged:
            await _scenario(cluster, kubeconfig, start_service)
            assert logged.forbidden() == []


async def _check_restricted(kubeconfig: Path) -> None:
    """RBAC is really on for this token: what the docs do not grant is refused with 403, not 401
    (so the token is the service account's). Dry runs: nothing would change if it were not."""
    cm = {"metadata": {"name": "x"}}
    async with api_client(kubeconfig) as api:
        v1 = client.CoreV1Api(api)
        refused = {
            "delete a node": await status_of(v1.delete_node, "node-6", dry_run="All"),
            "list secrets cluster-wide": await status_of(v1.list_secret_for_all_namespaces),
            f"create a ConfigMap in {PODS_NAMESPACE}": await status_of(
                v1.create_namespaced_config_map, PODS_NAMESPACE, cm, dry_run="All"
            ),
            f"list ConfigMaps in {NAMESPACE}": await status_of(
                v1.list_namespaced_config_map, NAMESPACE
            ),
            "patch a pod": await status_of(v1.patch_namespaced_pod, "p", PODS_NAMESPACE, {}),
        }
    assert refused == dict.fromkeys(refused, 403)


async def _scenario(cluster: Cluster, kubeconfig: Path, start_service: Any) -> None:
    service = await start_service(
        cluster,
        kubeconfig=str(kubeconfig),
        registry="configmap",  # in the kubeconfig context's namespace, as in-cluster its own
        reload_interval=0.2,
        reclaim_wait=20.0,
        sync_timeout=20.0,
    )
    admin = service.admin()
    v1 = cluster.v1

    # list and watch nodes and pods, cluster-wide: the same usage as a fresh list
    await service.settled()

    # the registry ConfigMap: created by the first change, replaced by the next ones
    pool_texts = [p.read_text() for p in sorted(TEST_POOLS.glob("*-pool.yaml"))]
    await admin.apply_pools("\n---\n".join(pool_texts))
    cm = await cluster.call(v1.read_namespaced_config_map, CONFIGMAP, NAMESPACE)
    assert len([k for k in cm["data"] if k.endswith("-pool.yaml")]) == 4
    await admin.put_quotas((TEST_POOLS / "quotas.yaml").read_text())
    cm = await cluster.call(v1.read_namespaced_config_map, CONFIGMAP, NAMESPACE)
    assert any("kind: quota" in text for text in cm["data"].values())

    # a pool that lists a node labels it; replacing a pool takes the label off a node it drops
    t4 = "kind: pool\nversion: v0.1\npool: {name: t4-pool}\nnodes:\n  node-6: {gpu-type: T4-16G}\n"
    await admin.apply_pools(t4)
    assert (await node_labels(cluster, "node-6"))[POOL_LABEL] == "t4-pool"
    inference = (TEST_POOLS / "inference-pool.yaml").read_text()
    await admin.apply_pools(re.sub(r"  gpu-node-4:\n    gpu-type: A10-24G\n", "", inference))
    assert POOL_LABEL not in await node_labels(cluster, "gpu-node-4")
    await admin.apply_pools(inference)
    assert (await node_labels(cluster, "gpu-node-4"))[POOL_LABEL] == "inference-pool"

    # labelling a node through the service (gpupool label node): read, then patch
    await admin.label_node("node-6", {"example.org/team": "vision"})
    assert (await admin.node_labels("node-6"))["example.org/team"] == "vision"
    assert (await node_labels(cluster, "node-6"))["example.org/team"] == "vision"

    # deleting a pool: its nodes (by label selector) lose the pool label
    await admin.delete_pool("t4-pool")
    assert POOL_LABEL not in await node_labels(cluster, "node-6")
    assert "t4-pool" not in {p["name"] for p in await admin.pools()}

    # a change made outside the service (kubectl edit configmap) is read back
    cm = await cluster.call(v1.read_namespaced_config_map, CONFIGMAP, NAMESPACE)
    key = next(k for k, text in cm["data"].items() if "name: dev-pool" in text)
    cm["data"][key] = cm["data"][key].replace("(low-end GPUs)", "(edited outside)")
    await cluster.call(v1.replace_namespaced_config_map, CONFIGMAP, NAMESPACE, cm)

    async def edited() -> bool:
        pools = {p["name"]: p for p in await admin.pools()}
        return "(edited outside)" in pools["dev-pool"]["description"]

    await async_wait_for(edited, what="the service to reload the edited ConfigMap", timeout=20)

    # admissions: two borrowers fill dev-pool's one node (4 GPUs), their pods start
    dave = await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)
    erin = await admin.admit(user="erin", groups=[], pools=["dev-pool"], gpus=2)
    assert dave["over_quota"] and erin["over_quota"]
    await start_pod_for(cluster, dave, "dave-nb")
    await start_pod_for(cluster, erin, "erin-nb")
    await async_wait_for(
        lambda: not service.ctx.state.reservations,
        what="the pods to end their admissions' reservations",
    )
    await service.settled()

    # reclaim: the hub does not know the borrowers' servers, so the service deletes a pod
    async def unknown(user: str, server: str) -> int:
        return 404

    service.hub.on_stop = unknown
    sam = await admin.admit(user="sam", groups=["students"], pools=["dev-pool"], gpus=2)
    assert sam["pool"] == "dev-pool" and sam["node"] == "gpu-node-5", sam
    [victim] = sam["reclaimed"]
    assert victim["user"] in ("dave", "erin")
    await cluster.wait_gone(PODS_NAMESPACE, f"{victim['user']}-nb")
    other = "erin" if victim["user"] == "dave" else "dave"
    assert await cluster.pod(PODS_NAMESPACE, f"{other}-nb") is not None
    assert await admin.release(sam["id"])

    # still in step with the cluster, and the watches never failed
    await service.settled()
    view = service.ctx.view
    assert view.stats["errors"] == 0 and view.last_error is None, view.last_error
    metrics = await admin.metrics()
    assert 'gpupool_admissions_total{result="error"}' not in metrics or (
        'gpupool_admissions_total{result="error"} 0.0' in metrics
    )
