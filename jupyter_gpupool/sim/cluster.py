"""A running simulated cluster: store, scheduler, kubelet and HTTP server, in-process.

::

    async with SimCluster.from_file("examples/cluster.yaml") as cluster:
        # cluster.url, cluster.kubeconfig (a kubeconfig file for any Kubernetes client),
        # cluster.token (the bearer token every request needs; it is in the kubeconfig),
        # cluster.auth_headers and cluster.ssl_context for raw HTTPS requests
        cluster.cordon("gpu-node-1")
        cluster.set_condition("gpu-node-2", "Ready", False)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import socket
import ssl
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tornado.httpserver
import tornado.netutil

from .api.server import make_app
from .credentials import TLSIdentity, kubeconfig_text, new_tls_identity, new_token, write_private
from .nodes.dcgm import DcgmExporter
from .nodes.kubelet import Kubelet
from .nodes.migmanager import MigManager
from .nodes.partitions import Layout
from .nodes.spec import (
    CONDITION_TYPES,
    ClusterSpec,
    NodeSpec,
    load_cluster_file,
    node_spec_from_dict,
)
from .objects.defaults import now_iso
from .objects.errors import ApiError
from .objects.faults import Faults
from .objects.resources import RESOURCES
from .objects.store import Store
from .objects.watches import WatchEvent
from .scheduler import Scheduler

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def node_object(spec: NodeSpec, now: float) -> dict[str, Any]:
    """The Node a kubelet with this spec would register."""
    ts = now_iso(now)
    cap = spec.capacity()
    conds = []
    for ctype in CONDITION_TYPES:
        ok = spec.condition_status(ctype)
        reasons = {
            "Ready": ("KubeletReady", "KubeletNotReady"),
            "MemoryPressure": ("KubeletHasSufficientMemory", "KubeletHasInsufficientMemory"),
            "DiskPressure": ("KubeletHasNoDiskPressure", "KubeletHasDiskPressure"),
            "PIDPressure": ("KubeletHasSufficientPID", "KubeletHasInsufficientPID"),
            "NetworkUnavailable": ("RouteCreated", "NoRouteCreated"),
        }[ctype]
        good = ok if ctype == "Ready" else not ok
        conds.append(
            {
                "type": ctype,
                "status": "True" if ok else "False",
                "reason": reasons[0] if good else reasons[1],
                "message": f"simulated: {ctype} is {'True' if ok else 'False'}",
                "lastHeartbeatTime": ts,
                "lastTransitionTime": ts,
            }
        )
    node: dict[str, Any] = {
        "metadata": {
            "name": spec.name,
            "labels": spec.all_labels(),
            "annotations": dict(spec.annotations),
        },
        "spec": {"taints": copy.deepcopy(spec.taints)} if spec.taints else {},
        "status": {
            "capacity": cap,
            "allocatable": dict(cap),
            "conditions": conds,
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": spec.name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0-gpupool-sim",
                "kubeProxyVersion": "v1.32.0-gpupool-sim",
                "osImage": "gpupool simulated node",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "sim://1.0",
                "kernelVersion": "sim",
                "machineID": spec.name,
                "systemUUID": spec.name,
                "bootID": spec.name,
            },
        },
    }
    if spec.unschedulable:
        node["spec"]["unschedulable"] = True
    return node


# The taints the node lifecycle controller (kube-controller-manager) manages, by what it reads:
# ``(condition, status)`` for the NoSchedule taints of TaintNodesByCondition.
CONDITION_TAINTS = {
    ("Ready", "False"): "node.kubernetes.io/not-ready",
    ("Ready", "Unknown"): "node.kubernetes.io/unreachable",
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_NO_EXECUTE = {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"}
_MANAGED = {(k, "NoSchedule") for k in (*CONDITION_TAINTS.values(), UNSCHEDULABLE_TAINT)} | {
    (k, "NoExecute") for k in _NO_EXECUTE.values()
}
_ZONE_LABELS = ("topology.kubernetes.io/region", "topology.kubernetes.io/zone")
# Zones of at most this many nodes stop evicting (no new NoExecute taint) when partly disrupted.
_LARGE_CLUSTER = 50


def _ready_status(node: Mapping[str, Any]) -> str:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status") or "Unknown")
    return "Unknown"


class NodeLifecycle:
    """What kube-controller-manager's node lifecycle controller writes on nodes: taints.

    - ``node.kubernetes.io/unschedulable:NoSchedule`` on a cordoned node;
    - ``NoSchedule`` taints for bad conditions: ``not-ready`` (Ready False), ``unreachable``
      (Ready Unknown), ``memory-pressure``, ``disk-pressure``, ``pid-pressure``,
      ``network-unavailable``;
    - ``not-ready:NoExecute`` / ``unreachable:NoExecute`` on a node whose Ready is False /
      Unknown, except where the controller stops evicting: when every node of every zone is
      not Ready ("master disruption mode": the taints are removed) or in a small zone more than
      55 % (and more than 2) of whose nodes are not Ready (none added).

    Each taint carries ``timeAdded``. As the real controller, it writes after the change it reacts
    to (a second update: a cordon's PATCH answers without the taint), though at once (the real
    one adds NoExecute taints on its next 5 s pass). It does not evict pods (no taint manager).
    """

    def __init__(self, store: Store):
        self.store = store
        self._dirty = False  # a node changed since the last pass
        self._scheduled = False  # a pass is due on the event loop

    def start(self) -> None:
        if self._on_event not in self.store.listeners:
            self.store.listeners.append(self._on_event)
        self.reconcile()

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.listeners.remove(self._on_event)

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.resource != "nodes":
            return
        self._dirty = True
        if not self._scheduled:
            with contextlib.suppress(RuntimeError):  # no loop: settle() does it
                asyncio.get_running_loop().call_soon(self.reconcile)
                self._scheduled = True

    def settle(self) -> None:
        """Without an event loop (a cluster changed before it serves): the pass, now."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._dirty:
                self.reconcile()

    @staticmethod
    def wanted(nodes: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
        """Each node's controller taints ``(key, effect)``, in the order the controller adds them."""
        zones: dict[tuple[str, ...], list[str]] = {}
        for n in nodes:
            labels = n["metadata"].get("labels") or {}
            zones.setdefault(tuple(labels.get(k, "") for k in _ZONE_LABELS), []).append(
                _ready_status(n)
            )

        def evicting(zone: list[str]) -> bool:
            bad = sum(s != "True" for s in zone)
            partial = bad > 2 and bad / len(zone) >= 0.55 and bad < len(zone)
            return not (partial and len(zone) <= _LARGE_CLUSTER)

        all_down = all(all(s != "True" for s in z) for z in zones.values())
        out = {}
        for n in nodes:
            spec = n.get("spec") or {}
            conds = {
                c.get("type"): c.get("status")
                for c in (n.get("status") or {}).get("conditions") or []
            }
            conds.setdefault("Ready", "Unknown")
            taints = [
                (key, "NoSchedule") for (t, s), key in CONDITION_TAINTS.items() if conds.get(t) == s
            ]
            if spec.get("unschedulable"):
                taints.append((UNSCHEDULABLE_TAINT, "NoSchedule"))
            ready = conds["Ready"]
            if ready != "True" and not all_down:
                labels = n["metadata"].get("labels") or {}
                zone = zones[tuple(labels.get(k, "") for k in _ZONE_LABELS)]
                have = {(t.get("key"), t.get("effect")) for t in spec.get("taints") or []}
                if evicting(zone) or (_NO_EXECUTE[ready], "NoExecute") in have:
                    taints.append((_NO_EXECUTE[ready], "NoExecute"))
            out[n["metadata"]["name"]] = taints
        return out

    def reconcile(self) -> None:
        """Write the controller's taints on every node whose taints differ."""
        self._dirty = self._scheduled = False
        nodes = list(self.store.iter("nodes"))
        wanted = self.wanted(nodes)
        ts = now_iso(self.store.clock())
        for n in nodes:
            want = wanted[n["metadata"]["name"]]
            have = list((n.get("spec") or {}).get("taints") or [])
            keep = [
                t
                for t in have
                if (t.get("key"), t.get("effect")) not in _MANAGED
                or (t.get("key"), t.get("effect")) in want
            ]
            present = {(t.get("key"), t.get("effect")) for t in keep}
            added = [
                {"key": k, "effect": e, "timeAdded": ts} for k, e in want if (k, e) not in present
            ]
            if added or len(keep) != len(have):
                new = copy.deepcopy(n)
                new.setdefault("spec", {})
                if keep or added:
                    new["spec"]["taints"] = copy.deepcopy(keep) + added
                else:
                    new["spec"].pop("taints", None)
                name = n["metadata"]["name"]
                self.store.write_internal(RESOURCES["nodes"], ("", name), n, new)


class SimCluster:
    """The simulated cluster, serving on 127.0.0.1 while inside ``async with``."""

    def __init__(
        self,
        spec: ClusterSpec | None = None,
        *,
        port: int = 0,
        kubeconfig: str | os.PathLike[str] | None = None,
        run_processes: bool = False,
        start_delay: float = 0.0,
        mig_delay: float = 0.05,
        history_size: int = 10000,
        clock: Callable[[], float] | None = None,
    ):
        self.spec = spec or ClusterSpec()
        self.port = port
        self._kubeconfig_arg = kubeconfig
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self.kubeconfig = ""
        self.store = Store(history_size=history_size, **({"clock": clock} if clock else {}))
        self.scheduler = Scheduler(self.store)
        #: how partitioned nodes' GPUs are cut (MIG, shared, HAMi), by node name: the kubelet
        #: hands out their devices and the DCGM exporter reports them
        self.layouts: dict[str, Layout] = {}
        self.node_specs: dict[str, NodeSpec] = {}
        self.kubelet = Kubelet(
            self.store, run_processes=run_processes, start_delay=start_delay, layouts=self.layouts
        )
        self.node_lifecycle = NodeLifecycle(self.store)
        #: re-partitions GPU nodes when their ``nvidia.com/mig.config`` label changes
        #: (``nvidia.com/mig.config.state`` pending, rebooting, success), ``mig_delay`` seconds
        #: between two steps; the cluster file's ``mig-parted-config`` names the configs
        self.mig_manager = MigManager(
            self.store,
            self.kubelet.devices,
            self.node_specs,
            self.layouts,
            self.node_lifecycle.settle,
            mig_delay,
            self.spec.mig_configs,
        )
        self.mig_manager.start()
        # GPU telemetry (GET /sim/v1/dcgm/metrics), from the kubelet's table of GPUs per pod.
        self.dcgm = DcgmExporter(self.store, self.kubelet.devices)
        self.dcgm.start()
        self.faults = Faults(store=self.store)
        self._server: tornado.httpserver.HTTPServer | None = None
        self.url = ""
        # A new secret per cluster: the API server answers only requests that carry it (see
        # credentials.py for why it serves HTTPS with a certificate of its own).
        self.token = new_token()
        self.tls: TLSIdentity | None = None
        self._populate()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> SimCluster:
        return cls(load_cluster_file(path), **kwargs)

    def _populate(self) -> None:
        for ns in (*SYSTEM_NAMESPACES, *self.spec.namespaces):
            if self.store.find("namespaces", None, ns) is None:
                self.store.create("namespaces", None, {"metadata": {"name": ns}})
        for n in self.spec.nodes:
            self._create_node(n)
        self.node_lifecycle.start()
        self.store.create("serviceaccounts", "default", {"metadata": {"name": "default"}})

    def _create_node(self, spec: NodeSpec) -> dict[str, Any]:
        body = node_object(spec, self.store.clock())
        # Status is written as the kubelet would: through the store directly, not the API.
        node = self.store.create("nodes", None, body)
        self.node_specs[spec.name] = spec
        layout = spec.gpu.layout()
        if layout is not None:
            self.layouts[spec.name] = layout
        self.node_lifecycle.settle()
        return node

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> SimCluster:
        sockets = tornado.netutil.bind_sockets(self.port, "127.0.0.1", family=socket.AF_INET)
        self.port = sockets[0].getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.tls = new_tls_identity()
        self._server = tornado.httpserver.HTTPServer(
            make_app(self), ssl_options=self.tls.server_context(), idle_connection_timeout=3600
        )
        self._server.add_sockets(sockets)
        self.node_lifecycle.start()
        self.scheduler.start()
        self.kubelet.start()
        self.mig_manager.start()
        if self._kubeconfig_arg:
            path = Path(self._kubeconfig_arg)
        else:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="gpupool-sim-")
            path = Path(self._tmpdir.name) / "kubeconfig"
        write_private(path, kubeconfig_text(self.url, self.token, self.tls.ca_pem))
        self.kubeconfig = str(path)
        return self

    @property
    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization`` header for raw HTTP requests to this cluster."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """A TLS context that trusts this cluster, for raw HTTP requests (once started)."""
        if self.tls is None:
            raise RuntimeError("the cluster has not started")
        return self.tls.client_context()

    async def stop(self) -> None:
        self.store.cut_watches()
        self.node_lifecycle.stop()
        self.mig_manager.stop()
        self.dcgm.stop()
        await self.kubelet.stop()
        await self.scheduler.stop()
        if self._server is not None:
            self._server.stop()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.close_all_connections(), 5)
            self._server = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    async def __aenter__(self) -> SimCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- changing the cluster while it runs -------------------------------------------------

    def add_node(self, node: NodeSpec | Mapping[str, Any]) -> dict[str, Any]:
        """Add a node (a :class:`NodeSpec` or a cluster-file node mapping)."""
        spec = node if isinstance(node, NodeSpec) else node_spec_from_dict(node)
        return self._create_node(spec)

    def remove_node(self, name: str) -> None:
        """Remove a node; its pods are deleted at once, as the pod garbage collector does."""
        self.store.get("nodes", None, name)
        for pod in list(self.store.iter("pods")):
            if (pod.get("spec") or {}).get("nodeName") == name:
                md = pod["metadata"]
                with contextlib.suppress(ApiError):
                    self.store.delete("pods", md["namespace"], md["name"], grace_period=0)
        self.store.delete("nodes", None, name)
        self.mig_manager.forget(name)
        self.layouts.pop(name, None)
        self.node_specs.pop(name, None)
        self.node_lifecycle.settle()

    def cordon(self, name: str, unschedulable: bool = True) -> dict[str, Any]:
        return self._update_node(
            name, lambda n: n["spec"].__setitem__("unschedulable", unschedulable)
        )

    def set_condition(self, name: str, ctype: str, status: bool | str) -> dict[str, Any]:
        """Set a node condition, as its kubelet would (``"Unknown"``: as the node lifecycle
        controller does when the kubelet stops posting status). The controller's taints follow
        in a second update."""
        if ctype not in CONDITION_TYPES:
            raise ValueError(
                f"unknown condition {ctype!r}; expected one of {', '.join(CONDITION_TYPES)}"
            )
        if isinstance(status, str) and status not in ("True", "False", "Unknown"):
            raise ValueError(f"condition status {status!r}: expected True, False or Unknown")
        new = status if isinstance(status, str) else ("True" if status else "False")

        def change(n: dict[str, Any]) -> None:
            ts = now_iso(self.store.clock())
            for c in n["status"]["conditions"]:
                if c["type"] == ctype:
                    if c["status"] != new:
                        c["status"] = new
                        c["lastTransitionTime"] = ts
                        c["message"] = f"simulated: {ctype} is {new}"
                        if ctype == "Ready":
                            c["reason"] = {"True": "KubeletReady", "False": "KubeletNotReady"}.get(
                                new, "NodeStatusUnknown"
                            )
                        if new == "Unknown":
                            c["message"] = "Kubelet stopped posting node status."
                    c["lastHeartbeatTime"] = ts

        return self._update_node(name, change)

    def label_node(self, name: str, key: str, value: str | None) -> dict[str, Any]:
        def change(n: dict[str, Any]) -> None:
            labels = n["metadata"].setdefault("labels", {})
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value

        return self._update_node(name, change)

    def repartition(
        self, name: str, mig: Mapping[str, Any], config: str = "custom"
    ) -> dict[str, Any]:
        """Start re-partitioning node ``name``'s MIG GPUs as ``mig`` (a cluster file's
        ``gpu.mig``), as NVIDIA's MIG manager does: ``nvidia.com/mig.config=config`` and
        ``nvidia.com/mig.config.state=pending`` now (the node, returned), then, ``mig_delay``
        seconds apart, ``rebooting`` and ``pending`` again when a GPU's MIG mode changes, and
        ``success`` with the new allocatable. ApiError 409 while pods hold devices of the GPUs
        it would change (the state left ``failed``) or while the node is re-partitioned
        already, 400 for a layout that can't be, 404 for no such node.
        ``self.mig_manager.finish(name)`` ends it at once."""
        return self.mig_manager.repartition(name, mig, config)

    def _update_node(self, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        old = self.store.get("nodes", None, name)
        new = copy.deepcopy(old)
        new.setdefault("spec", {})
        change(new)
        node = self.store.write_internal(RESOURCES["nodes"], ("", name), old, new)
        self.node_lifecycle.settle()
        return node

    # ---- GPU telemetry: the simulated DCGM exporter (see .dcgm) ------------------------------

    def set_gpu_utilization(
        self, namespace: str, name: str, percent: int | Sequence[int]
    ) -> dict[str, Any]:
        """Set what the pod's GPUs report as their utilization (whole percent, 0 to 100): one
        number for all, or one per GPU in the order the pod sees them (its
        ``NVIDIA_VISIBLE_DEVICES``); the setting, as :meth:`gpu_utilization` answers. ApiError
        404 for an unknown pod, 400 for a bad percent."""
        # the exporter reads JSON: a list sets each GPU, anything else all of them
        setting = list(percent) if isinstance(percent, (list, tuple)) else percent
        return self.dcgm.set(namespace, name, setting)

    def gpu_utilization(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod's setting: ``percent``, ``source`` (``put``, ``annotation`` or ``default``),
        the ``node`` and ``gpus`` (``gpu``, ``UUID``, ``container``) it holds."""
        return self.dcgm.get(namespace, name)

    def set_dcgm_reachable(self, node: str, reachable: bool) -> dict[str, Any]:
        """Make the node's DCGM exporter answer or not (see :meth:`.nodes.dcgm.DcgmExporter.
        set_reachable`)."""
        return self.dcgm.set_reachable(node, reachable)

    def dcgm_metrics(self, node: str | None = None) -> str:
        """What NVIDIA's DCGM exporter would serve for every GPU node (or ``node`` only), in
        Prometheus' text format."""
        return self.dcgm.render(node)

    # ---- conveniences for tests ------------------------------------------------------------

    async def wait_for(
        self,
        predicate: Callable[[], Any],
        timeout: float = 10.0,
        interval: float = 0.02,
    ) -> Any:
        """Poll ``predicate`` until it returns something truthy (or raise TimeoutError)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if loop.time() > deadline:
                raise TimeoutError(f"condition not met within {timeout}s")
            await asyncio.sleep(interval)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.find("pods", namespace, name)

    def events_for(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.store.iter("events", namespace)
            if (e.get("involvedObject") or {}).get("name") == name
        ]
