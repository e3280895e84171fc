"""Helpers of the service tests, importable by name (``from service_kit import ...``).

A test module cannot import them from ``conftest``: with tests of several folders in one run,
``conftest`` is whichever folder's conftest.py was imported first.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web
import yaml
from traitlets.config import Config
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolClient, GPUPoolError
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.service import GPUPoolService
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE, USE_SCOPE
from jupyter_gpupool.sim import SimCluster, sim_auth_headers, sim_ssl_context


@dataclass
class Identity:
    name: str
    kind: str = "user"
    groups: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)

    def model(self) -> dict[str, Any]:
        model: dict[str, Any] = {"kind": self.kind, "name": self.name, "scopes": self.scopes}
        if self.kind == "user":
            model["groups"] = self.groups
            model["admin"] = False
        return model


class HubStub:
    """JupyterHub's API as far as the gpupool service uses it."""

    SERVICE_TOKEN = "gpupool-service-token"

    def __init__(self) -> None:
        self.tokens: dict[str, Identity] = {}
        self.users: dict[str, Identity] = {}
        self.stopped: list[tuple[str, str]] = []
        self.on_stop: Callable[[str, str], Awaitable[int]] | None = None
        #: Users whose groups the hub cannot tell: ``GET /users/NAME`` answers 500
        self.failing_users: set[str] = set()
        self.user_lookups = 0
        self.url = ""
        self._server: tornado.httpserver.HTTPServer | None = None

    def token_for(self, ident: Identity) -> str:
        token = secrets.token_hex(16)
        self.tokens[token] = ident
        if ident.kind == "user":
            self.users[ident.name] = ident
        return token

    def user(self, name: str, groups: list[str] = (), scopes: list[str] | None = None) -> str:
        """A token of a user with ``custom:gpupool:use`` (or the given scopes)."""
        scopes = [USE_SCOPE] if scopes is None else scopes
        return self.token_for(Identity(name, "user", list(groups), list(scopes)))

    def service(self, name: str, scopes: list[str]) -> str:
        return self.token_for(Identity(name, "service", [], list(scopes)))

    def admin(self, name: str = "spawner") -> str:
        return self.service(name, [ADMIN_SCOPE])

    async def start(self) -> HubStub:
        stub = self

        class Base(tornado.web.RequestHandler):
            def ident(self) -> Identity | None:
                header = self.request.headers.get("Authorization", "")
                return stub.tokens.get(header.partition(" ")[2])

            def check_xsrf_cookie(self) -> None:
                pass

        class WhoAmI(Base):
            def get(self) -> None:
                ident = self.ident()
                if ident is None:
                    raise tornado.web.HTTPError(403)
                self.finish(json.dumps(ident.model()))

        class User(Base):
            def get(self, name: str) -> None:
                if self.request.headers.get("Authorization") != f"token {stub.SERVICE_TOKEN}":
                    raise tornado.web.HTTPError(403)
                stub.user_lookups += 1
                if name in stub.failing_users:
                    raise tornado.web.HTTPError(500)
                user = stub.users.get(name)
                if user is None:
                    raise tornado.web.HTTPError(404)
                self.finish(json.dumps({"name": name, "kind": "user", "groups": user.groups}))

        class Server(Base):
            async def delete(self, name: str, server: str = "") -> None:
                stub.stopped.append((name, server))
                code = 204
                if stub.on_stop is not None:
                    code = await stub.on_stop(name, server)
                self.set_status(code)
                self.finish()

        app = tornado.web.Application(
            [
                (r"/hub/api/user", WhoAmI),
                (r"/hub/api/users/([^/]+)", User),
                (r"/hub/api/users/([^/]+)/server", Server),
                (r"/hub/api/users/([^/]+)/servers/([^/]*)", Server),
            ]
        )
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self._server = tornado.httpserver.HTTPServer(app)
        self._server.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            await self._server.close_all_connections()


#: Where the service's moved clock starts (the ``now`` fixture): 2027-01-15 08:00 UTC
T0 = 1_800_000_000.0


# --- what the spawner does with an admission (until issue 5's spawner exists) --------------------


