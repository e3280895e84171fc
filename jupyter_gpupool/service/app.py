"""``python -m jupyter_gpupool.service``: the gpupool service as a traitlets Application.

It is meant to run as a JupyterHub-managed service named ``gpupool``: the hub starts it with the
``JUPYTERHUB_*`` environment (API URL and token, service prefix, OAuth client id) and proxies
``/services/gpupool/`` to it. ``docs/service.md`` has the hub configuration; every setting below
can be given on the command line (``--port``, ``--pools``...) or in a config file
(``c.GPUPoolService.x = ...``, ``--config FILE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import tornado.httpserver
import tornado.netutil
import tornado.web
from jinja2 import Environment
from jupyterhub.services.auth import HubOAuth
from jupyterhub.traitlets import ByteSpecification
from traitlets import (
    CaselessStrEnum,
    Float,
    Integer,
    List,
    TraitError,
    Unicode,
    default,
    validate,
)
from traitlets.config import Application, catch_config_error

from .. import __version__
from ..core.labels import POOL_LABEL, is_label_key, is_label_value
from ..core.yamldoc import DocumentError
from . import clock, handlers, pages
from .admissions import AdmissionDesk
from .changelog import ChangeLog
from .clusterview import ClusterView
from .errors import ApiError
from .history import UsageHistory
from .hubapi import HubAPI
from .kube import Kube, KubeError, default_namespace, make_api_client
from .metrics import Metrics
from .poolchanges import PoolManager
from .registrystore import ConfigMapStore, FileStore, RegistryStore
from .state import ServiceState
from .templating import STATIC, make_environment

SERVICE_NAME = "gpupool"


class StartupError(Exception):
    """The service cannot start; the message says why and what to change."""


@dataclass
class ServiceContext:
    """What the handlers reach: the live state and the objects that change it."""

    state: ServiceState
    desk: AdmissionDesk
    pools: PoolManager
    metrics: Metrics
    hub_auth: HubOAuth
    hub: HubAPI | None
    kube: Kube
    view: ClusterView
    base_url: str
    max_body_size: int
    max_gpus: int
    # the pages: usage over time, who changed what, and the templates
    history: UsageHistory = field(default_factory=UsageHistory)
    changes: ChangeLog = field(default_factory=ChangeLog)
    templates: Environment = field(default_factory=make_environment)

    async def user_groups(self, user: str) -> tuple[str, ...]:
        if self.hub is None:
            return ()
        return await self.hub.user_groups(user)

    async def get_node(self, name: str) -> dict[str, Any]:
        try:
            node = await self.kube.get_node(name)
        except KubeError as e:
            raise ApiError(503, f"cannot read node {name}: {e.message}") from e
        if node is None:
            raise ApiError(404, f"node {name!r} not found")
        return node


def _service_url() -> str:
    return os.environ.get("JUPYTERHUB_SERVICE_URL", "")


class GPUPoolService(Application):
    """The gpupool JupyterHub service: pools, quotas, admission and usage."""

    name = "gpupool-service"
    version = __version__
    description = """The gpupool JupyterHub service.

    Holds GPU pools and quotas, admits spawns against them, and reports usage, from a live view
    of the cluster's nodes and pods. Run it as a JupyterHub-managed service named 'gpupool'
    (see docs/service.md); it listens on 127.0.0.1 unless told otherwise.
    """
    examples = """
    python -m jupyter_gpupool.service --pools=/srv/gpupool/pools
    python -m jupyter_gpupool.service --registry=configmap --configmap-namespace=jhub --ip=0.0.0.0
    """

    aliases = {
        "ip": "GPUPoolService.ip",
        "port": "GPUPoolService.port",
        "base-url": "GPUPoolService.base_url",
        "pools": "GPUPoolService.pools_dir",
        "registry": "GPUPoolService.registry",
        "configmap-namespace": "GPUPoolService.configmap_namespace",
        "configmap-name": "GPUPoolService.configmap_name",
        "kubeconfig": "GPUPoolService.kubeconfig",
        "pool-label": "GPUPoolService.pool_label",
        "reservation-ttl": "GPUPoolService.reservation_ttl",
        "config": "GPUPoolService.config_file",
        "log-level": "Application.log_level",
    }

    config_file = Unicode(
        "",
        help="""A Python config file to load before the command line is applied.

        Settings in it look like ``c.GPUPoolService.port = 10101``. The command line wins over
        the file.

        Example (command line)::

            python -m jupyter_gpupool.service --config=/etc/gpupool/gpupool_service_config.py
        """,
    ).tag(config=True)

    # --- where it listens ------------------------------------------------------------------------

    ip = Unicode(
        "127.0.0.1",
        help="""The address to listen on.

        The default, 127.0.0.1, is right when the proxy runs on the same host as the hub (a
        plain JupyterHub). In zero-to-jupyterhub the proxy runs in another pod and reaches the
        service at the hub pod's address, so listen on all addresses there.

        Example::

            c.GPUPoolService.ip = "0.0.0.0"
        """,
    ).tag(config=True)

    port = Integer(
        help="""The port to listen on.

        Defaults to the port of the service's ``url`` in ``c.JupyterHub.services`` (the hub
        passes it as ``$JUPYTERHUB_SERVICE_URL``), else 10101.

        Example::

            c.GPUPoolService.port = 10101
        """,
    ).tag(config=True)

    @default("port")
    def _default_port(self) -> int:
        url = _service_url()
        if url:
            parsed = urlparse(url)
            if parsed.port:
                return parsed.port
            return 443 if parsed.scheme == "https" else 80
        return 10101

    @validate("port")
    def _check_port(self, proposal: Any) -> int:
        port = int(proposal["value"])
        if not 0 <= port <= 65535:
            raise TraitError(f"port must be between 0 and 65535, not {port}")
        return port

    base_url = Unicode(
        help="""The URL prefix the service answers under.

        Defaults to ``$JUPYTERHUB_SERVICE_PREFIX``, which the hub sets to
        ``/services/<name>/`` (with the hub's own base URL in front), else ``/services/gpupool/``.

        Example::

            c.GPUPoolService.base_url = "/jupyter/services/gpupool/"
        """,
    ).tag(config=True)

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{SERVICE_NAME}/"

    @validate("base_url")
    def _slashes(self, proposal: Any) -> str:
        value = "/" + str(proposal["value"]).strip("/") + "/"
        return value.replace("//", "/")

    # --- the hub ---------------------------------------------------------------------------------

    hub_api_url = Unicode(
        help="""JupyterHub's REST API URL, used to check tokens, look up users' groups and stop
        servers that are reclaimed.

        Defaults to ``$JUPYTERHUB_API_URL`` (set by the hub for managed services).

        Example::

            c.GPUPoolService.hub_api_url = "http://hub:8081/hub/api"
        """,
    ).tag(config=True)

    @default("hub_api_url")
    def _default_hub_api_url(self) -> str:
        return os.environ.get("JUPYTERHUB_API_URL") or "http://127.0.0.1:8081/hub/api"

    api_token = Unicode(
        help="""The service's JupyterHub API token.

        Defaults to ``$JUPYTERHUB_API_TOKEN`` (set by the hub for managed services). The token's
        owner needs ``read:users:groups`` (to look up groups) and ``delete:servers`` (to stop
        the servers it reclaims): see the ``gpupool-service`` role in docs/service.md.

        Example::

            import os

            c.GPUPoolService.api_token = os.environ["GPUPOOL_HUB_TOKEN"]
        """,
    ).tag(config=True)

    @default("api_token")
    def _default_api_token(self) -> str:
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    service_name = Unicode(
        help="""The service's name in ``c.JupyterHub.services``.

        Defaults to ``$JUPYTERHUB_SERVICE_NAME``, else ``gpupool``. It names the OAuth client
        (``service-<name>``) when ``$JUPYTERHUB_CLIENT_ID`` is not set.

        Example::

            c.GPUPoolService.service_name = "gpupool"
        """,
    ).tag(config=True)

    @default("service_name")
    def _default_service_name(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_NAME") or SERVICE_NAME

    auth_cache_seconds = Integer(
        60,
        help="""How long the answer of JupyterHub about a token (its user, groups and scopes) is
        reused.

        Each API call checks its token with the hub at most this often; a scope taken away from
        a user takes effect after at most this long.

        Example::

            c.GPUPoolService.auth_cache_seconds = 300
        """,
    ).tag(config=True)

    groups_cache_seconds = Float(
        60.0,
        help="""How long a user's JupyterHub groups, looked up for an admission made on their
        behalf, are reused.

        The hub's spawner passes groups in its admission requests, so this only matters for
        callers that don't.

        Example::

            c.GPUPoolService.groups_cache_seconds = 30
        """,
    ).tag(config=True)

    # --- the registry ----------------------------------------------------------------------------

    registry = CaselessStrEnum(
        ["files", "configmap"],
        default_value="files",
        help="""Where pools and quotas are stored: ``files`` (a directory, see ``pools_dir``) or
        ``configmap`` (one ConfigMap, see ``configmap_namespace`` and ``configmap_name``).

        Either way, changes made through the API are written back, one gpuctl document per
        file or key, and changes made by others are picked up while running (see
        ``reload_interval``). Use ``configmap`` in a cluster, where the hub pod's disk does not
        survive a restart.

        Example::

            c.GPUPoolService.registry = "configmap"
        """,
    ).tag(config=True)

    pools_dir = Unicode(
        "",
        help="""The directory of pool and quota files (``*.yaml``, ``*.yml``, ``*.json``), for
        ``registry = "files"``.

        Every file is read at start; a file that does not load stops the service with every
        problem listed as ``FILE:LINE: field: message``. Pools created through the API are
        written here as ``<name>.yaml``. The directory is created if missing.

        Example::

            c.GPUPoolService.pools_dir = "/srv/gpupool/pools"
        """,
    ).tag(config=True)

    configmap_namespace = Unicode(
        "",
        help="""The namespace of the registry ConfigMap, for ``registry = "configmap"``.

        Defaults to the namespace the service runs in (inside a cluster), else the kubeconfig
        context's namespace, else ``default``.

        Example::

            c.GPUPoolService.configmap_namespace = "jhub"
        """,
    ).tag(config=True)

    configmap_name = Unicode(
        "gpupool-pools",
        help="""The name of the registry ConfigMap, for ``registry = "configmap"``.

        Each data key (``training-pool.yaml``...) holds documents as a file would. The
        ConfigMap is created on the first change if it does not exist; the service needs get,
        create and update on it.

        Example::

            c.GPUPoolService.configmap_name = "gpupool-pools"
        """,
    ).tag(config=True)

    reload_interval = Float(
        5.0,
        help="""How often, in seconds, the registry is checked for changes made outside the
        service (edited files, ``kubectl edit configmap``). 0 turns this off.

        A change that does not load is logged and ignored; the pools in force stay.

        Example::

            c.GPUPoolService.reload_interval = 10
        """,
    ).tag(config=True)

    # --- the cluster -----------------------------------------------------------------------------

    kubeconfig = Unicode(
        "",
        help="""The kubeconfig file to reach the Kubernetes API with.

        Empty (the default): the pod's service account when running in a cluster, else
        ``$KUBECONFIG``, else ``~/.kube/config``. The service lists and watches nodes and pods
        cluster-wide and patches node labels, so it needs a ClusterRole for that.

        Example::

            c.GPUPoolService.kubeconfig = "/etc/gpupool/kubeconfig"
        """,
    ).tag(config=True)

    pool_label = Unicode(
        POOL_LABEL,
        help="""The node label whose value names a node's pool (gpuctl's by default).

        Nodes without it are in the ``default`` pool. Pools created through the API label
        their nodes with it.

        Example::

            c.GPUPoolService.pool_label = "example.org/gpu-pool"
        """,
    ).tag(config=True)

    @validate("pool_label")
    def _check_pool_label(self, proposal: Any) -> str:
        value = str(proposal["value"])
        if not is_label_key(value):
            raise TraitError(f"pool_label {value!r} is not a valid Kubernetes label key")
        return value

    sync_timeout = Float(
        60.0,
        help="""How long, in seconds, to wait at start for the first full list of nodes and pods.

        Until it has arrived the API answers 503, so no admission is ever made against a
        partial view of the cluster.

        Example::

            c.GPUPoolService.sync_timeout = 120
        """,
    ).tag(config=True)

    # --- admission -------------------------------------------------------------------------------

    reservation_ttl = Float(
        120.0,
        help="""How long, in seconds, an admission holds its GPUs while its pod has not appeared.

        The spawner creates the pod right after the admission, so its pod normally shows up
        within a second; the reservation is then dropped and the pod itself counts. A spawn
        that dies before creating its pod gives the GPUs back after this long (or at once if
        it releases the admission).

        Example::

            c.GPUPoolService.reservation_ttl = 60
        """,
    ).tag(config=True)

    @validate("reservation_ttl", "reclaim_wait", "sync_timeout")
    def _positive(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if value <= 0:
            raise TraitError(f"{proposal['trait'].name} must be more than 0 seconds, not {value}")
        return value

    reclaim_wait = Float(
        30.0,
        help="""How long, in seconds, an admission that reclaims GPUs waits for the stopped
        servers to free them before it answers.

        Reclaim happens when a user asks for GPUs within their guaranteed quota and only
        over-quota (borrowing) servers stand in the way: the service stops those servers
        through the hub API and, once their pods are gone, admits the request. If they are
        not gone in time the answer is 409 and says to try again.

        Example::

            c.GPUPoolService.reclaim_wait = 60
        """,
    ).tag(config=True)

    max_gpus = Integer(
        1024,
        help="""The largest GPU count one admission request may ask for; more is refused as
        invalid (400) before any pool is looked at.

        Pools can set tighter limits (``limits.max-gpus``); this only guards against nonsense.

        Example::

            c.GPUPoolService.max_gpus = 64
        """,
    ).tag(config=True)

    max_body_size = ByteSpecification(
        1024 * 1024,
        help="""The largest request body accepted (pool and quota documents, admission
        requests). A larger one is refused with a 400 before it is read.

        Accepts a number of bytes or a size with a unit (K, M, G).

        Example::

            c.GPUPoolService.max_body_size = "4M"
        """,
    ).tag(config=True)

    summary_cache_seconds = Float(
        0.5,
        help="""How long the per-pool usage rows (``GET api/v1/pools``, the spawn form) are
        reused before they are recomputed from the usage index.

        GPUs held by admissions are always current; what pods use lags by about this much
        (at most four times this under heavy load, when rows are rebuilt a few per request so
        that no request waits for all of them). 0 recomputes on every request.

        Example::

            c.GPUPoolService.summary_cache_seconds = 2
        """,
    ).tag(config=True)

    # --- the pages -------------------------------------------------------------------------------

    history_interval = Float(
        60.0,
        help="""How often, in seconds, the GPUs in use per pool are sampled for the usage chart
        of the pools page.

        Samples are kept in memory only (Kubernetes is the record of usage), for
        ``history_hours``; the history starts again when the service restarts.

        Example::

            c.GPUPoolService.history_interval = 30
        """,
    ).tag(config=True)

    history_hours = Float(
        6.0,
        help="""How many hours of usage samples the pools page's chart shows.

        Memory grows with pools x hours / interval: 50 pools over 6 hours sampled every
        minute is 18,000 samples, a few MB.

        Example::

            c.GPUPoolService.history_hours = 24
        """,
    ).tag(config=True)

    @validate("history_interval", "history_hours")
    def _positive_history(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if value <= 0:
            raise TraitError(f"{proposal['trait'].name} must be more than 0, not {value}")
        return value

    template_paths = List(
        Unicode(),
        default_value=[],
        help="""Directories searched for the pages' templates before the service's own and
        JupyterHub's.

        The pages extend JupyterHub's ``page.html``. A hub with custom templates
        (``c.JupyterHub.template_paths``) can give the service the same directories so that
        its pages look the same; a ``page.html`` found here replaces the hub's.

        Example::

            c.GPUPoolService.template_paths = ["/etc/jupyterhub/templates"]
        """,
    ).tag(config=True)

    # --- set up ----------------------------------------------------------------------------------

    @default("log_level")
    def _log_level(self) -> int:
        return logging.INFO

    @default("log_format")
    def _log_format(self) -> str:
        return "[%(levelname)1.1s %(asctime)s.%(msecs).03d %(name)s] %(message)s"

    @catch_config_error
    def initialize(self, argv: list[str] | None = None) -> None:
        super().initialize(argv)
        if self.config_file:
            self.load_config_file(self.config_file)
            self.update_config(self.cli_config)  # the command line wins
        self._ctx: ServiceContext | None = None
        self._server: tornado.httpserver.HTTPServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    @property
    def ctx(self) -> ServiceContext:
        if self._ctx is None:
            raise RuntimeError("the service is not started")
        return self._ctx

    def _hub_auth(self) -> HubOAuth:
        return HubOAuth(
            api_url=self.hub_api_url,
            api_token=self.api_token or "no-token",
            base_url=self.base_url,
            oauth_client_id=os.environ.get("JUPYTERHUB_CLIENT_ID")
            or f"service-{self.service_name}",
            cache_max_age=self.auth_cache_seconds,
            log=self.log,
        )

    async def _store(self, kube: Kube) -> RegistryStore:
        if self.registry == "configmap":
            namespace = self.configmap_namespace or default_namespace(self.kubeconfig)
            if not is_label_value(self.configmap_name) or not self.configmap_name:
                raise StartupError(f"configmap_name {self.configmap_name!r} is not a valid name")
            return ConfigMapStore(kube, namespace, self.configmap_name)
        if not self.pools_dir:
            raise StartupError(
                "no pools directory: set --pools=DIR (c.GPUPoolService.pools_dir), "
                "or --registry=configmap"
            )
        return _file_store(self.pools_dir)

    def make_app(self, ctx: ServiceContext) -> tornado.web.Application:
        routes = [
            (pattern, handler, kwargs or {"ctx": ctx})
            for pattern, handler, kwargs in route_table(self.base_url)
        ]
        return tornado.web.Application(
            routes,
            cookie_secret=secrets.token_bytes(32),
            login_url=ctx.hub_auth.login_url,
            log_function=_log_request,
        )

    async def start_service(self) -> ServiceContext:
        """Load the registry, sync with the cluster, then listen.

        Raises :class:`StartupError` or :class:`~jupyter_gpupool.core.yamldoc.DocumentError`; the
        API only answers once the first full list of nodes and pods is in, so no admission is
        ever made against a partial view of the cluster.
        """
        try:
            api = await make_api_client(self.kubeconfig)
        except Exception as e:
            raise StartupError(f"cannot load the Kubernetes configuration: {e}") from e
        kube = Kube(api)
        ctx: ServiceContext | None = None
        try:
            ctx = await self._build(api, kube)
            await self._sync(ctx)
            self._ctx = ctx
            self._listen(ctx)
        except BaseException:
            if ctx is not None:
                await ctx.view.stop()
            self._ctx = None
            await self._close_clients(kube)
            raise
        self._sample()
        self._tasks = [
            asyncio.create_task(self._every(1.0, self._sweep)),
            asyncio.create_task(self._every(ctx.history.interval, self._sample_soon)),
        ]
        if self.reload_interval > 0:
            reload = ctx.pools.reload_if_changed
            self._tasks.append(asyncio.create_task(self._every(self.reload_interval, reload)))
        self.log.info(
            "gpupool service %s listening on http://%s:%d%s",
            __version__,
            self.ip,
            self.port,
            self.base_url,
        )
        return ctx

    async def _build(self, api: Any, kube: Kube) -> ServiceContext:
        store = await self._store(kube)
        state = ServiceState(pool_label=self.pool_label, summary_ttl=self.summary_cache_seconds)
        pools = PoolManager(state, store, kube)
        try:
            await pools.load()
        except ApiError as e:
            raise StartupError(e.message) from e
        self.log.info(
            "Loaded %d pools and %d quota documents from %s",
            len(state.registry.pools),
            len(state.registry.quota_documents),
            store.description,
        )
        hub: HubAPI | None = None
        if self.api_token:
            hub = HubAPI(self.hub_api_url, self.api_token, self.groups_cache_seconds)
        else:
            self.log.warning("No JupyterHub API token: tokens cannot be checked")
        metrics = Metrics(lambda: state)
        desk = AdmissionDesk(
            state,
            metrics=metrics,
            ttl=self.reservation_ttl,
            hub=hub,
            kube=kube,
            reclaim_wait=self.reclaim_wait,
        )
        return ServiceContext(
            state=state,
            desk=desk,
            pools=pools,
            metrics=metrics,
            hub_auth=self._hub_auth(),
            hub=hub,
            kube=kube,
            view=ClusterView(api, state.index),
            base_url=self.base_url,
            max_body_size=int(self.max_body_size),
            max_gpus=self.max_gpus,
            history=UsageHistory(self.history_interval, self.history_hours),
            templates=make_environment(self.template_paths),
        )

    async def _sync(self, ctx: ServiceContext) -> None:
        ctx.view.start()
        try:
            await ctx.view.wait_synced(self.sync_timeout)
        except asyncio.TimeoutError:
            raise StartupError(
                f"the first list of nodes and pods did not arrive within "
                f"{self.sync_timeout:.0f}s; is the Kubernetes API reachable?"
            ) from None
        self.log.info(
            "Cluster view synced: %d nodes, %d pods",
            ctx.state.index.node_count,
            len(ctx.state.index),
        )

    def _listen(self, ctx: ServiceContext) -> None:
        # A spawn storm opens hundreds of connections at once; tornado's default backlog (128)
        # would reset the rest.
        sockets = tornado.netutil.bind_sockets(
            self.port, self.ip, family=socket.AF_INET, backlog=2048
        )
        self.port = sockets[0].getsockname()[1]
        # Bodies are streamed and limited per handler (a 400 with a message); this cap only
        # stops a runaway upload.
        self._server = tornado.httpserver.HTTPServer(
            self.make_app(ctx), max_body_size=max(int(self.max_body_size) * 4, 1 << 26)
        )
        self._server.add_sockets(sockets)

    async def _sweep(self) -> None:
        self.ctx.desk.sweep()

    def _sample(self) -> None:
        """One sample of the GPUs in use per pool, for the pools page's chart."""
        self.ctx.history.sample(clock.now(), self.ctx.state.pool_summaries())

    async def _sample_soon(self) -> None:
        self._sample()

    async def _every(self, interval: float, fn: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("Periodic task %s failed", getattr(fn, "__name__", fn))

    async def _close_clients(self, kube: Kube) -> None:
        with contextlib.suppress(Exception):
            await kube.close()

    async def stop_service(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._server is not None:
            self._server.stop()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.close_all_connections(), 5)
            self._server = None
        if self._ctx is not None:
            await self._ctx.view.stop()
            await self._close_clients(self._ctx.kube)
            self._ctx = None

    def _route_logs(self) -> None:
        """Send the package's module loggers (and tornado's) to the application's handlers."""
        for name in ("jupyter_gpupool", "gpupool", "tornado"):
            logger = logging.getLogger(name)
            logger.setLevel(self.log.level)
            logger.propagate = False
            for handler in self.log.handlers:
                if handler not in logger.handlers:
                    logger.addHandler(handler)

    async def run(self) -> int:
        """Start, serve until SIGINT/SIGTERM, stop. Returns the exit status."""
        self._route_logs()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.start_service()
            # The index now holds a record per node and pod for good: keep the garbage
            # collector's full passes from walking them again and again (pauses of tens of
            # milliseconds on a large cluster, in the middle of admissions).
            gc.collect()
            gc.freeze()
        except DocumentError as e:
            self.log.error("The pool and quota documents have problems; not starting:")
            for problem in e.problems:
                print(problem, file=sys.stderr)
            return 1
        except StartupError as e:
            self.log.error("Cannot start: %s", e)
            return 1
        try:
            await self._stopping.wait()
        finally:
            self.log.info("Stopping")
            await self.stop_service()
        return 0

    def start(self) -> None:
        status = asyncio.run(self.run())
        if status:
            self.exit(status)


def _file_store(directory: str) -> FileStore:
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise StartupError(f"--pools={directory} is not a directory")
    return FileStore(directory)


access_log = logging.getLogger("gpupool.access")


def route_table(prefix: str) -> list[tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]]:
    """The service's routes under ``prefix``: ``(pattern, handler, arguments)``.

    Handlers given no arguments here get the service context (``{"ctx": ctx}``) in
    :meth:`GPUPoolService.make_app`; the authentication tests walk this list, so a route added
    here without a row in their table fails them.
    """
    api = prefix + "api/v1/"
    h = handlers
    routes: list[Any] = [
        (api, h.InfoHandler),
        (api + "pools", h.PoolsHandler),
        (api + "pools.csv", h.PoolsCSVHandler),
        (api + "pools/([^/]+)", h.PoolHandler),
        (api + "nodes", h.NodesHandler),
        (api + "nodes.csv", h.NodesCSVHandler),
        (api + "nodes/([^/]+)/labels", h.NodeLabelsHandler),
        (api + "servers", h.ServersHandler),
        (api + "quotas", h.QuotasHandler),
        (api + "usage", h.UsageHandler),
        (api + "usage/history", h.UsageHistoryHandler),
        (api + "launch-options", h.LaunchOptionsHandler),
        (api + "admissions", h.AdmissionsHandler),
        (api + "admissions/([^/]+)", h.AdmissionHandler),
        (prefix + "metrics", h.MetricsHandler),
        (prefix + "api/(.*)", h.NotFoundHandler),
        (prefix + "oauth_callback", pages.OAuthCallbackHandler),
        (prefix + "static/(.*)", tornado.web.StaticFileHandler, {"path": str(STATIC)}),
        (prefix + "pools", pages.PoolsPage),
        (prefix + "pools/usage.svg", pages.UsageChart),
        (prefix + "pools/([^/]+)", pages.PoolPage),
        (prefix + "nodes", pages.NodesPage),
        (prefix + "quotas", pages.QuotasPage),
        (prefix + "admin", pages.AdminPage),
        (prefix + "admin/pools", pages.ApplyPoolsAction),
        (prefix + "admin/pools/([^/]+)/delete", pages.DeletePoolPage),
        (prefix + "admin/nodes", pages.MoveNodeAction),
        (prefix + "admin/quotas", pages.QuotasAction),
        (prefix + "admin/servers/stop", pages.StopServerAction),
        (prefix, pages.UserPage),
        (prefix.rstrip("/"), tornado.web.RedirectHandler, {"url": prefix}),
    ]
    return [(r[0], r[1], r[2] if len(r) > 2 else {}) for r in routes]


def _log_request(handler: tornado.web.RequestHandler) -> None:
    """Access log: errors loud, the many successful API calls at debug level."""
    status = handler.get_status()
    if status < 400:
        level = logging.DEBUG
    elif status < 500:
        level = logging.INFO
    else:
        level = logging.ERROR
    if not access_log.isEnabledFor(level):
        return
    request = handler.request
    # the path, not the URI: a query string may carry a token (``?token=...``)
    access_log.log(
        level,
        "%d %s %s %.2fms",
        status,
        request.method,
        request.path,
        1000 * request.request_time(),
    )


main = GPUPoolService.launch_instance
