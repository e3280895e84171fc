"""The demo's log never holds a token from a URL: requests with ``?token=SECRET`` refused by the
service, the hub and the proxy (each writes the URL in its own lines: tornado's access log in the
proxy, tornado's warning for a refused request in the hub) leave ``[secret]`` in its place."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from jupyter_gpupool.demo.testing import DemoProcess
from jupyter_gpupool.logredact import redact

SECRET = "SECRETzz9"

PATHS = [
    f"/services/gpupool/api/v1/pools?token={SECRET}1",  # the service's 401, through the proxy
    f"/services/gpupool/api/v1/servers?limit=x&token={SECRET}2",
    f"/hub/api/users?token={SECRET}3",  # the hub's 403 (tornado's warning)
    f"/nothing/here?token={SECRET}4",  # the hub's redirect
    f"/hub/login?next=%2Fhub%2F%3Ftoken%3D{SECRET}5",  # a token inside another parameter
    f"/services/gpupool/oauth_callback?code={SECRET}6",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("demo-state")) as demo:
        yield demo


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def test_no_token_from_a_url_reaches_the_demos_log(demo):
    for path in PATHS:
        get(demo.url + path)
    log = demo.state / "jupyterhub.log"
    lines = log.read_text().splitlines()
    leaks = [line for line in lines if SECRET in line]
    assert not leaks, "\n".join(leaks)
    # the requests are in the log all the same (the proxy's access lines)
    assert any("?token=[secret]" in line and "tornado.access" in line for line in lines)
    for other in demo.state.glob("*.log"):
        assert SECRET not in other.read_text(), other


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("GET /p?token=abc (1.2.3.4)", "GET /p?token=[secret] (1.2.3.4)"),
        ("GET /p?a=1&api_token=abc&b=2", "GET /p?a=1&api_token=[secret]&b=2"),
        (
            "/hub/login?next=%2Fhub%2F%3Ftoken%3Dabc%26x%3D1",
            "/hub/login?next=%2Fhub%2F%3Ftoken%3D[secret]%26x%3D1",
        ),
        (
            "uri='/oauth_callback?code=abc&state=def'",
            "uri='/oauth_callback?code=[secret]&state=[secret]'",
        ),
        ("GET /pools?limit=5 (1.2.3.4)", "GET /pools?limit=5 (1.2.3.4)"),
    ],
)
def test_secret_parameters_are_redacted(line, expected):
    assert redact(line) == expected