def pod_for(admission: dict[str, Any], name: str, namespace: str = "default") -> dict[str, Any]:
    """The pod a spawner would create for ``admission``: its overrides on a minimal pod."""
    o = admission["overrides"]
    container: dict[str, Any] = {"name": "notebook", "image": o.get("image", "jupyter/base")}
    if "resources" in o:
        container["resources"] = o["resources"]
    if "env" in o:
        container["env"] = o["env"]
    spec: dict[str, Any] = {"containers": [container], "nodeSelector": o.get("nodeSelector", {})}
    for key in ("tolerations", "affinity"):
        if key in o:
            spec[key] = o[key]
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": o.get("labels", {}),
            "annotations": o.get("annotations", {}),
        },
        "spec": spec,
    }


async def start_pod(
    cluster: SimCluster, admission: dict[str, Any], name: str, bound: bool = True
) -> dict[str, Any]:
    """Create the admission's pod in the simulated cluster, and wait until it is bound."""
    cluster.store.create("pods", "default", pod_for(admission, name))
    if bound:
        await cluster.wait_for(
            lambda: (cluster.pod("default", name) or {}).get("spec", {}).get("nodeName")
        )
    return cluster.pod("default", name) or {}


async def delete_pod(cluster: SimCluster, name: str) -> None:
    cluster.store.delete("pods", "default", name, grace_period=0)
    await cluster.wait_for(lambda: cluster.pod("default", name) is None)


def picture(index: UsageIndex) -> dict[str, Any]:
    """Everything usage-related an index reports, in comparable form."""
    return {
        "pools": index.pools(),
        "nodes": index.nodes(),
        "users": index.usage_by_user(),
        "subjects": index.usage_by_subject(),
        "servers": sorted((s.namespace, s.name, s.node, s.gpus, s.state) for s in index.servers()),
    }


class Running:
    """A service started in this process, and ways to talk to it. ``truth()`` builds a usage
    index from a fresh list of the cluster's nodes and pods: what the cluster says."""

    def __init__(
        self,
        app: GPUPoolService,
        hub: HubStub,
        cluster: Any,
        truth: Callable[[], Awaitable[UsageIndex]],
    ):
        self.app = app
        self.hub = hub
        self.cluster = cluster
        self._truth = truth
        self.url = f"http://127.0.0.1:{app.port}{app.base_url}"
        self._clients: list[GPUPoolClient] = []

    @property
    def ctx(self) -> Any:
        return self.app.ctx

    async def settled(self, timeout: float = 10) -> dict[str, Any]:
        """Wait until the service's usage index says what a fresh list of the cluster says;
        return that picture."""

        async def same() -> dict[str, Any] | None:
            fresh = picture(await self._truth())
            return fresh if picture(self.ctx.state.index) == fresh else None

        return await async_wait_for(
            same, what="the service's usage to equal a fresh list", timeout=timeout
        )

    def client(self, token: str, **kw: Any) -> GPUPoolClient:
        c = GPUPoolClient(self.url, token, **kw)
        self._clients.append(c)
        return c

    def admin(self) -> GPUPoolClient:
        return self.client(self.hub.admin())

    def user(self, name: str, groups: list[str] = ()) -> GPUPoolClient:
        return self.client(self.hub.user(name, list(groups)))

    async def stop(self) -> None:
        for c in self._clients:
            await c.close()
        await self.app.stop_service()


def service_config(kubeconfig: str, hub: HubStub, pools_dir: Path, **traits: Any) -> Config:
    c = Config()
    c.GPUPoolService.ip = "127.0.0.1"
    c.GPUPoolService.port = 0
    c.GPUPoolService.base_url = "/services/gpupool/"
    c.GPUPoolService.pools_dir = str(pools_dir)
    c.GPUPoolService.kubeconfig = kubeconfig
    c.GPUPoolService.hub_api_url = hub.url + "/hub/api"
    c.GPUPoolService.api_token = hub.SERVICE_TOKEN
    c.GPUPoolService.reload_interval = 0
    c.GPUPoolService.summary_cache_seconds = 0
    c.GPUPoolService.log_level = "WARN"
    c.GPUPoolService.db_url = f"sqlite:///{pools_dir.parent / 'gpupool.sqlite'}"
    for name, value in traits.items():
        setattr(c.GPUPoolService, name, value)
    return c


