"""Start and stop the demo: simulated cluster (in this process), JupyterHub (a child process,
which in turn runs the proxy and the gpupool service as a managed service)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tornado.httpclient

from ..poolfiles import FILE_SUFFIXES
from ..sim import SimCluster
from ..sim.nodes.spec import example_cluster_spec, load_cluster_file
from . import ADMIN_TOKEN_FILE, DEFAULT_PORT, DEFAULT_STATE_DIR, URL_FILE
from .nodelabels import NODE_LABELS_FILE, NodeLabelKeeper
from .processes import Proc, Stopping, descendants, process

HERE = Path(__file__).resolve().parent

#: Replaces the service's command line (a JSON list; ``{python}``, ``{port}``, ``{kubeconfig}``
#: and ``{pools}`` are filled in), e.g. to run it under a profiler, or a stand-in in tests.
SERVICE_COMMAND_ENV = "GPUPOOL_DEMO_SERVICE_COMMAND"
#: Seconds a child may take to exit after SIGTERM before the demo kills it (default 10).
STOP_GRACE_ENV = "GPUPOOL_DEMO_STOP_GRACE"
#: After its children are gone, how much longer the hub may take to finish its own cleanup. The
#: hub notices a service's death by polling with JupyterHub's exponential_backoff, whose sleeps
#: grow to 5 s (random, up to max_wait): a child killed 3 s into its stop may go unseen for 5 s
#: more, and the hub still has the proxy to stop after that.
HUB_EXTRA_GRACE = 10.0


def _stop_grace() -> float:
    raw = os.environ.get(STOP_GRACE_ENV, "").strip()
    try:
        return max(float(raw), 0.0) if raw else 10.0
    except ValueError:
        print(f"gpupool demo: {STOP_GRACE_ENV}={raw!r} is not seconds; using 10", file=sys.stderr)
        return 10.0


@dataclass
class DemoOptions:
    port: int = DEFAULT_PORT
    state_dir: Path = Path(DEFAULT_STATE_DIR)
    cluster_file: Path | None = None
    pools_dir: Path | None = None
    log_level: str = "INFO"
    extra_env: dict[str, str] = field(default_factory=dict)
    #: A JupyterHub config file loaded after the demo's own (e.g. shorter timeouts in tests).
    extra_config: Path | None = None
    #: A cluster already running (its kubeconfig): the demo then starts no simulated cluster and
    #: keeps no node labels across runs; the hub and service use that cluster as it is.
    kubeconfig: Path | None = None
    #: On stop, how long each child (the hub, its proxy and services) may take to exit after
    #: SIGTERM before it is killed with SIGKILL.
    stop_grace: float = field(default_factory=_stop_grace)


#: Where free_port() looks: below the ephemeral ranges of Linux (32768-60999) and macOS
#: (49152-65535), so that no outgoing connection is given the port between the moment it is
#: chosen and the moment the process told about it binds it (bind(("", 0)) hands out ephemeral
#: ports, and the demo's own HTTP clients took one of them at least once).
FREE_PORT_RANGE = (20000, 32000)
#: ``LOW-HIGH``: a narrower range for free_port(), in this process and the demo processes it
#: starts. Two processes that pick ports at random from the same range may pick the same one
#: before either binds it; processes given ranges of their own cannot (the test suite gives
#: each of its parallel workers one).
FREE_PORTS_ENV = "GPUPOOL_DEMO_PORTS"
_handed_out: set[int] = set()


def free_port_range() -> tuple[int, int]:
    """FREE_PORT_RANGE, or the range ``$GPUPOOL_DEMO_PORTS`` gives (ValueError if it is not
    ``LOW-HIGH`` with 1024 <= LOW <= HIGH <= 65535)."""
    raw = os.environ.get(FREE_PORTS_ENV, "").strip()
    if not raw:
        return FREE_PORT_RANGE
    low, sep, high = raw.partition("-")
    try:
        bounds = (int(low), int(high))
    except ValueError:
        bounds = (0, -1)
    if not sep or not 1024 <= bounds[0] <= bounds[1] <= 65535:
        raise ValueError(f"{FREE_PORTS_ENV}={raw!r}: expected LOW-HIGH, e.g. 20000-23000")
    return bounds


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, never the same twice in this process, from
    :func:`free_port_range`."""
    low, high = free_port_range()
    for _ in range(200):
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise OSError(f"no free port on 127.0.0.1 in {low}-{high}")


