"""The gpupool service's settings: every ``c.GPUPoolService.x`` trait, its default and checks.

:class:`GPUPoolSettings` is a base class of
:class:`~jupyter_gpupool.service.app.GPUPoolService`, so a config file or command line names them
as settings of the service (``c.GPUPoolService.port = 10101``, ``--GPUPoolService.port=10101``,
``--port=10101``). It holds values only: what the service builds and runs from them is in
:mod:`.app`. ``docs/gen_service_config.py`` writes the reference in ``docs/service.md`` from the
traits here, in this order.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

import yaml
from jupyterhub.traitlets import ByteSpecification
from traitlets import (
    Bool,
    CaselessStrEnum,
    Dict,
    Float,
    HasTraits,
    Integer,
    List,
    TraitError,
    Unicode,
    default,
    validate,
)

from ...core.idle import IdlePolicy
from ...core.kube.labelselectors import SelectorError, parse_label_selector
from ...core.kube.names import is_dns1123_label
from ...core.labels import POOL_LABEL, is_label_key
from ...core.poolfile import load_texts
from ...core.yamldoc import DocumentError

SERVICE_NAME = "gpupool"


def _service_url() -> str:
    return os.environ.get("JUPYTERHUB_SERVICE_URL", "")


class GPUPoolSettings(HasTraits):
    """The service's settings, with the defaults the hub's environment gives them.

    Plain traits, not a ``Configurable``: they become configurable through the class that is
    run, :class:`~jupyter_gpupool.service.app.GPUPoolService` (``Application`` first, then this),
    so the one config section is ``c.GPUPoolService`` and ``--help-all`` lists them there, as
    before they moved here. The command-line aliases and the log defaults belong to the
    Application and stay with it.
    """

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
        help="""How often, in seconds, the GPUs per pool (total, in use, over quota, pending)
        are sampled into the database (``db_url``) for the usage history, and the running
        servers' sessions are marked as seen.

        The pools page's chart also keeps the last ``history_hours`` in memory, for when the
        database is down.

        Example::

            c.GPUPoolService.history_interval = 30
        """,
    ).tag(config=True)

    history_hours = Float(
        6.0,
        help="""How many hours of usage samples the service also keeps in memory, for the
        pools page's chart when the database (``db_url``) is missing or down.

        With a database the chart reads its ranges (6h to 30d) from it. Memory grows with
        pools x hours / interval: 50 pools over 6 hours sampled every minute is 18,000
        samples, a few MB.

        Example::

            c.GPUPoolService.history_hours = 24
        """,
    ).tag(config=True)

    db_url = Unicode(
        "sqlite:///gpupool.sqlite",
        help="""The database that keeps usage history, the ledger of server sessions (GPU-hours)
        and the change log: an SQLAlchemy URL.

        The default is an SQLite file in the service's working directory; on a cluster use
        PostgreSQL (``pip install jupyter_gpupool[postgresql]``), e.g.
        ``postgresql+psycopg://gpupool:PASSWORD@postgres:5432/gpupool``. The schema is
        upgraded when the service starts (and logged); a database written by a newer gpupool
        is refused. A database that cannot be reached is logged and left out: admissions go on,
        the pages say what is missing. An empty value keeps nothing.

        Example::

            c.GPUPoolService.db_url = "postgresql+psycopg://gpupool@db:5432/gpupool"
        """,
    ).tag(config=True)

    history_raw_days = Float(
        7.0,
        help="""Usage samples older than this many days are averaged by the hour.

        Example::

            c.GPUPoolService.history_raw_days = 14
        """,
    ).tag(config=True)

    history_days = Float(
        90.0,
        help="""How many days of usage samples, server sessions and changes the database keeps.

        Example::

            c.GPUPoolService.history_days = 365
        """,
    ).tag(config=True)

    queue_heartbeat = Float(
        60.0,
        help="""Seconds a request waiting in line (``"queue": true``) stays in line without its
        spawner asking for it (``GET api/v1/admissions/{id}``). The spawner asks every few
        seconds while it waits; a request nobody asks for has lost its spawn (JupyterHub
        restarted, the user went away) and is dropped, never admitted. After a restart of the
        service, the entries kept in its database wait this long for their spawners to ask
        again, and are not admitted before they do.

        Example::

            c.GPUPoolService.queue_heartbeat = 120
        """,
    ).tag(config=True)

    utilization_source = CaselessStrEnum(
        ["none", "dcgm", "prometheus"],
        default_value="none",
        help="""Where the GPUs' utilization is measured: ``dcgm``, ``prometheus`` or ``none``.

        ``dcgm`` reads NVIDIA's DCGM exporter pages (``dcgm_urls``, and the exporter pods
        ``dcgm_pod_selector`` finds); ``prometheus`` asks a Prometheus server that scrapes
        them (``prometheus_url``). The service polls every
        ``utilization_interval`` seconds and shows each server's GPU utilization and GPU
        memory (``GET api/v1/servers``). ``none`` measures nothing.

        Example::

            c.GPUPoolService.utilization_source = "prometheus"
        """,
    ).tag(config=True)

    utilization_interval = Float(
        30.0,
        help="""Seconds between two polls of the GPU utilization source.

        A measurement older than three intervals is stale: shown as none, and never taken
        for an idle GPU.

        Example::

            c.GPUPoolService.utilization_interval = 15
        """,
    ).tag(config=True)

    dcgm_urls = List(
        Unicode(),
        default_value=[],
        help="""The DCGM exporter pages the ``dcgm`` source reads.

        A path (starting with ``/``) is read from the Kubernetes API server with the service's
        credentials: the exporter's service through the API server's proxy (the service
        account needs ``get`` on ``services/proxy`` there), or the simulated cluster's
        ``/sim/v1/dcgm/metrics``. A ``http://`` or ``https://`` URL is read as it is.

        Example::

            c.GPUPoolService.dcgm_urls = [
                "/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:9400/proxy/metrics"
            ]
        """,
    ).tag(config=True)

    dcgm_pod_selector = Unicode(
        "",
        help="""A label selector of the DCGM exporter's pods, which the ``dcgm`` source reads.

        Every poll lists the pods it matches (in ``dcgm_namespace``), and reads each running
        one through the Kubernetes API server's pod proxy,
        ``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/metrics`` (port ``dcgm_port``), with the
        service's credentials: the service account needs ``list`` on ``pods`` and ``get`` on
        ``pods/proxy`` in that namespace. The NVIDIA GPU Operator's exporter runs as a
        DaemonSet, one pod per GPU node: a node added later is read from the first poll after
        its exporter pod runs. Given with ``dcgm_urls``, both are read. Empty: no discovery.

        Example::

            c.GPUPoolService.dcgm_pod_selector = "app=nvidia-dcgm-exporter"
        """,
    ).tag(config=True)

    dcgm_namespace = Unicode(
        "",
        help="""The namespace of the DCGM exporter's pods (``dcgm_pod_selector``); empty: every
        namespace.

        Example::

            c.GPUPoolService.dcgm_namespace = "gpu-operator"
        """,
    ).tag(config=True)

    dcgm_port = Integer(
        9400,
        help="""The port the DCGM exporter's pods serve ``/metrics`` on (``dcgm_pod_selector``);
        9400 is the exporter's default.

        Example::

            c.GPUPoolService.dcgm_port = 9400
        """,
    ).tag(config=True)

    @validate("dcgm_pod_selector")
    def _valid_dcgm_pod_selector(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip()
        if value:
            try:
                parse_label_selector(value)
            except SelectorError as e:
                raise TraitError(f"dcgm_pod_selector: {e}") from None
        return value

    @validate("dcgm_namespace")
    def _valid_dcgm_namespace(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip()
        if value and not is_dns1123_label(value):
            raise TraitError(
                f"dcgm_namespace must be a namespace name (lowercase letters, digits and '-', "
                f"at most 63 characters), not {value!r}"
            )
        return value

    @validate("dcgm_port")
    def _valid_dcgm_port(self, proposal: Any) -> int:
        value = int(proposal["value"])
        if not 1 <= value <= 65535:
            raise TraitError(f"dcgm_port must be a port number from 1 to 65535, not {value}")
        return value

    prometheus_url = Unicode(
        "",
        help="""The Prometheus server the ``prometheus`` source asks (its base URL).

        Example::

            c.GPUPoolService.prometheus_url = "http://prometheus-server.monitoring:80"
        """,
    ).tag(config=True)

    prometheus_query = Unicode(
        "",
        help="""A PromQL query giving each pod's mean GPU utilization in percent, by
        ``namespace`` and ``pod`` labels, instead of the default
        ``avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)``.

        With the default, the service also asks for the highest GPU's utilization and the
        GPU memory used and free; with a query of your own, only for that.

        Example::

            c.GPUPoolService.prometheus_query = "avg by (namespace, pod) (dcgm_gpu_utilization)"
        """,
    ).tag(config=True)

    @validate("utilization_interval", "queue_heartbeat")
    def _positive_interval(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if value <= 0:
            raise TraitError(f"{proposal['trait'].name} must be more than 0, not {value}")
        return value

    idle_policy = Dict(
        default_value={},
        help="""The idle-GPU policy of pools whose file has no ``idle`` section; empty: none.

        The keys of a pool file's ``idle`` (docs/pools.md): ``below_percent`` (5),
        ``after`` (``2h``), ``warn`` (``15m``), ``action`` (``stop`` or ``report``) and
        ``exempt: {users: [...], groups: [...]}``. It needs a GPU utilization source
        (``utilization_source``): a server without a fresh measurement is never idle.

        Example::

            c.GPUPoolService.idle_policy = {"below_percent": 5, "after": "4h", "action": "report"}
        """,
    ).tag(config=True)

    @validate("idle_policy")
    def _valid_idle_policy(self, proposal: Any) -> dict[str, Any]:
        value = proposal["value"]
        if value:
            idle_policy_of(value)  # TraitError with every problem
        return dict(value)

    stop_over_budget = Bool(
        False,
        help="""Stop running servers whose GPU-hour budget is spent.

        Budgets (``budgets:`` in a quota document) always keep new servers with GPUs from
        starting once spent; running servers are left alone unless this is set. Then, every
        ``history_interval``, the servers with GPUs that a spent budget pays for (the user's
        servers, or the servers charged to the group, in the budget's pools) are stopped
        through JupyterHub, and the ledger records them as ended "over budget". Budgets need
        the database (``db_url``).

        Example::

            c.GPUPoolService.stop_over_budget = True
        """,
    ).tag(config=True)

    @validate("history_interval", "history_hours", "history_raw_days", "history_days")
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


def idle_policy_of(value: Any) -> IdlePolicy:
    """``c.GPUPoolService.idle_policy`` checked as a pool file's ``idle`` is (TraitError)."""
    text = yaml.safe_dump(
        {"kind": "pool", "pool": {"name": "idle-policy-check"}, "idle": value}, sort_keys=False
    )
    try:
        registry = load_texts([(text, "c.GPUPoolService.idle_policy")])
    except DocumentError as e:
        problems = "; ".join(f"{p.path}: {p.message}" for p in e.problems)
        raise TraitError(f"idle_policy: {problems}") from None
    policy = registry.pools["idle-policy-check"].idle
    assert policy is not None
    return policy
