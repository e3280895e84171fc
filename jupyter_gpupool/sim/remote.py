"""The simulator's node side on any Kubernetes API server: nodes and a kubelet, no control plane.

A real control plane (kube-apiserver, kube-scheduler, kube-controller-manager) has no nodes of its
own. :class:`RemoteNodes` registers the nodes of a cluster file on it as their kubelets would
(a Node, then its status: capacity, allocatable, conditions) and runs the simulator's
:class:`~.nodes.kubelet.Kubelet` for them: the pods the real scheduler binds to those nodes start as
local processes (``run_processes``) or are just marked Running, write their status, events and
exit as on the simulated cluster, and go away when deleted. So a single-user server started by
KubeSpawner on a real API server really runs and answers::

    async with RemoteNodes(kubeconfig, load_cluster_file("examples/cluster.yaml"),
                           run_processes=True) as nodes:
        ...  # the hub, the service and the CLI use `kubeconfig` as on any cluster

The kubelet follows the pods with a list and a watch (relisting when the watch breaks, e.g. when
the API server restarts). It serves no logs: ``kubectl logs`` needs a kubelet's own server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes_asyncio import client, config

from .cluster import NodeLifecycle, node_object
from .nodes.kubelet import Kubelet
from .nodes.partitions import Layout
from .nodes.podhost import PodListener
from .nodes.spec import ClusterSpec
from .objects.pod_events import pod_event

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
#: Objects of these namespaces are the cluster's own: :meth:`RemoteNodes.reset` leaves them.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


class RemoteError(client.ApiException):
    """An API call answered with an error status (``status``, and the server's ``message``)."""

    def __init__(self, status: int, message: str):
        super().__init__(status=status, reason=message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


async def api_json(call: Any, *args: Any, **kwargs: Any) -> Any:
    """One API call as plain JSON (no model objects); RemoteError on an error status."""
    resp = await call(*args, _preload_content=False, **kwargs)
    try:
        body = await resp.read()
    finally:
        resp.release()
    data = json.loads(body) if body else None
    if resp.status >= 400:
        message = data.get("message", "") if isinstance(data, dict) else body[:200].decode()
        raise RemoteError(resp.status, message)
    return data


class ApiHost:
    """The kubelet's :class:`~.nodes.podhost.PodHost` on an API server: pods from a list and a watch,
    writes through the API (status by merge patch, events, the final deletion)."""

    def __init__(self, api: client.ApiClient):
        self.v1 = client.CoreV1Api(api)
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._listeners: list[PodListener] = []
        self._task: asyncio.Task[None] | None = None
        self._last_stamp = 0
        self.relists = 0

    # --- following the pods ----------------------------------------------------------------------

    async def start(self) -> None:
        rv = await self._relist()
        self._task = asyncio.get_running_loop().create_task(self._follow(rv), name="remote-pods")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _relist(self) -> str:
        data = await api_json(self.v1.list_pod_for_all_namespaces)
        fresh = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in data["items"]}
        for key, old in list(self._pods.items()):
            if key not in fresh:
                self._apply("DELETED", old)
        for pod in fresh.values():
            self._apply("MODIFIED", pod)
        self.relists += 1
        return str(data["metadata"]["resourceVersion"])

    async def _follow(self, rv: str) -> None:
        while True:
            try:
                rv = await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a broken watch (410 Gone, a restarted API server …)
                log.info("pod watch ended (%s); listing again", e)
                await asyncio.sleep(0.2)
                with contextlib.suppress(Exception):
                    rv = await self._relist()

    async def _watch(self, rv: str) -> str:
        resp: Any = await self.v1.list_pod_for_all_namespaces(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=300,
            _preload_content=False,
            _request_timeout=330,
        )
        try:
            if resp.status >= 400:
                raise RemoteError(resp.status, (await resp.read())[:200].decode())
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise RemoteError(int(obj.get("code") or 0), str(obj.get("message")))
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if event.get("type") != "BOOKMARK":
                    self._apply(event["type"], obj)
        finally:
            resp.release()
        return rv

    def _apply(self, etype: str, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if etype == "DELETED":
            self._pods.pop(key, None)
        else:
            known = self._pods.get(key)
            if known is not None and _newer(known, pod):
                return  # our own write came back first
            self._pods[key] = pod
        for listener in list(self._listeners):
            listener(etype, pod)

    # --- the kubelet's PodHost -------------------------------------------------------------------

    def clock(self) -> float:
        return time.time()

    def pods(self) -> Iterable[dict[str, Any]]:
        return list(self._pods.values())

    def current(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        md = pod["metadata"]
        cur = self._pods.get((md["namespace"], md["name"]))
        if cur is None or cur["metadata"]["uid"] != md["uid"]:
            return None
        return cur

    def listen(self, listener: PodListener) -> None:
        self._listeners.append(listener)

    def unlisten(self, listener: PodListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    async def lookup(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        read = {
            "secrets": self.v1.read_namespaced_secret,
            "configmaps": self.v1.read_namespaced_config_map,
        }[plural]
        try:
            return await api_json(read, name, namespace)
        except RemoteError as e:
            if e.status == 404:
                return None
            raise

    async def write_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None:
        md = pod["metadata"]
        # the uid makes the patch fail on another pod of the same name; lists are replaced whole
        patch = {"metadata": {"uid": md["uid"]}, "status": status}
        try:
            written = await api_json(
                self.v1.patch_namespaced_pod_status,
                md["name"],
                md["namespace"],
                patch,
                _content_type=MERGE_PATCH,
            )
        except RemoteError as e:
            if e.status in (404, 409, 422):
                return  # gone or replaced meanwhile
            raise
        self._apply("MODIFIED", written)

    async def record_event(
        self, pod: Mapping[str, Any], etype: str, reason: str, message: str, host: str
    ) -> None:
        now = time.time()
        self._last_stamp = max(int(now * 1e9), self._last_stamp + 1)
        body = pod_event(dict(pod), etype, reason, message, "kubelet", host, now, self._last_stamp)
        with contextlib.suppress(RemoteError):
            await api_json(self.v1.create_namespaced_event, pod["metadata"]["namespace"], body)

    async def finish_deletion(self, pod: Mapping[str, Any]) -> None:
        md = pod["metadata"]
        with contextlib.suppress(RemoteError):
            await api_json(
                self.v1.delete_namespaced_pod,
                md["name"],
                md["namespace"],
                grace_period_seconds=0,
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": md["uid"]}},
            )


def _newer(known: Mapping[str, Any], seen: Mapping[str, Any]) -> bool:
    """That ``known`` is a later version than ``seen`` (resource versions compared as numbers,
    which they are on etcd; opaque strings elsewhere are never taken for older)."""
    try:
        return int(known["metadata"]["resourceVersion"]) > int(seen["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False


class RemoteNodes:
    """The nodes of ``spec`` on the API server of ``kubeconfig``, and a kubelet running their
    pods, while inside ``async with``."""

    def __init__(
        self,
        kubeconfig: str,
        spec: ClusterSpec,
        *,
        run_processes: bool = False,
        start_delay: float = 0.0,
    ):
        self.kubeconfig = kubeconfig
        self.spec = spec
        self.run_processes = run_processes
        self.start_delay = start_delay
        self.api: client.ApiClient | None = None
        self.host: ApiHost | None = None
        self.kubelet: Kubelet | None = None
        #: how partitioned nodes' GPUs are cut, by node name: the kubelet hands out their
        #: devices (a MIG manager on these nodes changes it)
        self.layouts: dict[str, Layout] = {}

    @property
    def v1(self) -> client.CoreV1Api:
        if self.api is None:
            raise RuntimeError("RemoteNodes has not started")
        return client.CoreV1Api(self.api)

    async def start(self, reset: bool = False) -> RemoteNodes:
        """Connect; with ``reset``, first empty the cluster of the last user's pods and nodes
        (:meth:`reset`); register the nodes and start the kubelet."""
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        self.api = client.ApiClient(configuration=cfg)
        if reset:
            await self.reset()
        await self.register()
        self.host = ApiHost(self.api)
        await self.host.start()
        self.layouts.clear()
        for node in self.spec.nodes:
            layout = node.gpu.layout()
            if layout is not None:
                self.layouts[node.name] = layout
        self.kubelet = Kubelet(
            self.host,
            run_processes=self.run_processes,
            start_delay=self.start_delay,
            layouts=self.layouts,
        )
        self.kubelet.start()
        return self

    async def stop(self) -> None:
        if self.kubelet is not None:
            await self.kubelet.stop()
            self.kubelet = None
        if self.host is not None:
            await self.host.stop()
            self.host = None
        if self.api is not None:
            await self.api.close()
            self.api = None

    async def __aenter__(self) -> RemoteNodes:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def register(self) -> None:
        """Create the namespaces and nodes of the spec, as their kubelets register nodes."""
        v1 = self.v1
        have = {n["metadata"]["name"] for n in (await api_json(v1.list_namespace))["items"]}
        for ns in ("default", *self.spec.namespaces):
            if ns not in have:
                await api_json(v1.create_namespace, {"metadata": {"name": ns}})
        for spec in self.spec.nodes:
            node = node_object(spec, time.time())
            await api_json(v1.create_node, {"metadata": node["metadata"], "spec": node["spec"]})
            await api_json(
                v1.patch_node_status,
                spec.name,
                {"status": node["status"]},
                _content_type=MERGE_PATCH,
            )
        await self._settle_taints()

    async def _settle_taints(self, timeout: float = 30) -> None:
        """The controller puts ``not-ready`` on a node created without a Ready condition and takes
        it off only on its next pass over a node's heartbeat; a kubelet's node is Ready at once
        here, so each node's taints are set to what the controller keeps for its status (and the
        cluster file's own), until they stay so."""
        v1 = self.v1
        deadline = time.monotonic() + timeout
        while True:
            nodes = (await api_json(v1.list_node))["items"]
            controller = {
                name: [{"key": k, "effect": e} for k, e in taints]
                for name, taints in NodeLifecycle.wanted(nodes).items()
            }
            own = {s.name: list(s.taints) for s in self.spec.nodes}
            wrong = []
            for n in nodes:
                name = n["metadata"]["name"]
                wanted = [*own.get(name, []), *controller.get(name, [])]
                have = (n.get("spec") or {}).get("taints") or []
                if _taint_keys(have) != _taint_keys(wanted):
                    wrong.append((name, wanted))
            if not wrong:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"node taints do not settle: {wrong}")
            for name, wanted in wrong:
                with contextlib.suppress(RemoteError):
                    await api_json(
                        v1.patch_node,
                        name,
                        {"spec": {"taints": wanted or None}},
                        _content_type=MERGE_PATCH,
                    )
            await asyncio.sleep(0.2)

    async def reset(self) -> None:
        """Back to an empty cluster: no pods, events, config maps or nodes left by an earlier
        user (a test), outside the cluster's own namespaces."""
        v1 = self.v1
        for ns in (await api_json(v1.list_namespace))["items"]:
            name = ns["metadata"]["name"]
            if name in SYSTEM_NAMESPACES:
                continue
            await api_json(v1.delete_collection_namespaced_pod, name, grace_period_seconds=0)
            await api_json(v1.delete_collection_namespaced_event, name)
            maps = (await api_json(v1.list_namespaced_config_map, name))["items"]
            for cm in maps:
                if cm["metadata"]["name"] != "kube-root-ca.crt":
                    with contextlib.suppress(RemoteError):
                        await api_json(
                            v1.delete_namespaced_config_map, cm["metadata"]["name"], name
                        )
        await api_json(v1.delete_collection_node)
        deadline = time.monotonic() + 30
        while (await api_json(v1.list_pod_for_all_namespaces))["items"] or (
            await api_json(v1.list_node)
        )["items"]:
            if time.monotonic() > deadline:
                raise RuntimeError("pods or nodes of an earlier run do not go away")
            await asyncio.sleep(0.1)


def _taint_keys(taints: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {(str(t.get("key")), str(t.get("effect"))) for t in taints}
