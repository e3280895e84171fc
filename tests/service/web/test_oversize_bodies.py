"""A body over ``max_body_size`` is refused before it is read, by the API and by the admin page's
forms alike, and the refusal reaches a client behind the demo's proxy as the service's 400: the
service answers once the client has sent the body (thrown away as it comes), not while the proxy
is still writing it (which the proxy saw as "Broken pipe" and answered 503)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from urllib.parse import urlencode

import pytest
from tornado.httpclient import AsyncHTTPClient
from waiting import async_wait_for

from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE

LIMIT = 64 * 1024


@pytest.fixture
async def small(start_service):
    """A service that takes bodies of at most 64 KiB."""
    return await start_service(max_body_size=LIMIT)


async def test_an_admin_form_over_max_body_size_is_refused_before_it_is_read(small, monkeypatch):
    applied: list[str] = []

    async def apply_pools(text):
        applied.append(text)
        return {"created": [], "replaced": []}

    monkeypatch.setattr(small.ctx.pools, "apply_pools", apply_pools)
    token = small.hub.user("admin", [], [ADMIN_SCOPE])
    form = urlencode({"yaml": "kind: pool\n# " + "x" * (2 * LIMIT)})
    t0 = time.perf_counter()
    resp = await AsyncHTTPClient().fetch(
        small.url + "admin/pools",
        method="POST",
        body=form,
        headers={"Authorization": f"token {token}"},
        raise_error=False,
        request_timeout=20,
    )
    assert resp.code == 400
    assert f"The form is {len(form)} bytes; at most {LIMIT} are accepted" in resp.body.decode()
    assert applied == []  # never parsed, never applied
    assert time.perf_counter() - t0 < 5
    # a form within the limit still goes through (its login check reads the form)
    resp = await AsyncHTTPClient().fetch(
        small.url + "admin/pools",
        method="POST",
        body=urlencode({"yaml": "kind: pool\n"}),
        headers={"Authorization": f"token {token}"},
        follow_redirects=False,
        raise_error=False,
        request_timeout=20,
    )
    assert resp.code == 302 and applied == ["kind: pool"]


def start_proxy(origin: str) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m jupyter_gpupool.demo.proxy`` in front of ``origin``, as the hub starts it."""
    port, api_port = free_port(), free_port()
    command = [sys.executable, "-m", "jupyter_gpupool.demo.proxy", "--ip", "127.0.0.1"]
    command += ["--port", str(port), "--api-ip", "127.0.0.1", "--api-port", str(api_port)]
    command += ["--default-target", origin, "--log-level", "WARNING"]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL), f"http://127.0.0.1:{port}"


@pytest.fixture
async def proxy(small):
    """The demo's proxy in a process of its own, as the demo runs it, in front of the service:
    the URL to ask it at."""
    proc, url = start_proxy(small.url.split("/services/")[0])

    async def up() -> bool:
        try:
            resp = await AsyncHTTPClient().fetch(url + "/_chp_healthz", raise_error=False)
        except OSError:  # not listening yet
            return False
        return resp.code == 200

    try:
        await async_wait_for(up, what="the demo's proxy to answer", timeout=30)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("who", ["admin", "nobody"])
async def test_an_oversize_body_through_the_demos_proxy_gets_the_services_answer(small, proxy, who):
    token = small.hub.admin() if who == "admin" else "not-a-token"
    body = b"x" * (8 * 1024 * 1024)  # still being sent on by the proxy when the service decides
    expected = (
        (400, f"the request body is {len(body)} bytes; at most {LIMIT} are accepted")
        if who == "admin"
        else (401, "authentication required")
    )
    for _ in range(8):
        resp = await AsyncHTTPClient().fetch(
            proxy + "/services/gpupool/api/v1/admissions",
            method="POST",
            body=body,
            headers={"Authorization": f"token {token}"},
            raise_error=False,
            request_timeout=60,
        )
        assert resp.code == expected[0], resp.body[:200]
        assert json.loads(resp.body)["message"].startswith(expected[1])