def read_or_create_token(path: Path) -> str:
    if path.exists():
        token = path.read_text().strip()
        if token:
            return token
    token = secrets.token_hex(32)
    path.write_text(token + "\n")
    path.chmod(0o600)
    return token


def default_pools_dir() -> Path | None:
    """``examples/pools`` from the source tree, else the copy shipped in the package."""
    for candidate in (HERE.parents[1] / "examples" / "pools", HERE / "pools"):
        if candidate.is_dir():
            return candidate
    return None


def demo_pools_dir(opts: DemoOptions) -> Path:
    """The service's pools directory: ``--pools`` if given, else ``STATE/pools``, a copy of the
    shipped examples made on first start (the service writes pool changes back to its
    directory, and must not change the examples)."""
    if opts.pools_dir is not None:
        return opts.pools_dir.resolve()
    target = opts.state_dir.resolve() / "pools"
    source = default_pools_dir()
    if not target.exists():
        target.mkdir(parents=True)
        if source is not None:
            for f in sorted(source.iterdir()):
                if f.is_file() and f.suffix in FILE_SUFFIXES:
                    shutil.copy2(f, target / f.name)
            training = target / "training-pool.yaml"
            if training.is_file() and "\nrecut:" not in training.read_text():
                with training.open("a") as out:
                    out.write(DEMO_RECUT)
    return target


#: What the demo adds to its copy of training-pool.yaml (the examples stay in gpuctl's format):
#: the service may re-cut gpu-node-2's A100s into MIG instances for a waiting line, and back
DEMO_RECUT = """
# Added by gpupool demo (the example file is gpuctl's): the service may re-cut gpu-node-2's
# eight A100s into MIG instances when requests wait for a shape no node offers free, and back
# to whole GPUs once they stood unused (docs/pools.md, "recut"). The names are mig-parted
# configs of the GPU operator's default file. The demo's times are short so that a newcomer
# sees both; a cluster would keep the defaults (unused 30m, interval 10m).
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-1g.10gb, all-balanced]
  home: all-disabled
  unused: 3m
  interval: 1m
"""


def service_command(opts: DemoOptions, port: int, kubeconfig: str) -> list[str] | None:
    """The gpupool service's command line (``GPUPOOL_DEMO_SERVICE_COMMAND`` replaces it), once
    the service module exists."""
    override = {**os.environ, **opts.extra_env}.get(SERVICE_COMMAND_ENV, "").strip()
    if override:
        return _service_override(override, opts, port, kubeconfig)
    try:
        import jupyter_gpupool.service  # noqa: F401
    except ImportError:
        return None
    return [
        sys.executable,
        "-m",
        "jupyter_gpupool.service",
        f"--port={port}",
        f"--kubeconfig={kubeconfig}",
        f"--pools={demo_pools_dir(opts)}",
        # the demo's memory (usage history, GPU-hours, changes) lives with the rest of its state
        f"--db-url=sqlite:///{opts.state_dir.resolve() / 'gpupool.sqlite'}",
        "--GPUPoolService.history_interval=10",
        # GPU utilization from the simulated cluster's DCGM exporter, read through its API
        "--GPUPoolService.utilization_source=dcgm",
        "--GPUPoolService.dcgm_urls=/sim/v1/dcgm/metrics",
        "--GPUPoolService.utilization_interval=5",
        # a booking's borrowers are warned 30 s before its window (600 s outside the demo), so
        # the booking scenario (docs/pools.md) plays out in two minutes
        "--GPUPoolService.booking_warning=30",
    ]


def _service_override(raw: str, opts: DemoOptions, port: int, kubeconfig: str) -> list[str]:
    try:
        cmd = json.loads(raw)
    except ValueError as e:
        raise RuntimeError(f"{SERVICE_COMMAND_ENV} is not JSON: {e}") from None
    if not (isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd)):
        raise RuntimeError(f"{SERVICE_COMMAND_ENV} must be a JSON list of strings, not {raw!r}")
    fill = {
        "{python}": sys.executable,
        "{port}": str(port),
        "{kubeconfig}": kubeconfig,
        "{pools}": str(demo_pools_dir(opts)),
    }
    out = []
    for arg in cmd:
        # plain replacement, not str.format: an argument may be code with braces of its own
        for key, value in fill.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