class ServiceProcess:
    """``python -m jupyter_gpupool.service`` in a subprocess, pointed at the stub hub.

    ``db_url`` is its database (default: ``gpupool.sqlite`` next to ``log``); ``extra_args`` are
    added to its command line (``--GPUPoolService.history_interval=0.5``...)."""

    def __init__(
        self,
        cluster: SimCluster,
        hub: HubStub,
        pools_dir: Path,
        log: Path,
        *,
        db_url: str | None = None,
        extra_args: Sequence[str] = (),
    ):
        self.port = free_port()
        self.cluster, self.hub, self.pools_dir, self.log = cluster, hub, pools_dir, log
        self.db_url = db_url or f"sqlite:///{log.parent / 'gpupool.sqlite'}"
        self.extra_args = list(extra_args)
        self.url = f"http://127.0.0.1:{self.port}/services/gpupool/"
        self.proc: subprocess.Popen[bytes] | None = None

    def _spawn(self) -> None:
        env = {
            **os.environ,
            "JUPYTERHUB_API_URL": self.hub.url + "/hub/api",
            "JUPYTERHUB_API_TOKEN": self.hub.SERVICE_TOKEN,
            "JUPYTERHUB_SERVICE_PREFIX": "/services/gpupool/",
            "JUPYTERHUB_CLIENT_ID": "service-gpupool",
        }
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jupyter_gpupool.service",
                    f"--port={self.port}",
                    f"--kubeconfig={self.cluster.kubeconfig}",
                    f"--pools={self.pools_dir}",
                    f"--db-url={self.db_url}",
                    *self.extra_args,
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    async def start(self) -> None:
        self._spawn()
        assert self.proc is not None
        probe = GPUPoolClient(self.url, self.hub.admin(), request_timeout=2)
        deadline = time.monotonic() + 30
        try:
            while True:
                try:
                    await probe.info()
                    return
                except GPUPoolError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(self.log.read_text()[-3000:]) from None
                    await asyncio.sleep(0.1)
        finally:
            await probe.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


# --- GPU telemetry of the simulated cluster (issue 17) ------------------------------------------

#: The documented annotation that makes a pod the simulated DCGM exporter of its node (docs/sim.md)
EXPORTER_ANNOTATION = "sim.gpupool.jupyter.org/dcgm-exporter"


def exporter_pod(node: str, name: str | None = None, exporter: bool = True) -> dict[str, Any]:
    """The GPU Operator's dcgm-exporter pod for ``node``, as its DaemonSet makes it (bound to
    the node, port 9400), with the simulator's annotation (``exporter=False``: without)."""
    return {
        "metadata": {
            "name": name or f"nvidia-dcgm-exporter-{node}",
            "labels": {"app": "nvidia-dcgm-exporter"},
            "annotations": {EXPORTER_ANNOTATION: "true"} if exporter else {},
        },
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "nvidia-dcgm-exporter",
                    "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04",
                    "ports": [{"name": "metrics", "containerPort": 9400}],
                }
            ],
        },
    }


def sim_put(kubeconfig: Path, path: str, body: Any) -> None:
    """``PUT`` to a control endpoint of a simulated cluster running in another process."""
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    req = urllib.request.Request(
        f"{server}/sim/v1/{path}",
        method="PUT",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **sim_auth_headers(kubeconfig)},
    )
    with urllib.request.urlopen(req, context=sim_ssl_context(kubeconfig), timeout=10) as r:
        assert r.status == 200


def set_utilization(kubeconfig: Path, namespace: str, pod: str, percent: int) -> None:
    """Set a pod's GPU utilization (``PUT /sim/v1/namespaces/NS/pods/NAME/gpu-utilization``)."""
    sim_put(kubeconfig, f"namespaces/{namespace}/pods/{pod}/gpu-utilization", {"percent": percent})


def set_dcgm_reachable(kubeconfig: Path, node: str, reachable: bool) -> None:
    """Make a node's DCGM exporter answer or not (``PUT /sim/v1/dcgm/nodes/NAME``)."""
    sim_put(kubeconfig, f"dcgm/nodes/{node}", {"reachable": reachable})
