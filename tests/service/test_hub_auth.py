"""Authentication and scopes against a real JupyterHub.

``oauth_callback`` is the one route not in the table: it is exercised by the browser login test.

One JupyterHub (the demo's configuration, which wires the service, its scopes and roles) runs in
a subprocess for the module, with the simulated cluster in another. Fixed tokens: the demo's
admin service token (``custom:gpupool:admin``), and user tokens made through the hub's API.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import requests

from jupyter_gpupool.demo.run import DemoOptions, free_port, service_command
from jupyter_gpupool.demo.testing import SimProcess

REPO = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO / "jupyter_gpupool" / "demo" / "jupyterhub_config.py"
PREFIX = "/services/gpupool/"


def call(url, method="GET", token=None, body=None, headers=None):
    """``(status, parsed body)`` without following redirects."""
    data = None
    hdrs = dict(headers or {})
    if token:
        hdrs["Authorization"] = f"token {token}"
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, method=method, data=data, headers=hdrs)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kw):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=30) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    state = tmp_path_factory.mktemp("hub-state")
    admin_token = "a" * 32 + "gpupool-test-admin"
    (state / "admin-token").write_text(admin_token + "\n")
    kubeconfig = state / "kubeconfig"
    cleanup = contextlib.ExitStack()
    cleanup.enter_context(SimProcess.start(REPO / "examples" / "cluster.yaml", kubeconfig))
    hub_proc = None
    try:
        port, service_port = free_port(), free_port()
        opts = DemoOptions(port=port, state_dir=state)
        cmd = service_command(opts, service_port, str(kubeconfig))
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "GPUPOOL_DEMO_STATE_DIR": str(state),
            "GPUPOOL_DEMO_PORT": str(port),
            "GPUPOOL_DEMO_HUB_PORT": str(free_port()),
            "GPUPOOL_DEMO_PROXY_API_PORT": str(free_port()),
            "GPUPOOL_DEMO_SERVICE_PORT": str(service_port),
            "GPUPOOL_DEMO_SERVICE_COMMAND": json.dumps(cmd),
            "GPUPOOL_DEMO_LOG_LEVEL": "INFO",
        }
        log = open(state / "jupyterhub.log", "wb")  # noqa: SIM115 - closed at teardown
        hub_proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(DEMO_CONFIG)],
            cwd=state,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        for path in ("/hub/api/", PREFIX + "api/v1/"):
            while True:
                if hub_proc.poll() is not None:
                    raise RuntimeError(
                        "JupyterHub exited: " + (state / "jupyterhub.log").read_text()
                    )
                try:
                    if call(url + path, token=admin_token)[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{path} not ready: " + (state / "jupyterhub.log").read_text()[-4000:]
                    )
                time.sleep(0.2)

        def user_token(name, scopes=None):
            call(url + f"/hub/api/users/{name}", "POST", admin_token)
            body = {"note": "gpupool test"} | ({"scopes": scopes} if scopes is not None else {})
            status, data = call(url + f"/hub/api/users/{name}/tokens", "POST", admin_token, body)
            assert status == 201, data
            return data["token"]

        yield {
            "url": url,
            "api": url + PREFIX,
            "admin": admin_token,
            "user_token": user_token,
            "state": state,
        }
    finally:
        if hub_proc is not None and hub_proc.poll() is None:
            hub_proc.send_signal(signal.SIGTERM)
            try:
                hub_proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(hub_proc.pid, signal.SIGKILL)
                hub_proc.wait()
        cleanup.close()


POOL = {"kind": "pool", "version": "v0.1", "pool": {"name": "auth-test-pool"}, "nodes": {}}


def routes(hub):
    """(method, path, body, scope) for every route; ``{id}`` is an admission of the caller's."""
    quotas = (REPO / "examples" / "pools" / "quotas.yaml").read_bytes()
    return [
        ("GET", "api/v1/", None, "use"),
        ("GET", "api/v1/pools", None, "use"),
        ("GET", "api/v1/pools.csv", None, "use"),
        ("GET", "api/v1/pools/dev-pool", None, "use"),
        ("POST", "api/v1/pools", POOL, "admin"),
        ("DELETE", "api/v1/pools/auth-test-pool", None, "admin"),
        ("GET", "api/v1/nodes", None, "admin"),
        ("GET", "api/v1/nodes.csv", None, "admin"),
        ("GET", "api/v1/nodes/node-6/labels", None, "admin"),
        ("PATCH", "api/v1/nodes/node-6/labels", {"labels": {"example.org/t": "1"}}, "admin"),
        ("GET", "api/v1/servers?pool=dev-pool", None, "use"),
        ("GET", "api/v1/quotas", None, "use"),
        ("PUT", "api/v1/quotas", quotas, "admin"),
        ("GET", "api/v1/usage", None, "use"),
        ("GET", "api/v1/admissions", None, "use"),
        ("POST", "api/v1/admissions", {"user": "alice", "pools": ["dev-pool"], "gpus": 1}, "use"),
        ("GET", "api/v1/admissions/{id}", None, "use"),
        ("DELETE", "api/v1/admissions/{id}", None, "use"),
        ("GET", "metrics", None, "admin"),
        ("GET", "", None, "page"),  # the index page: OAuth
        ("GET", "api/v1/no-such-route", None, "missing"),
    ]


