"""The demo's proxy passes each chunk of a response on as it comes (the hub's spawn progress is
an event stream), tells a websocket client the subprotocol the upstream chose and keeps binary
frames binary (JupyterLab's kernel protocol), and otherwise answers as configurable-http-proxy
does; held questions do not shut other requests out. Each of the first three fails with the
package's own proxy; the last with tornado's shared client."""

from __future__ import annotations

import asyncio
import socket

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler
from tornado.websocket import WebSocketHandler, websocket_connect
from waiting import async_wait_for

from jupyter_gpupool.demo.proxy import DemoProxy


class EventStream(RequestHandler):
    """One event, then nothing until the test lets the stream go on."""

    go_on: asyncio.Event

    async def get(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.write("data: first\n\n")
        await self.flush()
        await self.go_on.wait()
        self.write("data: second\n\n")


class Held(RequestHandler):
    """A held question: answered only when the test lets it go."""

    arrived: list[str]
    let_go: asyncio.Event

    async def get(self, n: str) -> None:
        self.arrived.append(n)
        await self.let_go.wait()
        self.write(f"held {n}")


class Plain(RequestHandler):
    def get(self) -> None:
        self.set_header("X-Upstream", "yes")
        self.add_header("Set-Cookie", "a=1")
        self.add_header("Set-Cookie", "b=2")
        self.write({"hello": "world"})


class Redirect(RequestHandler):
    def get(self) -> None:
        self.redirect("/elsewhere")


class Missing(RequestHandler):
    def get(self) -> None:
        self.set_status(404)
        self.write("no such thing")


class Echo(WebSocketHandler):
    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        return "v1.echo" if "v1.echo" in subprotocols else None

    def on_message(self, message: str | bytes) -> None:
        self.write_message(message, binary=isinstance(message, bytes))


def serve(app: Application) -> tuple[HTTPServer, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    server = HTTPServer(app)
    server.add_sockets([sock])
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
async def proxied():
    """``(proxy URL, the event stream's go-on event)``: the proxy routes / to an upstream."""
    go_on = asyncio.Event()
    upstream, upstream_url = serve(
        Application(
            [
                (r"/stream", EventStream),
                (r"/plain", Plain),
                (r"/redirect", Redirect),
                (r"/missing", Missing),
                (r"/echo", Echo),
                (r"/held/(\d+)", Held),
            ]
        )
    )
    EventStream.go_on = go_on
    Held.arrived, Held.let_go = [], go_on
    proxy = DemoProxy({"default_target": upstream_url})
    front, url = serve(proxy.proxy_app)
    yield url, go_on
    go_on.set()
    front.stop()
    upstream.stop()


async def test_an_event_stream_comes_through_as_it_is_written(proxied):
    url, go_on = proxied
    chunks: list[bytes] = []
    first = asyncio.Event()

    def on_chunk(chunk: bytes) -> None:
        chunks.append(chunk)
        first.set()

    fetch = asyncio.ensure_future(
        AsyncHTTPClient().fetch(HTTPRequest(url + "/stream", streaming_callback=on_chunk))
    )
    # the first event arrives while the upstream is still waiting to write the second
    await asyncio.wait_for(first.wait(), timeout=10)
    assert b"".join(chunks) == b"data: first\n\n"
    assert not fetch.done()
    go_on.set()
    response = await asyncio.wait_for(fetch, timeout=10)
    assert response.code == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    assert b"".join(chunks) == b"data: first\n\ndata: second\n\n"


async def test_ordinary_answers_pass_unchanged(proxied):
    url, _ = proxied
    client = AsyncHTTPClient()
    plain = await client.fetch(url + "/plain")
    assert plain.code == 200
    assert plain.body == b'{"hello": "world"}'
    assert plain.headers["X-Upstream"] == "yes"
    assert plain.headers["Content-Type"] == "application/json; charset=UTF-8"
    assert plain.headers.get_list("Set-Cookie") == ["a=1", "b=2"]
    redirect = await client.fetch(url + "/redirect", follow_redirects=False, raise_error=False)
    assert (redirect.code, redirect.headers["Location"]) == (302, "/elsewhere")
    missing = await client.fetch(url + "/missing", raise_error=False)
    assert (missing.code, missing.body) == (404, b"no such thing")


async def test_a_websocket_gets_the_subprotocol_the_upstream_chose(proxied):
    url, _ = proxied
    ws_url = url.replace("http://", "ws://") + "/echo"
    conn = await websocket_connect(ws_url, subprotocols=["v1.echo", "v0.echo"])
    try:
        # browsers drop a connection whose handshake answers without one of the offered
        assert conn.selected_subprotocol == "v1.echo"
        await conn.write_message("hello")
        assert await asyncio.wait_for(conn.read_message(), timeout=10) == "hello"
    finally:
        conn.close()


async def test_binary_websocket_frames_stay_binary(proxied):
    url, _ = proxied
    conn = await websocket_connect(url.replace("http://", "ws://") + "/echo")
    try:
        # not valid UTF-8: sent on as a text frame, the upstream would close the connection
        await conn.write_message(b"\x06\x00\xff", binary=True)
        assert await asyncio.wait_for(conn.read_message(), timeout=10) == b"\x06\x00\xff"
    finally:
        conn.close()


async def test_held_questions_do_not_shut_others_out(proxied):
    """Twelve questions the upstream holds (more than tornado's shared client runs at once)
    all reach the upstream, and an ordinary request is answered while they are held."""
    url, let_go = proxied
    client = AsyncHTTPClient(force_instance=True, max_clients=50)  # the test's own, not the proxy's
    try:
        held = [asyncio.ensure_future(client.fetch(f"{url}/held/{n}")) for n in range(12)]
        await async_wait_for(lambda: len(Held.arrived) == 12, what="all twelve held upstream")
        plain = await asyncio.wait_for(client.fetch(url + "/plain"), timeout=10)
        assert plain.code == 200
        assert not any(f.done() for f in held)  # still held while the other was answered
        let_go.set()
        answers = await asyncio.wait_for(asyncio.gather(*held), timeout=10)
        assert sorted(a.body for a in answers) == sorted(f"held {n}".encode() for n in range(12))
    finally:
        client.close()


async def test_no_upstream_is_a_503():
    proxy = DemoProxy({"default_target": "http://127.0.0.1:9"})  # nothing listens there
    front, url = serve(proxy.proxy_app)
    try:
        response = await AsyncHTTPClient().fetch(url + "/", raise_error=False)
        assert response.code == 503
    finally:
        front.stop()
