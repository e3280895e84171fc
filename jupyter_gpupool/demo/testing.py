"""``gpupool demo`` and ``gpupool sim`` in child processes, for tests that need the whole thing
(CLI, browser, kubectl).

::

    with DemoProcess.start(tmp_path / "demo") as demo:
        status, body = demo.api("GET", "/services/gpupool/api/v1/pools")

    with SimProcess.start(Path("examples/cluster.yaml"), tmp_path / "kubeconfig") as sim:
        subprocess.run(["kubectl", "get", "nodes"], env={**os.environ, "KUBECONFIG": ...})

Each runs exactly as a person starts it (``python -m jupyter_gpupool demo|sim``), the demo on a
free port and the simulator on one it picks itself, and is stopped with SIGTERM (the demo stops
the hub, its proxy, its services and the servers).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ADMIN_TOKEN_FILE
from .processes import Stopping, descendants, process
from .run import free_port


@dataclass
class DemoProcess:
    proc: subprocess.Popen[str]
    url: str  # the hub's, http://127.0.0.1:PORT
    state: Path
    token: str  # the demo's admin API token

    @property
    def service_url(self) -> str:
        return self.url + "/services/gpupool/"

    @classmethod
    @contextlib.contextmanager
    def start(cls, state: Path, timeout: float = 120) -> Iterator[DemoProcess]:
        state.mkdir(parents=True, exist_ok=True)
        proc = _launch(
            ["demo", "--port", str(free_port()), "--state-dir", str(state)],
            state / "demo-stderr.log",
        )
        try:
            url = _wait_ready(proc, state, timeout)
            token = (state / ADMIN_TOKEN_FILE).read_text().strip()
            yield cls(proc, url, state, token)
        finally:
            _stop(proc)

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, JSON or bytes)`` of a request to the hub with the admin token."""
        req = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"token {self.token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def start_server(self, user: str, timeout: float = 60) -> dict[str, Any]:
        """Start ``user``'s default server through the hub and wait until it is ready."""
        self.api("POST", f"/hub/api/users/{user}")
        status, body = self.api("POST", f"/hub/api/users/{user}/server")
        if status not in (201, 202, 400):  # 400: already running
            raise RuntimeError(f"cannot start {user}'s server: {status} {body!r}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _, model = self.api("GET", f"/hub/api/users/{user}")
            server = model.get("servers", {}).get("", {})
            if server.get("ready"):
                return server
            time.sleep(0.3)
        raise RuntimeError(f"{user}'s server did not become ready within {timeout:.0f}s")

    def server_running(self, user: str) -> bool:
        _, model = self.api("GET", f"/hub/api/users/{user}")
        return "" in (model.get("servers") or {})


def _launch(args: list[str], stderr: Path) -> subprocess.Popen[str]:
    """``python -m jupyter_gpupool ARGS`` in a session of its own, stdout piped (for its ready
    line), stderr to a file: a pipe nobody reads would block the child once it is full."""
    with open(stderr, "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "jupyter_gpupool", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )


def _ready_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    """The URL of the ``ready URL`` line both commands print, or None if none came."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("ready "):
            return line.split()[1]
        if not line and proc.poll() is not None:
            break
    return None


def _wait_ready(proc: subprocess.Popen[str], state: Path, timeout: float) -> str:
    url = _ready_line(proc, timeout)
    if url is not None:
        return url
    _stop(proc)
    err, log = state / "demo-stderr.log", state / "jupyterhub.log"
    tail = log.read_text()[-3000:] if log.exists() else ""
    raise RuntimeError(f"gpupool demo did not start: {err.read_text()}\n{tail}")


#: How long ``gpupool demo|sim`` may take to stop after SIGTERM: the demo gives each of its own
#: children a grace period (10 s by default) and the hub a little more, so this is well above.
STOP_GRACE = 60.0
#: How long a process left behind by them may take to exit after SIGTERM.
LEFTOVER_GRACE = 5.0


def _stop(
    proc: subprocess.Popen[str], grace: float = STOP_GRACE, leftover_grace: float = LEFTOVER_GRACE
) -> None:
    """SIGTERM ``proc`` (it stops its own children); after ``grace`` s, SIGKILL it. Then any
    process that was below it and still runs gets SIGTERM, a short grace and SIGKILL; each kill
    is reported on stderr."""
    if proc.poll() is None:
        # noted first: the demo's hub runs in a session of its own, out of reach of killpg
        root = process(proc.pid)
        below = descendants(proc.pid) if root is not None else []
        stopping = Stopping("jupyter_gpupool.demo.testing")
        if root is not None:
            stopping.term([root])
        else:  # not in the process table (no /proc, no ps): signal it all the same
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            stopping.kill([root] if root is not None else [])
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.kill()  # not a group leader, or not in the process table
            proc.wait()
        # whatever it left behind (nothing, when it stopped its children as it should)
        stopping.term(below)
        stopping.wait(below, leftover_grace)
        stopping.kill(below)
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass
class SimProcess:
    proc: subprocess.Popen[str]
    url: str  # the simulated API server's, http://127.0.0.1:PORT
    kubeconfig: Path

    @classmethod
    @contextlib.contextmanager
    def start(cls, cluster: Path, kubeconfig: Path, timeout: float = 60) -> Iterator[SimProcess]:
        """``gpupool sim --cluster CLUSTER --port 0 --kubeconfig KUBECONFIG`` until it is ready;
        its stderr goes to ``sim-stderr.log`` beside the kubeconfig."""
        proc = _launch(
            ["sim", "--cluster", str(cluster), "--port", "0", "--kubeconfig", str(kubeconfig)],
            kubeconfig.parent / "sim-stderr.log",
        )
        try:
            url = _ready_line(proc, timeout)
            if url is None:
                err_text = (kubeconfig.parent / "sim-stderr.log").read_text()
                raise RuntimeError(f"gpupool sim did not start: {err_text}")
            yield cls(proc, url, kubeconfig)
        finally:
            _stop(proc)
