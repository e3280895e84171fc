"""The shared HTTP helper (jupyter_gpupool.http) and the three clients over it keep connections
alive: counted by the server, which accepts each TCP connection (tornado's HTTPServer, its own
``handle_stream``), not by the client saying so."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import tornado.httpserver
import tornado.netutil
import tornado.web

from jupyter_gpupool.client import GPUPoolClient, GPUPoolError
from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.http import HTTPSession, NoAnswer
from jupyter_gpupool.hubclient import HubClient, HubError
from jupyter_gpupool.service.cluster.hubapi import HubAPI
from jupyter_gpupool.service.errors import ApiError


class CountingServer(tornado.httpserver.HTTPServer):
    """Counts the TCP connections it accepts."""

    accepted = 0

    def handle_stream(self, stream, address):  # type: ignore[no-untyped-def]
        self.accepted += 1
        return super().handle_stream(stream, address)


class Echo(tornado.web.RequestHandler):
    """Answers every request with what it got: method, path, token, body."""

    def _answer(self, *args: str) -> None:
        status = int(self.get_query_argument("status", "200"))
        self.set_status(status)
        body = {
            "method": self.request.method,
            "path": self.request.path,
            "authorization": self.request.headers.get("Authorization"),
            "body": self.request.body.decode(),
            "groups": ["team-a"],
        }
        if status >= 400:
            body["message"] = f"no, {status}"
        self.finish(json.dumps(body))

    get = post = delete = patch = put = _answer


class Slow(Echo):
    """Answers after ``?sleep=`` seconds."""

    async def get(self, *args: str) -> None:  # type: ignore[override]
        await asyncio.sleep(float(self.get_query_argument("sleep")))
        self._answer()


class Events(tornado.web.RequestHandler):
    async def get(self, *args: str) -> None:
        for i in (50, 100):
            self.write(f"data: {json.dumps({'progress': i, 'message': 'é' * 3})}\n\n")
            await self.flush()


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[CountingServer, str]]:
    app = tornado.web.Application([(r"/slow", Slow), (r"/.*/progress", Events), (r"/.*", Echo)])
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    srv = CountingServer(app)
    srv.add_sockets(sockets)
    yield srv, f"http://127.0.0.1:{sockets[0].getsockname()[1]}/"
    srv.stop()
    await srv.close_all_connections()


def no_answer(why: str) -> Exception:
    return RuntimeError(why)


async def test_one_connection_for_many_requests(server):
    srv, url = server
    async with HTTPSession(url, "t0k", timeout=5, no_answer=no_answer) as http:
        for i in range(20):
            answer = await http.request("POST", f"things/{i}", json_body={"i": i})
            assert answer.code == 200
            assert answer.json()["body"] == json.dumps({"i": i})
            assert answer.json()["authorization"] == "token t0k"
    assert srv.accepted == 1


async def test_concurrent_requests_share_at_most_max_connections(server):
    srv, url = server
    async with HTTPSession(url, "t", timeout=5, no_answer=no_answer, max_connections=3) as http:
        answers = await asyncio.gather(
            *(http.request("GET", "slow", params={"sleep": "0.05"}) for _ in range(12))
        )
        assert {a.code for a in answers} == {200}
    assert srv.accepted == 3


async def test_each_client_keeps_its_connection(server):
    srv, url = server
    async with GPUPoolClient(url, "t") as service:
        for _ in range(5):
            await service.info()
            await service.release("abc")
    assert srv.accepted == 1
    async with HubClient(url, "t") as hub:
        for _ in range(5):
            await hub.user("alice")
            await hub.stop_server("alice", "gpu")
        events = [e async for e in hub.progress("alice", "gpu")]
        assert events == [{"progress": 50, "message": "ééé"}, {"progress": 100, "message": "ééé"}]
    assert srv.accepted == 2
    api = HubAPI(url, "t", groups_ttl=0)
    for name in ("a", "b", "c"):
        assert await api.user_groups(name) == ("team-a",)
        assert await api.stop_server(name, "") == 200
    await api.close()
    assert srv.accepted == 3


async def test_errors_and_paths_as_the_clients_had_them(server):
    _, url = server
    async with GPUPoolClient(url, "t") as service:
        with pytest.raises(GPUPoolError) as e:
            await service.request("GET", "x", params={"status": "418"})
        assert (e.value.status, e.value.message, e.value.body["method"]) == (418, "no, 418", "GET")
        # names are sent as they were quoted: a "/" stays %2F
        answer = await service.request("GET", "api/v1/pools/a%2Fb%40c")
        assert answer.json()["path"] == "/api/v1/pools/a%2Fb%40c"
    async with HubClient(url, "t") as hub:
        with pytest.raises(HubError) as e:
            await hub._fetch("GET", "x?status=503")
        assert (e.value.status, e.value.message) == (503, "no, 503")
    api = HubAPI(url, "t")
    assert await api.stop_server("a", "") == 200
    await api.close()


async def test_no_answer_says_why_in_tornados_words():
    url = f"http://127.0.0.1:{free_port()}/"
    async with HTTPSession(url, "t", timeout=5, no_answer=no_answer) as http:
        with pytest.raises(RuntimeError, match=r"^\[Errno 111\] Connection refused$"):
            await http.request("GET", "x")
    api = HubAPI(url, "t")
    with pytest.raises(ApiError) as e:
        await api.user_groups("a")
    assert e.value.status == 503 and "cannot reach JupyterHub" in e.value.message
    await api.close()
    hub = HubClient(url, "t")
    with pytest.raises(HubError) as e:
        async for _ in hub.progress("a", "b"):
            pass
    assert e.value.status == 0 and "the progress of a/b stopped" in e.value.message
    await hub.close()


async def test_a_timeout_is_no_answer(server):
    _, url = server
    async with HTTPSession(url, "t", timeout=0.2, no_answer=NoAnswer) as http:
        with pytest.raises(NoAnswer, match=r"timed out after 0\.2 seconds"):
            await http.request("GET", "slow", params={"sleep": "1"})
        assert (await http.request("GET", "slow", params={"sleep": "0"})).code == 200


async def test_closed_sessions_leave_no_warning(server):
    _, url = server
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        http = HTTPSession(url, "t", timeout=5, no_answer=no_answer)
        await http.request("GET", "x")
        assert http.is_open
        await http.close()
        assert not http.is_open
        await http.request("GET", "x")  # made again after close
        await http.close()
        del http
        gc.collect()
    assert not [w for w in caught if "Unclosed" in str(w.message)]
