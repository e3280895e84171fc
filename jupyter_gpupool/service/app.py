"""``python -m jupyter_gpupool.service``: the gpupool service as a traitlets Application.

It is meant to run as a JupyterHub-managed service named ``gpupool``: the hub starts it with the
``JUPYTERHUB_*`` environment (API URL and token, service prefix, OAuth client id) and proxies
``/services/gpupool/`` to it. ``docs/service.md`` has the hub configuration; every setting (in
:mod:`.settings`) can be given on the command line (``--port``, ``--pools``...) or in a config
file (``c.GPUPoolService.x = ...``, ``--config FILE``).

This module puts the service together from its settings (:meth:`GPUPoolService.make_app`,
:func:`.web.routes.route_table`) and runs it: start (registry, cluster sync, listen), the periodic tasks,
stop on SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import secrets
import signal
import socket
import sys
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web
from jupyterhub.services.auth import HubOAuth
from traitlets import default
from traitlets.config import Application, catch_config_error

from .. import __version__, logredact
from ..core.documents.yaml_reader import DocumentError
from ..core.usage.labels import is_label_value
from . import clock
from .admission.bookingwatch import BookingWatch
from .admission.desk import AdmissionDesk
from .admission.line import Line
from .admission.recutwatch import RecutWatch
from .admission.waits import WaitEstimates
from .cluster.hubapi import HubAPI
from .cluster.kube import Kube, default_namespace, make_api_client
from .cluster.watch import ClusterView
from .context import ServiceContext
from .errors import ApiError
from .loops import Loop
from .monitoring.budgetwatch import BudgetWatch
from .monitoring.idlewatch import IdleWatch, no_groups
from .monitoring.metrics import Metrics
from .monitoring.polling import DCGMSource, PrometheusSource, Utilization
from .monitoring.runtimewatch import RuntimeWatch
from .readback import ReadBack
from .records.memory import Records, StartupRefused
from .records.samples import UsageHistory
from .registry.bookingdesk import BookingDesk
from .registry.changes import PoolManager
from .registry.store import ConfigMapStore, FileStore, RegistryStore
from .settings import GPUPoolSettings, idle_policy_of
from .state import ServiceState
from .web.pages.templating import make_environment
from .web.routes import log_request, route_table


class StartupError(Exception):
    """The service cannot start; the message says why and what to change."""


class GPUPoolService(Application, GPUPoolSettings):
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
        "db-url": "GPUPoolService.db_url",
        "pool-label": "GPUPoolService.pool_label",
        "reservation-ttl": "GPUPoolService.reservation_ttl",
        "config": "GPUPoolService.config_file",
        "log-level": "Application.log_level",
    }

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
        self._readback: ReadBack | None = None
        self._server: tornado.httpserver.HTTPServer | None = None
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
            log_function=log_request,
        )

    async def start_service(self) -> ServiceContext:
        """Load the registry, sync with the cluster, then listen.

        Raises :class:`StartupError` or :class:`~jupyter_gpupool.core.documents.yaml_reader.DocumentError`; the
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
            ctx.metrics.utilization = ctx.utilization
            await self._sync(ctx)
            await self._remember(ctx)
            self._ctx = ctx
            self._listen(ctx)
        except BaseException:
            if ctx is not None:
                await ctx.view.stop()
                ctx.records.close()
            self._ctx = None
            await self._close_clients(kube)
            raise
        self._start_loops(ctx)
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
        state.mig_configs = self.mig_configs
        pools = PoolManager(state, store, kube, max_pools=self.max_pools)
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
            durable_timeout=self.durable_timeout,
        )
        desk.line = Line(
            desk, heartbeat=self.queue_heartbeat, max_per_user=self.max_queued_per_user
        )
        desk.line.told.every = self.queue_place_interval
        records = Records.at(
            self.db_url, raw_days=self.history_raw_days, keep_days=self.history_days
        )
        records.bookings.durable_timeout = self.durable_timeout
        records.durable_timeout = self.durable_timeout
        records.bookings.on_change = state.set_stored_bookings
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
            records=records,
            bookings=BookingDesk(state, records.bookings),
            templates=make_environment(self.template_paths),
            utilization=Utilization(self._utilization_source(kube), self.utilization_interval),
            idle=IdleWatch(
                idle_policy_of(self.idle_policy) if self.idle_policy else None,
                hub.user_groups if hub is not None else no_groups,
                desk.stop_server,
            ),
            booking_watch=BookingWatch(
                state, desk.stop_server, warning=self.booking_warning, kick=desk.line.kick
            ),
            runtime=RuntimeWatch(
                hub.user_groups if hub is not None else no_groups, desk.stop_server
            ),
            budget_watch=BudgetWatch(self.budget_rules(), desk.stop_server),
        )

    def _utilization_source(self, kube: Kube) -> DCGMSource | PrometheusSource | None:
        """The configured GPU utilization source; a source without its setting is refused."""
        if self.utilization_source == "dcgm":
            if not self.dcgm_urls and not self.dcgm_pod_selector:
                raise StartupError(
                    'utilization_source is "dcgm" but dcgm_urls is empty and dcgm_pod_selector '
                    "is not set: give the DCGM exporter pages to read (dcgm_urls), or a label "
                    "selector of the exporter's pods (e.g. "
                    'dcgm_pod_selector = "app=nvidia-dcgm-exporter" and '
                    'dcgm_namespace = "gpu-operator")'
                )
            return DCGMSource(
                self.dcgm_urls,
                kube.get_text,
                pod_selector=self.dcgm_pod_selector,
                namespace=self.dcgm_namespace,
                port=self.dcgm_port,
                list_pods=kube.list_pods,
            )
        if self.utilization_source == "prometheus":
            if not self.prometheus_url:
                raise StartupError(
                    'utilization_source is "prometheus" but prometheus_url is not set'
                )
            return PrometheusSource(self.prometheus_url, self.prometheus_query)
        return None

    def _start_loops(self, ctx: ServiceContext) -> None:
        """Start the background loops, each owned by the component whose state it reads (the
        desk's sweep, the line's passes, the poller's polls, the registry's reload); the
        samples' loop is the service's own. ``GET api/v1/health`` lists them."""
        # the first sample at once, so that the service answers before it (a sample of 20,000
        # servers is a quarter of a second)
        sampler = Loop("usage.samples", ctx.history.interval, self._sample_round, first=0)
        ctx.loops = [ctx.desk.sweeper, sampler]
        if ctx.desk.line is not None:
            ctx.view.on_change = ctx.desk.line.kick  # GPUs may have come free
            ctx.loops.append(ctx.desk.line.loop)
            waits = WaitEstimates(ctx.desk.line, ctx.records.durations.history)
            waits.sure_end = ctx.sure_end
            ctx.desk.line.estimates = waits.of
        if self._readback is not None and ctx.records.db is not None:
            ctx.loops.append(self._readback.loop)  # read back late, then checked
            ctx.loops.append(ctx.records.durations.loop)  # the durations read again
        utilization = ctx.utilization
        if utilization.source is not None:
            self.log.info(
                "GPU utilization from %s every %gs", utilization.name, utilization.interval
            )
            index = ctx.state.index
            utilization.running = lambda: {
                (s.namespace, s.name) for s in index.servers() if s.state == "running"
            }
            utilization.after_poll = lambda now: ctx.idle.after_poll(
                ctx.state.registry, index, utilization, now
            )
            ctx.loops.append(utilization.loop)
        if ctx.booking_watch is not None:
            ctx.loops.append(ctx.booking_watch.loop)
        if ctx.desk.line is not None:
            line, kube = ctx.desk.line, ctx.kube
            ctx.recut = RecutWatch(
                ctx.state,
                kube.patch_node_labels,
                lambda: list(line.waiting.values()),
                ctx.changes,
                lock=ctx.desk.lock,
                configs=ctx.state.mig_configs,
            )
            ctx.loops.append(ctx.recut.loop)
            waits.coming = ctx.recut.coming  # the estimates count what re-cuts bring
        if self.reload_interval > 0:
            ctx.loops.append(ctx.pools.reloader(self.reload_interval))
        for loop in ctx.loops:
            loop.start()

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

    async def _remember(self, ctx: ServiceContext) -> None:
        """Read back what the database kept: the ledger takes up the sessions that were open,
        the change log what it had, the desk the reservations that had not expired (what the
        service promised before a crash), the line its entries, the bookings come into force.
        A database that does not answer shuts the desk (nothing is admitted) until the
        ``records.database`` loop has read it back (:mod:`.readback`)."""
        readback = self._readback = ReadBack(ctx, self.db_check_interval)
        try:
            done = await readback.once()
        except StartupRefused as e:
            raise StartupError(str(e)) from None
        if not done:
            self.log.warning("Starting without the database: %s", ctx.desk.shut)

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

    def _sample(self) -> None:
        """One sample of the GPUs per pool, for the chart and the database."""
        now, summaries = clock.now(), self.ctx.state.pool_summaries()
        self.ctx.history.sample(now, summaries)
        self.ctx.records.sample(now, summaries, self.ctx.state.index, self.ctx.utilization)

    async def _sample_round(self) -> None:
        """A sample, then the limits on running servers: runtime, then budgets (each warns
        first; a stop goes through the hub)."""
        self._sample()
        ctx, now = self.ctx, clock.now()
        registry, index = ctx.state.registry, ctx.state.index
        await ctx.runtime.round(registry, index, now)
        await ctx.budget_watch.round(registry, ctx.state.budgets, index, now)

    async def _close_clients(self, kube: Kube) -> None:
        with contextlib.suppress(Exception):
            await kube.close()

    async def stop_service(self) -> None:
        if self._ctx is not None:
            for loop in self._ctx.loops:
                await loop.stop()
        if self._server is not None:
            self._server.stop()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.close_all_connections(), 5)
            self._server = None
        if self._ctx is not None:
            await self._ctx.view.stop()
            await asyncio.to_thread(self._ctx.records.close)  # what is queued is written
            await self._ctx.utilization.close()
            await self._close_clients(self._ctx.kube)
            if self._ctx.hub is not None:
                await self._ctx.hub.close()  # its kept-alive connections (jupyter_gpupool.http)
            self._ctx = None

    def _route_logs(self) -> None:
        """Send the package's module loggers (and tornado's) to the application's handlers, at
        the ``--log-level`` asked for, with secrets in URLs redacted (:mod:`~..logredact`). traitlets puts that level on its handler and leaves its
        logger at DEBUG; these loggers get the level itself, so a debug line that will not be
        shown is not built (the access log's line for every admission was, 6% of a request)."""
        asked = self.log_level
        level = logging.getLevelName(asked) if isinstance(asked, str) else int(asked)  # type: ignore[call-overload]
        for name in ("jupyter_gpupool", "gpupool", "tornado"):
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.propagate = False
            for handler in self.log.handlers:
                if handler not in logger.handlers:
                    logger.addHandler(handler)
        # a request's URL reaches lines other than the access log's (an uncaught exception's
        # line shows the request), and its query may hold ?token=
        logredact.install([self.log, logging.getLogger()])

    async def run(self) -> int:
        """Start, serve until SIGINT/SIGTERM, stop. Returns the exit status."""
        self._route_logs()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopping.set)
        # A stop asked for while starting (the first list of a large cluster takes a while)
        # ends the start, instead of waiting for it.
        starting = asyncio.ensure_future(self.start_service())
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            self.log.info("Stopping before the service started")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return 0
        stopping.cancel()
        try:
            starting.result()
            # The index now holds a record per node and pod for good: keep the garbage
            # collector's full passes from walking them again and again (pauses of tens of
            # milliseconds on a large cluster, in the middle of admissions).
            gc.collect()
            gc.freeze()
            give_back_memory()
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


def give_back_memory() -> None:
    """Hand the C heap's free memory back to the system (glibc's ``malloc_trim``): the first
    list's pages were decoded there and freed, but glibc keeps freed memory for later; at
    150,000 pods that was 8 MB of the service's RSS. Nothing happens on other C libraries."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _file_store(directory: str) -> FileStore:
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise StartupError(f"--pools={directory} is not a directory")
    return FileStore(directory)


main = GPUPoolService.launch_instance
