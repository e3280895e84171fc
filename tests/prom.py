"""A throwaway Prometheus server for tests: Debian's ``/usr/bin/prometheus`` with a configuration
and a TSDB in a temporary directory, listening on 127.0.0.1 only on a free port, scraping the
given targets every second.

    from prom import Target, by, running

    target = Target(f"{sim_url}/sim/v1/dcgm/metrics", token=token, ca_file=ca_path)
    with running([target]) as server:
        server.wait_for_series('DCGM_FI_DEV_GPU_UTIL{pod="p1"}', what="p1's utilisation")
        by(server.query("avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)"), "namespace", "pod")

Each :class:`Target` is a scrape job of its own: ``scheme`` and ``metrics_path`` come from its URL,
the bearer token goes in an ``authorization`` credentials file, the CA in ``tls_config.ca_file``.
The waits poll the HTTP API (tests/waiting.py); in a test whose event loop serves the scraped
endpoint, use the ``async_`` variants so the loop keeps serving while they wait.

The first scrape comes about 5 s after the server is ready, whatever the scrape interval:
Prometheus 2.42's scrape manager applies its targets on a fixed 5 s tick (no flag changes it in
2.42). Later scrapes follow the interval. So start one server per test and check several things
against it, and leave the waits' default timeout (20 s) alone.

Nothing is enabled beyond scraping and querying: no lifecycle or admin API, no remote write, no
rules, no alerting. Prometheus runs as the current user (root is fine: it does not mind, and the
temporary directory is root's). It is stopped by its PID (SIGTERM, then SIGKILL), and, started
from the main thread, it dies with the process that started it (``PR_SET_PDEATHSIG``), so a test
run killed by ``timeout`` leaves no server behind. Without the binary the tests that need it skip, and fail under CI (tests/needs.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from needs import need
from waiting import WaitTimeout, async_wait_for, wait_for

WHERE = "scripts/test.sh installs prometheus as root"
BINARY = Path("/usr/bin/prometheus")
STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
READY_TIMEOUT = 30.0
LOG_TAIL = 3000  # characters of the server's log quoted in errors

Result = dict[str, Any]  # one element of the query API's ``data.result``


@dataclass(frozen=True)
class Target:
    """An endpoint to scrape: its full URL (``http`` or ``https``, with the path, e.g.
    ``https://127.0.0.1:PORT/sim/v1/dcgm/metrics``), the bearer token to send, the CA file that
    signed an https server's certificate, query parameters (added to those of the URL), labels
    added to its series, and the job name (default ``target-N``, N its index)."""

    url: str
    token: str | None = None
    ca_file: str | Path | None = None
    params: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    job: str | None = None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape_config(target: Target, job: str, secrets_dir: Path) -> dict[str, Any]:
    """The ``scrape_configs`` entry for ``target``; its token goes in a file in ``secrets_dir``."""
    url = urllib.parse.urlsplit(target.url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError(f"target URL must be http(s)://HOST:PORT/PATH: {target.url!r}")
    params: dict[str, list[str]] = {}
    for key, value in urllib.parse.parse_qsl(url.query, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    for key, values in target.params.items():
        params.setdefault(key, []).extend([values] if isinstance(values, str) else values)
    config: dict[str, Any] = {
        "job_name": job,
        "scheme": url.scheme,
        "metrics_path": url.path or "/",
        "static_configs": [{"targets": [url.netloc], "labels": dict(target.labels)}],
    }
    if params:
        config["params"] = params
    if target.token is not None:
        credentials = secrets_dir / f"{job}.token"
        credentials.write_text(target.token)
        credentials.chmod(0o600)
        config["authorization"] = {"type": "Bearer", "credentials_file": str(credentials)}
    if target.ca_file is not None:
        if url.scheme != "https":
            raise ValueError(f"a CA file is for an https target: {target.url!r}")
        config["tls_config"] = {"ca_file": str(Path(target.ca_file).resolve())}
    return config


def config_text(targets: Sequence[Target], scrape_interval: str, secrets_dir: Path) -> str:
    """prometheus.yml for ``targets`` (JSON, which is YAML): every target every
    ``scrape_interval``, with the same timeout."""
    jobs = [t.job or f"target-{i}" for i, t in enumerate(targets)]
    if len(set(jobs)) != len(jobs):
        raise ValueError(f"job names must differ: {jobs}")
    config = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval},
        "scrape_configs": [
            scrape_config(t, j, secrets_dir) for t, j in zip(targets, jobs, strict=True)
        ],
    }
    return json.dumps(config, indent=2) + "\n"


# urllib would go through $http_proxy; the server is on 127.0.0.1
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, timeout: float = 10.0) -> Any:
    """GET an API URL of the server: its ``data``, or RuntimeError with the server's error."""
    try:
        with _opener.open(url, timeout=timeout) as response:
            body = json.load(response)
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        raise RuntimeError(f"GET {url}: HTTP {e.code}: {text[:1000]}") from None
    if body.get("status") != "success":
        raise RuntimeError(f"GET {url}: {body}")
    return body["data"]


@dataclass(frozen=True)
class Prometheus:
    """A running throwaway server (from :func:`running`)."""

    url: str  # http://127.0.0.1:PORT
    pid: int
    directory: Path  # prometheus.yml, data/, prometheus.log
    started_in: float  # seconds from exec to ready

    @property
    def log(self) -> Path:
        return self.directory / "prometheus.log"

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-LOG_TAIL:] if self.log.exists() else ""

    def query(self, promql: str) -> list[Result]:
        """Evaluate ``promql`` now (``/api/v1/query``): the ``result`` list, e.g.
        ``[{"metric": {"pod": "p1"}, "value": [1700000000.123, "42"]}]``."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        data = _get(url)
        result = data["result"]
        if data["resultType"] in ("vector", "matrix"):
            return list(result)
        return [{"metric": {}, "value": result}]  # a scalar or a string, as a one-sample vector

    def targets(self) -> list[Result]:
        """The active targets (``/api/v1/targets``): each with ``scrapePool`` (the job),
        ``scrapeUrl``, ``health`` (``up``, ``down`` or ``unknown``), ``lastError``..."""
        return list(_get(f"{self.url}/api/v1/targets?state=active")["activeTargets"])

    def wait_for_series(
        self,
        promql: str,
        *,
        what: str,
        until: Callable[[list[Result]], object] = bool,
        timeout: float = 20.0,
    ) -> list[Result]:
        """Query until the result is non-empty (or satisfies ``until``); return it. Fails with
        ``what``, the last result, and each target's health and last scrape error."""

        def satisfied() -> list[Result] | None:
            result = self.query(promql)
            return result if until(result) else None

        try:
            found = wait_for(satisfied, what=f"{what} ({promql})", timeout=timeout, interval=0.1)
        except WaitTimeout as e:
            raise WaitTimeout(f"{e}; {self._state(self.query(promql))}") from None
        assert found is not None
        return found

    def _state(self, last: list[Result]) -> str:
        """For failures: the last result and how each target's last scrape went."""
        scrapes = "; ".join(
            f"{t['scrapePool']} {t['scrapeUrl']}: {t['health']} {t['lastError']!r}".rstrip()
            for t in self.targets()
        )
        return f"last result: {last}; targets: {scrapes or 'none'}"

    async def async_query(self, promql: str) -> list[Result]:
        """:meth:`query` in a thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.query, promql)

    async def async_targets(self) -> list[Result]:
        return await asyncio.to_thread(self.targets)

    async def async_wait_for_series(
        self,
        promql: str,
        *,
        what: str,
        until: Callable[[list[Result]], object] = bool,
        timeout: float = 20.0,
    ) -> list[Result]:
        """:meth:`wait_for_series` for the event loop (for endpoints served on it)."""

        async def satisfied() -> list[Result] | None:
            result = await self.async_query(promql)
            return result if until(result) else None

        try:
            found: list[Result] | None = await async_wait_for(
                satisfied, what=f"{what} ({promql})", timeout=timeout, interval=0.1
            )
        except WaitTimeout as e:
            last = await self.async_query(promql)
            raise WaitTimeout(f"{e}; {await asyncio.to_thread(self._state, last)}") from None
        assert found is not None
        return found


def by(results: Sequence[Result], *labels: str) -> dict[tuple[str, ...], float]:
    """A vector's values keyed by the given labels: ``by(r, "pod") == {("p1",): 42.0}``."""
    return {
        tuple(r["metric"].get(label, "") for label in labels): float(r["value"][1]) for r in results
    }


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child get SIGTERM when its parent dies (Linux). Only from the
    main thread: the signal comes when the thread that started the child ends."""
    if (
        not sys.platform.startswith("linux")
        or threading.current_thread() is not threading.main_thread()
    ):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def preexec() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)

    return preexec


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_GRACE)


def _start(top: Path, port: int) -> subprocess.Popen[bytes]:
    argv = [
        str(BINARY),
        f"--config.file={top / 'prometheus.yml'}",
        f"--storage.tsdb.path={top / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1d",
        # a series without new samples leaves query results after 1 m, not 5 (a target that
        # fails or drops a series marks it stale at once anyway)
        "--query.lookback-delta=1m",
        "--query.max-concurrency=4",
        "--log.level=info",
    ]
    with open(top / "prometheus.log", "ab") as log:
        return subprocess.Popen(
            argv,
            cwd=top,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent(),  # only calls prctl: safe with threads
        )


def _ready(prom: Prometheus, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"prometheus exited ({process.returncode})")
    with _opener.open(f"{prom.url}/-/ready", timeout=2) as response:
        return bool(response.status == 200)


@contextlib.contextmanager
def running(
    targets: Sequence[Target], scrape_interval: str = "1s", attempts: int = 3
) -> Iterator[Prometheus]:
    """Start a server scraping ``targets`` in a new temporary directory, wait until it is ready
    (``/-/ready``), yield the :class:`Prometheus`, then stop it and remove the directory."""
    need(BINARY.is_file(), f"Prometheus ({BINARY})", WHERE)
    top = Path(tempfile.mkdtemp(prefix="gpupool-prom-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        (top / "prometheus.yml").write_text(config_text(targets, scrape_interval, top))
        for attempt in range(attempts):
            # the port is free now; another process may take it before the server binds it
            port = _free_port()
            began = time.monotonic()
            process = _start(top, port)
            prom = Prometheus(f"http://127.0.0.1:{port}", process.pid, top, 0.0)
            try:
                wait_for(
                    lambda: _ready(prom, process),  # noqa: B023 - called in this iteration only
                    what=f"prometheus to be ready at {prom.url}/-/ready",
                    timeout=READY_TIMEOUT,
                    interval=0.05,
                    ignore=(OSError,),
                )
                break
            except (RuntimeError, WaitTimeout) as e:
                _stop(process)
                tail = prom.log_tail()
                if "address already in use" not in tail or attempt == attempts - 1:
                    config = (top / "prometheus.yml").read_text()
                    raise RuntimeError(
                        f"{e}\nprometheus.yml:\n{config}\nprometheus log (tail):\n{tail}"
                    ) from None
                (top / "prometheus.log").unlink()
        yield Prometheus(prom.url, prom.pid, top, time.monotonic() - began)
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(top, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]
    return True


def token_and_ca_file(kubeconfig: str, directory: Path) -> tuple[str, Path]:
    """What a Prometheus config needs from the kubeconfig: its token, and its CA as a file."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    ca = directory / "sim-ca.crt"
    ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    return config["users"][0]["user"]["token"], ca