class Demo:
    def __init__(self, opts: DemoOptions):
        self.opts = opts
        self.state = opts.state_dir.resolve()
        self.cluster: SimCluster | None = None
        self.kubeconfig = ""
        self.labels: NodeLabelKeeper | None = None
        self.hub: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{opts.port}"
        self.admin_token = ""
        self.hub_port = self.service_port = 0
        self.proxy_api = self.proxy_token = ""

    async def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        spec = (
            load_cluster_file(self.opts.cluster_file)
            if self.opts.cluster_file
            else example_cluster_spec()
        )
        self.admin_token = read_or_create_token(self.state / ADMIN_TOKEN_FILE)
        spawner_token = read_or_create_token(self.state / "spawner-token")
        if self.opts.kubeconfig is not None:
            self.kubeconfig = str(self.opts.kubeconfig.resolve())
        else:
            # the MIG manager takes 5 s a step, so that a re-cut (training-pool may re-cut
            # gpu-node-2: DEMO_RECUT) is seen pending, then rebooting
            self.cluster = SimCluster(
                spec, kubeconfig=self.state / "kubeconfig", run_processes=True, mig_delay=5.0
            )
            # the node labels of the last run (an admin's pool changes), before anyone sees them
            self.labels = NodeLabelKeeper(self.cluster, self.state / NODE_LABELS_FILE)
            self.labels.restore()
            self.labels.start()
            await self.cluster.start()
            self.kubeconfig = self.cluster.kubeconfig
        self.hub_port, self.service_port = free_port(), free_port()
        self.proxy_api = f"http://127.0.0.1:{free_port()}"
        # the proxy's API token, which JupyterHub takes from its environment: the demo reads the
        # proxy's routes with it to know when the hub has set them up (see wait_ready)
        self.proxy_token = secrets.token_hex(32)
        env = {
            **os.environ,
            **self.opts.extra_env,
            "KUBECONFIG": self.kubeconfig,
            "GPUPOOL_DEMO_STATE_DIR": str(self.state),
            "GPUPOOL_DEMO_PORT": str(self.opts.port),
            "GPUPOOL_DEMO_HUB_PORT": str(self.hub_port),
            "GPUPOOL_DEMO_PROXY_API_PORT": self.proxy_api.rsplit(":", 1)[1],
            "GPUPOOL_DEMO_SERVICE_PORT": str(self.service_port),
            "GPUPOOL_DEMO_LOG_LEVEL": self.opts.log_level,
            "CONFIGPROXY_AUTH_TOKEN": self.proxy_token,
            # for the hub only: the spawner's admissions token (single-user servers don't get it)
            "GPUPOOL_SPAWNER_TOKEN": spawner_token,
        }
        if self.opts.extra_config is not None:
            env["GPUPOOL_DEMO_EXTRA_CONFIG"] = str(self.opts.extra_config.resolve())
        cmd = service_command(self.opts, self.service_port, self.kubeconfig)
        if cmd:
            # JSON: an environment variable cannot hold the NUL bytes that would separate args
            env["GPUPOOL_DEMO_SERVICE_COMMAND"] = json.dumps(cmd)
        self.hub = self._spawn_hub(env)
        await self.wait_ready(with_service=bool(cmd))
        # `gpupool --state-dir DIR ...` finds the demo through this file; it exists while ready
        (self.state / URL_FILE).write_text(self.url + "\n")

    def _spawn_hub(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(self.state / "jupyterhub.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(HERE / "jupyterhub_config.py")],
                cwd=self.state,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so nothing is left behind
            )

    async def wait_ready(self, with_service: bool, timeout: float = 120) -> None:
        """Wait until the hub, then the service, answer on their own ports, the hub has added
        their routes to the proxy, and both answer through it.

        The proxy listens from the start, the hub adds its routes only once its services run:
        asked through the proxy before that, every poll was a 404 in the hub's log (the proxy's
        line, and the hub's error page it fetched), a burst of them at each start. Asked directly,
        the hub and the service are silent until they listen and answer at once; the proxy's API
        then says when the routes are there (a few ``200 GET /api/routes`` lines, as the hub's
        own checks make), and the requests through the proxy answer at the first try.
        """
        deadline = time.monotonic() + timeout
        admin = {"Authorization": f"token {self.admin_token}"}
        pools = "/services/gpupool/api/v1/pools"
        await self._until(f"http://127.0.0.1:{self.hub_port}/hub/api/", admin, deadline)
        if with_service:
            await self._until(f"http://127.0.0.1:{self.service_port}{pools}", admin, deadline)
        routes = ["/", "/services/gpupool"] if with_service else ["/"]
        proxy = {"Authorization": f"token {self.proxy_token}"}
        await self._until(f"{self.proxy_api}/api/routes", proxy, deadline, has=routes)
        await self._until(f"{self.url}/hub/api/", admin, deadline)
        if with_service:
            await self._until(f"{self.url}{pools}", admin, deadline)

    async def _until(
        self, url: str, headers: dict[str, str], deadline: float, has: Sequence[str] = ()
    ) -> None:
        """Until ``url`` answers 200 (with a JSON object holding the keys ``has``)."""
        http = tornado.httpclient.AsyncHTTPClient()
        interval = 0.05
        while True:
            if self.hub is not None and self.hub.poll() is not None:
                raise RuntimeError(
                    f"JupyterHub exited with {self.hub.returncode}; "
                    f"see {self.state / 'jupyterhub.log'}"
                )
            try:
                resp = await http.fetch(url, headers=headers, request_timeout=5, raise_error=False)
                if resp.code == 200 and (not has or set(has) <= set(json.loads(resp.body))):
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{url} did not answer in time; see {self.state / 'jupyterhub.log'}"
                )
            await asyncio.sleep(interval)
            # growing: the proxy logs each look at its routes, and the hub takes a second or so
            interval = min(interval * 1.5, 0.5)

    async def stop(self) -> None:
        with contextlib.suppress(OSError):
            (self.state / URL_FILE).unlink()
        if self.hub is not None:
            await self._stop_hub(self.hub)
        self.hub = None
        if self.labels is not None:
            self.labels.stop()
            self.labels = None
        if self.cluster is not None:
            await self.cluster.stop()  # the kubelet stops any pod process still running
            self.cluster = None

    async def _stop_hub(self, hub: subprocess.Popen[bytes]) -> None:
        """SIGTERM the hub and every process below it; SIGKILL, and say so, any that is still
        running after the grace period (a service stuck in a CPU-bound request never gets back
        to its signal handler, and JupyterHub's own escalation dies with the hub)."""
        grace = self.opts.stop_grace
        hub_proc = process(hub.pid)
        if hub_proc is not None:
            # noted before any signal: once the hub exits, its orphans are not its descendants
            children = descendants(hub.pid)
            stopping = Stopping("gpupool demo")
            # JupyterHub stops its services, the proxy and the servers on SIGTERM; the children
            # get SIGTERM too, so that a hub that hangs cannot keep them running
            stopping.term([hub_proc, *children])
            began = time.monotonic()
            await _wait(stopping, hub_proc, children, children, began + grace)
            # those signalled at the start; what the hub started since (it restarts a proxy
            # that exits) is waited for below, not killed the moment it was asked to stop
            stopping.kill(stopping.overdue(children, grace))
            # the hub may then need a moment more: its cleanup waited for the killed children
            until = max(began + grace, time.monotonic()) + HUB_EXTRA_GRACE
            await _wait(stopping, hub_proc, children, [hub_proc], until)
            stopping.kill([hub_proc])
            # what the hub started after the children were killed, and left behind
            late = await stopping.wait_async(children, HUB_EXTRA_GRACE)
            stopping.kill(late)
        # anything left in the hub's own process group: the table may have been unreadable
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(hub.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            hub.wait(timeout=5)


async def _wait(
    stopping: Stopping, hub: Proc, children: list[Proc], procs: list[Proc], until: float
) -> None:
    """Wait until ``procs`` are gone or ``until``, adopting what the hub starts meanwhile."""
    while True:
        stopping.adopt(hub, children)
        if not stopping.left(procs) or time.monotonic() >= until:
            return
        await asyncio.sleep(0.1)


async def run_demo(opts: DemoOptions) -> int:
    demo = Demo(opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await demo.start()
    except BaseException as e:
        await demo.stop()
        if isinstance(e, RuntimeError):
            print(f"gpupool demo: {e}", file=sys.stderr)
            return 1
        raise
    print(
        f"JupyterHub: {demo.url}  (log in as alice, bob, carol, dave or admin; any password)\n"
        f"state:      {demo.state} (hub log: jupyterhub.log; API token for scripts: admin-token)\n"
        f"CLI:        gpupool get pools --state-dir {demo.state}\n"
        f"kubeconfig: {demo.kubeconfig}",
        flush=True,
    )
    print(f"ready {demo.url}", flush=True)
    hub = demo.hub
    try:
        while not stop.is_set():
            if hub is not None and hub.poll() is not None:
                print(f"gpupool demo: JupyterHub exited with {hub.returncode}", file=sys.stderr)
                return 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1)
    finally:
        await demo.stop()
    return 0
