"""What the service benchmarks share: the gpupool service in a process of its own
(``python -m jupyter_gpupool.service``) against a simulated cluster, with a stub of JupyterHub's
token check in this process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tornado.httpclient
import tornado.httpserver
import tornado.netutil
import tornado.web

from jupyter_gpupool.demo.run import free_port

PREFIX = "/services/gpupool/"
#: The service's own token (HubAuth checks visitors' tokens with it).
SERVICE_TOKEN = "bench-service-token"


def start_hub_stub(models: Mapping[str, dict[str, Any]]) -> str:
    """JupyterHub's ``/hub/api/user``: the model of each token in ``models``, 403 for any other.
    Served by this process's event loop; returns the API URL."""

    class WhoAmI(tornado.web.RequestHandler):
        def get(self) -> None:
            token = self.request.headers.get("Authorization", "").partition(" ")[2]
            if token not in models:
                raise tornado.web.HTTPError(403)
            self.finish(json.dumps(models[token]))

    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/hub/api/user", WhoAmI)]))
    server.add_sockets(sockets)
    return f"http://127.0.0.1:{sockets[0].getsockname()[1]}/hub/api"


#: How the hub starts the service.
SERVICE_COMMAND = (sys.executable, "-m", "jupyter_gpupool.service")


def start_service(
    kubeconfig: str,
    pools_dir: Path,
    hub_api: str,
    *extra_args: str,
    db_url: str | None = None,
    command: tuple[str, ...] = SERVICE_COMMAND,
) -> tuple[subprocess.Popen[bytes], str]:
    """The service on a free port, as the hub would start it (``command``: another program
    taking the service's arguments, such as ``baseline_service.py``); returns it and its URL.
    Its database is ``db_url`` ('' = none), by default an SQLite file beside ``pools_dir``."""
    if db_url is None:
        db_url = f"sqlite:///{Path(pools_dir).parent / 'gpupool.sqlite'}"
    port = free_port()
    env = {
        **os.environ,
        "JUPYTERHUB_API_URL": hub_api,
        "JUPYTERHUB_API_TOKEN": SERVICE_TOKEN,
        "JUPYTERHUB_SERVICE_PREFIX": PREFIX,
        "JUPYTERHUB_CLIENT_ID": "service-gpupool",
    }
    proc = subprocess.Popen(
        [
            *command,
            f"--port={port}",
            f"--kubeconfig={kubeconfig}",
            f"--pools={pools_dir}",
            f"--db-url={db_url}",
            "--log-level=WARN",
            *extra_args,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    return proc, f"http://127.0.0.1:{port}{PREFIX}"


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def quiet(pid: int, timeout: float = 300) -> float:
    """Wait until process ``pid`` has settled after its start (the service's ledger writes the
    sessions of every running server to its database then, in a thread, and takes its first
    sample): less than a tenth of a core over a second. Returns the seconds waited."""
    started = time.perf_counter()
    before = cpu_seconds(pid)
    while time.perf_counter() - started < timeout:
        await asyncio.sleep(1)
        now = cpu_seconds(pid)
        if now - before < 0.1:
            break
        before = now
    return time.perf_counter() - started


def stop_service(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if the service has not exited 30 s later."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_answering(
    proc: subprocess.Popen[bytes],
    answers: Callable[[], Awaitable[bool]],
    timeout: float | None = None,
) -> None:
    """Until ``answers()`` is true (the service has synced and answers); SystemExit if the
    service exits first, or after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited with {proc.returncode}")
        try:
            if await answers():
                return
        except OSError:
            pass  # not listening yet
        if deadline is not None and time.monotonic() > deadline:
            raise SystemExit(f"the service did not answer within {timeout:g} s")
        await asyncio.sleep(0.1)


def answers_ok(url: str, token: str) -> Callable[[], Awaitable[bool]]:
    """For :func:`wait_answering`: whether a GET of ``url`` with ``token`` answers 200."""
    http = tornado.httpclient.AsyncHTTPClient()

    async def answers() -> bool:
        try:
            resp = await http.fetch(
                url, headers={"Authorization": f"token {token}"}, raise_error=False
            )
        except tornado.httpclient.HTTPClientError:
            # a timeout: while this process's loop sends a 150,000-pod list to the service,
            # its own request can wait past tornado's 20 s; not an answer yet
            return False
        return resp.code == 200

    return answers
