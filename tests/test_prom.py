"""The throwaway Prometheus of the tests (tests/prom.py): it scrapes an exporter on 127.0.0.1 at
the given path, over plain HTTP and over HTTPS with a bearer token and the simulator's kind of
certificate authority, and its query API gives what the exporter serves."""

from __future__ import annotations

import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import prom
import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web
from prom import Target, by
from waiting import wait_for

from jupyter_gpupool.sim.credentials import TLSIdentity, new_tls_identity

PATH = "/sim/v1/dcgm/metrics"
AVG = "avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)"


def gauge(values: dict[tuple[str, str], float]) -> str:
    """The text exposition format of ``DCGM_FI_DEV_GPU_UTIL`` for {(pod, gpu): value}."""
    lines = [
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    ]
    for (pod, gpu), value in values.items():
        labels = f'namespace="default",pod="{pod}",gpu="{gpu}"'
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value:g}")
    return "\n".join(lines) + "\n"


@dataclass
class Exporter:
    """A metrics endpoint on 127.0.0.1 (a free port, its own thread, so that the blocking waits
    can be used) serving ``body`` at ``PATH``, over HTTPS with ``tls``; with ``token`` it answers
    401 without ``Authorization: Bearer <token>``."""

    body: str
    token: str | None = None
    tls: TLSIdentity | None = None
    requests: list[tuple[str, dict[str, list[str]], str]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                split = urllib.parse.urlsplit(self.path)
                authorization = self.headers.get("Authorization", "")
                exporter.requests.append(
                    (split.path, urllib.parse.parse_qs(split.query), authorization)
                )
                if split.path != PATH:
                    self.send_error(404)
                elif exporter.token is not None and authorization != f"Bearer {exporter.token}":
                    self.send_error(401)
                else:
                    data = exporter.body.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if self.tls is not None:
            # a failed handshake (a client that does not trust the CA) is an OSError in accept,
            # which socketserver drops
            self.server.socket = self.tls.server_context().wrap_socket(
                self.server.socket, server_side=True
            )
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}{PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def exporters() -> Iterator[list[Exporter]]:
    """The exporters a test starts (append them), closed after it."""
    started: list[Exporter] = []
    yield started
    for exporter in started:
        exporter.close()


async def test_scrapes_an_endpoint_on_the_event_loop_and_follows_its_value() -> None:
    """Prometheus scrapes an endpoint served on the test's event loop (as the simulator's is) at
    its path, with the target's parameters, every second; the async waits keep the loop serving.
    The average per pod is what the endpoint serves, and follows it when it changes."""
    served = {"body": gauge({("p1", "0"): 42, ("p2", "0"): 10, ("p2", "1"): 30})}
    seen: list[tuple[str, dict[str, list[str]]]] = []

    class Metrics(tornado.web.RequestHandler):
        def get(self) -> None:
            seen.append((self.request.path, urllib.parse.parse_qs(self.request.query)))
            self.set_header("Content-Type", "text/plain; version=0.0.4")
            self.write(served["body"])

    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server = tornado.httpserver.HTTPServer(tornado.web.Application([(PATH, Metrics)]))
    http_server.add_sockets(sockets)
    url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}{PATH}"
    try:
        with prom.running([Target(url, params={"cluster": "c1"})]) as server:
            assert server.url.startswith("http://127.0.0.1:")
            first = await server.async_wait_for_series(
                AVG, what="p1 and p2 to be scraped", until=lambda r: len(r) == 2
            )
            assert by(first, "namespace", "pod") == {
                ("default", "p1"): 42.0,
                ("default", "p2"): 20.0,
            }
            assert seen[0] == (PATH, {"cluster": ["c1"]})
            served["body"] = gauge({("p1", "0"): 7, ("p2", "0"): 10, ("p2", "1"): 30})
            await server.async_wait_for_series(
                AVG,
                what="p1's average to follow the endpoint to 7",
                until=lambda r: by(r, "pod").get(("p1",)) == 7.0,
            )
            (target,) = await server.async_targets()
            assert (target["health"], target["labels"]["job"]) == ("up", "target-0"), target
    finally:
        http_server.stop()


def _scraped(server: prom.Prometheus) -> dict[str, tuple[str, str]] | None:
    """{job: (health, last error)} once every target was scraped, else None."""
    health = {t["scrapePool"]: (t["health"], t["lastError"]) for t in server.targets()}
    return health if all(h != "unknown" for h, _ in health.values()) else None


def test_https_target_with_bearer_token_and_ca(exporters: list[Exporter], tmp_path: Path) -> None:
    """Over HTTPS with a certificate from the simulator's kind of per-cluster CA: with the CA file
    and the right token the series arrive and the token was sent; with a wrong token the target
    is down with a 401, and without the CA it is down on the certificate."""
    identity = new_tls_identity()
    ca = tmp_path / "ca.crt"
    ca.write_text(identity.ca_pem)
    token = "s3cret-token"
    exporter = Exporter(gauge({("p1", "0"): 42}), token=token, tls=identity)
    exporters.append(exporter)
    targets = [
        Target(exporter.url, token=token, ca_file=ca, job="good", labels={"cluster": "c1"}),
        Target(exporter.url, token="wrong", ca_file=ca, job="wrong-token"),
        Target(exporter.url, token=token, job="no-ca"),
    ]
    assert exporter.url.startswith("https://127.0.0.1:")
    with prom.running(targets) as server:
        result = server.wait_for_series(
            'avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{job="good", cluster="c1"})',
            what="the https target's series",
        )
        assert by(result, "namespace", "pod") == {("default", "p1"): 42.0}
        health = wait_for(lambda: _scraped(server), what="every target to be scraped once")
        assert health is not None
        assert health["good"] == ("up", ""), health
        assert health["wrong-token"][0] == "down", health
        assert "401" in health["wrong-token"][1], health
        assert health["no-ca"][0] == "down", health
        assert "certificate" in health["no-ca"][1], health
        assert {a for _, _, a in exporter.requests} >= {f"Bearer {token}", "Bearer wrong"}


def test_stops_and_removes_its_directory() -> None:
    """Leaving the context stops the server (its PID is gone) and removes its directory."""
    with prom.running([]) as server:
        assert prom.alive(server.pid)
        assert (server.directory / "prometheus.yml").is_file()
        assert by(server.query("1 + 1")) == {(): 2.0}
    assert not prom.alive(server.pid)
    assert not server.directory.exists()


def test_a_server_that_exits_is_reported_with_its_log() -> None:
    """A configuration Prometheus rejects makes :func:`prom.running` fail at once, quoting the
    server's log."""
    with pytest.raises(RuntimeError) as failed, prom.running([], scrape_interval="often"):
        pass  # pragma: no cover - not reached
    message = str(failed.value)
    assert "prometheus exited" in message
    assert "often" in message and "prometheus log (tail)" in message


def test_without_the_binary_it_skips_and_under_ci_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without /usr/bin/prometheus a test that needs it is skipped with the reason, and under CI
    it fails instead (scripts/test.sh installs it there)."""
    monkeypatch.setattr(prom, "BINARY", tmp_path / "no-prometheus")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-prometheus"), prom.running([]):
        pass  # pragma: no cover - not reached
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="installs prometheus"), prom.running([]):
        pass  # pragma: no cover - not reached