def test_every_route_with_no_token_a_user_token_and_an_admin_token(hub):
    callers = {
        "none": None,
        # a user token without any gpupool scope
        "nobody": hub["user_token"]("dave", scopes=["read:users:name!user=dave"]),
        "user": hub["user_token"]("alice"),  # custom:gpupool:use through the `user` role
        "admin": hub["admin"],  # custom:gpupool:admin
    }
    table = []
    for who, token in callers.items():
        admission_id = "0000000000000000"
        for method, path, body, scope in routes(hub):
            path = path.replace("{id}", admission_id)
            status, answer = call(hub["api"] + path, method, token, body)
            if method == "POST" and path.endswith("admissions") and status == 201:
                admission_id = answer["id"]
            if who == "none":
                expected = 302 if scope == "page" else 401  # pages send browsers to log in
            elif who == "nobody" or (who == "user" and scope == "admin"):
                expected = 403
            elif scope == "missing":
                expected = 404
            else:
                expected = {"POST": (200, 201)}.get(method, (200,))
            ok = status == expected or (isinstance(expected, tuple) and status in expected)
            table.append((who, method, path, status, ok, answer if not ok else ""))
    bad = [row for row in table if not row[4]]
    assert not bad, "\n".join(map(str, bad))
    assert len(table) == 4 * len(routes(hub))
    # errors are JSON with the reason
    status, answer = call(hub["api"] + "api/v1/pools", "POST", callers["user"], POOL)
    assert answer == {
        "status": 403,
        "message": "user alice lacks the scope custom:gpupool:admin",
    }
    status, answer = call(hub["api"] + "api/v1/pools")
    assert status == 401 and "JupyterHub API token" in answer["message"]


def test_the_index_page_uses_hub_oauth(hub):
    status, _ = call(hub["api"])
    assert status == 302  # to the hub's OAuth authorization
    status, page = call(hub["api"], token=hub["user_token"]("bob"))
    assert status == 200 and "Signed in as <b>bob</b>" in page and "training-pool" in page
    status, _ = call(
        hub["api"], token=hub["user_token"]("dave", scopes=["read:users:name!user=dave"])
    )
    assert status == 403


def test_a_browser_logs_in_through_oauth_and_the_cookie_works_for_the_api(hub):
    s = requests.Session()
    r = s.get(hub["url"] + "/hub/login")
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', r.text)
    form = {"username": "carol", "password": "x"}
    if xsrf:
        form["_xsrf"] = xsrf.group(1)
    r = s.post(hub["url"] + "/hub/login?next=" + PREFIX, data=form)
    assert r.status_code == 200, r.text[:500]
    assert r.url == hub["api"] and "Signed in as <b>carol</b>" in r.text
    # the service's OAuth cookie carries carol's scopes, so the API answers her too
    r = s.get(hub["api"] + "api/v1/pools")
    assert r.status_code == 200 and r.json()["pools"]
    r = s.get(hub["api"] + "api/v1/")
    assert r.json()["groups"] == ["ml-ops"] and r.json()["admin"] is False
    # but a cookie alone is no authority to change anything (XSRF)
    r = s.post(hub["api"] + "api/v1/admissions", json={"pools": ["dev-pool"], "gpus": 1})
    assert r.status_code == 401


def test_groups_come_from_the_hub_when_the_caller_gives_none(hub):
    status, answer = call(
        hub["api"] + "api/v1/admissions",
        "POST",
        hub["admin"],
        {"user": "carol", "pools": ["dev-pool"], "gpus": 1},
    )
    assert status == 201 and answer["groups"] == ["ml-ops"]
    status, _ = call(hub["api"] + f"api/v1/admissions/{answer['id']}", "DELETE", hub["admin"])
    assert status == 200
