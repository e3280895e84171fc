"""The demo's HTTP proxy: the Python ``configurable-http-proxy`` package, streaming responses
and passing on the websocket subprotocol.

``python -m jupyter_gpupool.demo.proxy`` takes configurable-http-proxy's command line (JupyterHub
starts it as ``c.ConfigurableHTTPProxy.command``). The package (0.4) buffers each response until
the upstream has finished it and gives up on any request after tornado's default 20 s: the
hub's spawn-progress event stream then shows nothing while a server starts, all of it at once
when the server is ready (the page reloads at once, so the user sees none of it), and a start
longer than 20 s leaves the progress page waiting for good. The JavaScript proxy streams; so
does this one, passing on each chunk as it comes (corridor/configurable-http-proxy#17).
The package also answers a websocket handshake without the subprotocol its upstream chose, so
each JupyterLab kernel connection first fails (JupyterLab then falls back to its old text
protocol), and it sends binary frames from the browser on as text frames; this one does both
right, so JupyterLab talks to kernels with the binary v1 protocol, as behind the JavaScript proxy.
The package proxies through tornado's shared HTTP client, which runs at most 10 requests at once
and queues the rest: ten held questions (``GET api/v1/admissions/ID?wait=30``, or the hub's
progress streams of ten starts) then shut every other request out until one ends. This one
proxies through a client of its own with room for :data:`MAX_UPSTREAM_REQUESTS` at once, as
the JavaScript proxy's Node.js agent sets no limit of its own.
Its log never holds a token from a URL: tornado's access line for each request shows the URL
with ``?token=...`` redacted, as does every other line (:mod:`jupyter_gpupool.logredact`).
"""

from __future__ import annotations

import logging
from typing import Any

from configurable_http_proxy import cli
from configurable_http_proxy.configproxy import PythonProxy
from configurable_http_proxy.handlers import ProxyHandler
from tornado import httputil
from tornado.httpclient import AsyncHTTPClient
from tornado.web import Application

from ..logredact import install, redact

#: A proxied request's time limit when ``--proxy-timeout`` is not given. Event streams (the
#: hub's spawn progress) stay open as long as a start takes, so it is generous.
DEFAULT_REQUEST_TIMEOUT = 24 * 3600.0
#: Headers of the upstream's response that are not passed on: the proxy frames (and tornado
#: decompresses) the body itself.
#: How many proxied requests may run at once (each holds one connection upstream while it runs);
#: held questions and event streams stay open for long, so far more than tornado's default 10.
MAX_UPSTREAM_REQUESTS = 1000
HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "content-encoding", "connection"})


class DemoProxyHandler(ProxyHandler):
    """configurable-http-proxy's handler, passing the upstream's response on as it arrives, and
    the upstream's websocket subprotocol."""

    def initialize(self, **kwargs: Any) -> None:
        super().initialize(**kwargs)
        self._upstream_start: httputil.ResponseStartLine | None = None
        self._upstream_headers = httputil.HTTPHeaders()
        self._headers_sent = False

    async def call_proxy(self, path: str | None = None) -> None:
        url = await self.get_target_url(path)
        if url is None:
            return
        req = self._get_proxy_request(url)
        req.request_timeout = self.proxy.proxy_timeout or DEFAULT_REQUEST_TIMEOUT
        req.header_callback = self._on_upstream_header_line
        req.streaming_callback = self._on_upstream_chunk
        try:
            await self.proxy.upstream().fetch(req, raise_error=False)
        except Exception as err:  # no answer (refused, timed out), or it broke off
            if not self._headers_sent:
                await self.handle_proxy_error(503, err)
                return
            # too late for an error page: the client gets what came, as from the upstream
            self.proxy.log.warning(f"{self.request.method} {self.request.path} cut off: {err}")
        self._send_upstream_headers()  # a response without a body: nothing sent them yet
        self.finish()

    def _on_upstream_header_line(self, line: str) -> None:
        # tornado passes the status line, each header line, then an empty line; after a
        # "100 Continue" another status line starts the real response
        line = line.rstrip("\r\n")
        if line.startswith("HTTP/"):
            self._upstream_start = httputil.parse_response_start_line(line)
            self._upstream_headers = httputil.HTTPHeaders()
        elif line:
            self._upstream_headers.parse_line(line)

    def _send_upstream_headers(self) -> None:
        if self._headers_sent or self._upstream_start is None:
            return
        self._headers_sent = True
        self.set_status(self._upstream_start.code, self._upstream_start.reason or None)
        # as configurable-http-proxy does: the upstream's value wins over the proxy's own
        # (Server, Content-Type, Date); repeated headers (Set-Cookie) are all passed on
        own = {name.lower() for name, _ in self._headers.get_all()}
        for name, value in self._upstream_headers.get_all():
            if name.lower() in HOP_HEADERS:
                continue
            if name.lower() in own:
                self.set_header(name, value)
                own.discard(name.lower())
            else:
                self.add_header(name, value)

    def _on_upstream_chunk(self, chunk: bytes) -> None:
        self._send_upstream_headers()
        self.write(chunk)
        self.flush()  # now, not when the upstream is done: event streams depend on it

    def _request_summary(self) -> str:
        # tornado's access log line: the URL's query may hold ?token=
        return redact(super()._request_summary())

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        # The upstream websocket is connected first, offered the client's subprotocols: answer
        # the client with the one the upstream chose. Without it, browsers drop the connection
        # (JupyterLab's kernel protocol), and JupyterLab reconnects with the old protocol.
        return self.ws_client.selected_subprotocol if self.ws_client else None

    def on_message(self, message: str | bytes) -> None:
        # as configurable-http-proxy does, but binary frames stay binary (the package sends
        # them on as text, which a server closes the connection over: kernel protocol v1)
        if self.ws_client:
            prefix = self.target["prefix"] if self.target else ""
            if prefix:
                self.proxy.update_last_activity(prefix)
            self.ws_client.write_message(message, binary=isinstance(message, bytes))


class DemoProxy(PythonProxy):
    """configurable-http-proxy's proxy with :class:`DemoProxyHandler`."""

    def __init__(self, options: Any = ()) -> None:
        super().__init__(options)
        self.proxy_app = Application([(r"/(.*)", DemoProxyHandler, {"proxy": self})])
        self._upstream: AsyncHTTPClient | None = None

    def upstream(self) -> AsyncHTTPClient:
        """The proxy's own HTTP client (made on first use, on the loop that serves): not
        tornado's shared one, which other code of the process may fill."""
        if self._upstream is None:
            self._upstream = AsyncHTTPClient(force_instance=True, max_clients=MAX_UPSTREAM_REQUESTS)
        return self._upstream


def main() -> None:
    # configurable-http-proxy's command line builds the proxy it serves from this name
    cli.PythonProxy = DemoProxy
    install([logging.getLogger()])  # the package logs through a handler on the root logger
    cli.main()


if __name__ == "__main__":
    main()
