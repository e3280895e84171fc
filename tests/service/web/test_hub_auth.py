"""Authentication and scopes against a real JupyterHub.

The permission table is checked against the application's own route list
(:func:`jupyter_gpupool.service.web.routes.route_table`): a route or method without a row fails.

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
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from tornado import web
from waiting import wait_for

from jupyter_gpupool.demo.run import DemoOptions, free_port, service_command
from jupyter_gpupool.demo.testing import SimProcess
from jupyter_gpupool.service.web.routes import route_table

REPO = Path(__file__).resolve().parents[3]
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
            # the service itself, not through the proxy (the prefix is the same)
            "direct": f"http://127.0.0.1:{service_port}{PREFIX}",
            "admin": admin_token,
            "user_token": user_token,
            "state": state,
            "callers": {
                "none": None,
                "noaccess": user_token("erin", scopes=["custom:gpupool:use"]),
                "noscope": user_token("dave", scopes=["access:services!service=gpupool"]),
                "user": user_token("alice"),  # the `user` role
                "admin": admin_token,  # role gpupool-admins
                # the demo's scrape token (role gpupool-metrics), made by its config
                "metrics": (state / "metrics-token").read_text().strip(),
            },
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
PAGE_BOOKING = (
    "kind: booking\nversion: v0.1\nbooking: {name: auth-page-booking}\npool: dev-pool\ngpus: 1\n"
    "users: [alice]\nwindow: {once: {start: '2030-02-04T10:00', end: '2030-02-04T12:00'}, "
    "timezone: UTC}\n"
)
PAGE_POOL = "kind: pool\nversion: v0.1\npool:\n  name: auth-page-pool\nnodes: {}\n"
QUOTAS = (REPO / "examples" / "pools" / "quotas.yaml").read_text()
ADMISSION = {"user": "alice", "pools": ["dev-pool"], "gpus": 1}
BOOKING = {
    "kind": "booking",
    "version": "v0.1",
    "booking": {"name": "auth-test-booking"},
    "pool": "dev-pool",
    "gpus": 1,
    "users": ["alice"],
    "window": {"once": {"start": "2030-01-07T10:00", "end": "2030-01-07T12:00"}, "timezone": "UTC"},
}

#: Who gets what, by the kind of route: the status for each caller, ``OK`` for the row's own.
#: Callers: no token; a user token without access to the service (``custom:gpupool:use`` alone);
#: one with access but no gpupool scope; a user (the `user` role); an admin; a scrape token.
OK = "ok"
CALLERS = ("none", "noaccess", "noscope", "user", "admin", "metrics")
KINDS = {
    "use": dict(none=401, noaccess=403, noscope=403, user=OK, admin=OK, metrics=403),
    "admin": dict(none=401, noaccess=403, noscope=403, user=403, admin=OK, metrics=403),
    "metrics": dict(none=401, noaccess=403, noscope=403, user=403, admin=OK, metrics=OK),
    # pages send a browser without a login to the hub; the metrics token may not read pages
    "page": dict(none=302, noaccess=403, noscope=403, user=OK, admin=OK, metrics=403),
    "admin-page": dict(none=302, noaccess=403, noscope=403, user=403, admin=OK, metrics=403),
    # a page's form: without a login there is no XSRF token either (JupyterHub's check)
    "action": dict(none=403, noaccess=403, noscope=403, user=403, admin=OK, metrics=403),
    # static files, the OAuth callback and the redirect to the index are for everyone
    "open": dict.fromkeys(CALLERS, OK),
}


@dataclass(frozen=True)
class Row:
    path: str  # under the prefix; ``{id}`` is the caller's admission
    kind: str
    ok: tuple[int, ...] = (200,)
    body: object = None  # JSON (dict), YAML (bytes) or a page's form (form=True)
    form: bool = False


#: Every route the service serves and every method on it, keyed by the route's pattern (under
#: the prefix) and the method, in the order the test calls them (a pool is made before it is
#: deleted). The test fails when the application serves a route or method without a row here.
TABLE: dict[tuple[str, str], Row] = {
    ("api/v1/", "GET"): Row("api/v1/", "use"),
    ("api/v1/pools", "GET"): Row("api/v1/pools", "use"),
    ("api/v1/pools.csv", "GET"): Row("api/v1/pools.csv", "use"),
    ("api/v1/pools/([^/]+)", "GET"): Row("api/v1/pools/dev-pool", "use"),
    ("api/v1/pools", "POST"): Row("api/v1/pools", "admin", (200, 201), POOL),
    ("api/v1/pools/([^/]+)", "DELETE"): Row("api/v1/pools/auth-test-pool", "admin"),
    ("api/v1/nodes", "GET"): Row("api/v1/nodes", "admin"),
    ("api/v1/nodes.csv", "GET"): Row("api/v1/nodes.csv", "admin"),
    ("api/v1/nodes/([^/]+)/labels", "GET"): Row("api/v1/nodes/node-6/labels", "admin"),
    ("api/v1/nodes/([^/]+)/labels", "PATCH"): Row(
        "api/v1/nodes/node-6/labels", "admin", body={"labels": {"example.org/t": "1"}}
    ),
    ("api/v1/servers", "GET"): Row("api/v1/servers?pool=dev-pool", "use"),
    # no such server running: 404 (503 without a ledger), only past the door
    ("api/v1/servers/saved", "POST"): Row(
        "api/v1/servers/saved", "use", (404, 503), {"server": "none-such", "count": 0}
    ),
    ("api/v1/idle", "GET"): Row("api/v1/idle", "admin"),
    ("api/v1/health", "GET"): Row("api/v1/health", "admin"),
    ("api/v1/quotas", "GET"): Row("api/v1/quotas", "use"),
    ("api/v1/quotas", "PUT"): Row("api/v1/quotas", "admin", body=QUOTAS.encode()),
    ("api/v1/usage", "GET"): Row("api/v1/usage", "use"),
    ("api/v1/usage/history", "GET"): Row("api/v1/usage/history", "admin"),
    ("api/v1/reports/gpu-hours", "GET"): Row("api/v1/reports/gpu-hours?since=7d&by=group", "use"),
    ("api/v1/reports/gpu-hours.csv", "GET"): Row("api/v1/reports/gpu-hours.csv", "use"),
    ("api/v1/launch-options", "GET"): Row("api/v1/launch-options?user=alice", "use"),
    ("api/v1/admissions", "GET"): Row("api/v1/admissions", "use"),
    ("api/v1/admissions", "POST"): Row("api/v1/admissions", "use", (201,), ADMISSION),
    ("api/v1/admissions/wait", "POST"): Row(
        "api/v1/admissions/wait", "use", body={"ids": {"none-such": None}, "wait": 0}
    ),
    ("api/v1/admissions/([^/]+)", "GET"): Row("api/v1/admissions/{id}", "use"),
    ("api/v1/admissions/([^/]+)", "DELETE"): Row("api/v1/admissions/{id}", "use"),
    ("api/v1/queue", "GET"): Row("api/v1/queue", "use"),
    ("api/v1/bookings", "GET"): Row("api/v1/bookings", "use"),
    ("api/v1/bookings", "POST"): Row("api/v1/bookings", "admin", (201,), BOOKING),
    # alice is in it: her GET reads it too
    ("api/v1/bookings/([^/]+)", "GET"): Row("api/v1/bookings/auth-test-booking", "use", (200, 404)),
    ("api/v1/bookings/([^/]+)", "PUT"): Row(
        "api/v1/bookings/auth-test-booking", "admin", body=BOOKING
    ),
    ("api/v1/bookings/([^/]+)", "DELETE"): Row("api/v1/bookings/auth-test-booking", "admin"),
    ("metrics", "GET"): Row("metrics", "metrics"),
    # anything else under api/: a 404, but only after the door
    **{
        ("api/(.*)", m): Row("api/v1/no-such-route", "use", (404,))
        for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
    },
    ("oauth_callback", "GET"): Row("oauth_callback", "open", (400,)),  # no OAuth code
    ("static/(.*)", "GET"): Row("static/gpupool.css", "open"),
    ("static/(.*)", "HEAD"): Row("static/gpupool.css", "open"),
    ("", "GET"): Row("", "page"),
    ("health", "GET"): Row("health", "admin-page"),
    ("pools", "GET"): Row("pools", "admin-page"),
    ("pools/usage.svg", "GET"): Row("pools/usage.svg", "admin-page"),
    ("pools/([^/]+)", "GET"): Row("pools/dev-pool", "admin-page"),
    # the pool page's cancel button (a request waiting in line); none waits: 404 for an admin
    ("pools/([^/]+)", "POST"): Row("pools/dev-pool", "action", (404,), {"cancel": "nobody"}, True),
    ("nodes", "GET"): Row("nodes", "admin-page"),
    ("quotas", "GET"): Row("quotas", "admin-page"),
    ("reports", "GET"): Row("reports?by=group&since=30d", "admin-page"),
    ("idle", "GET"): Row("idle", "admin-page"),
    ("bookings", "GET"): Row("bookings?week=2030-W06", "admin-page"),
    ("admin", "GET"): Row("admin", "admin-page"),
    # the admin page's forms post to these (they show the admin page on GET too)
    ("admin/pools", "GET"): Row("admin/pools", "admin-page"),
    ("admin/pools", "POST"): Row("admin/pools", "action", (302,), {"yaml": PAGE_POOL}, True),
    ("admin/pools/([^/]+)/delete", "GET"): Row("admin/pools/auth-page-pool/delete", "admin-page"),
    ("admin/pools/([^/]+)/delete", "POST"): Row(
        "admin/pools/auth-page-pool/delete", "action", (302,), {}, True
    ),
    ("admin/nodes", "GET"): Row("admin/nodes", "admin-page"),
    ("admin/nodes", "POST"): Row(
        "admin/nodes", "action", (302,), {"node": "node-6", "pool": "default"}, True
    ),
    ("admin/quotas", "GET"): Row("admin/quotas", "admin-page"),
    ("admin/quotas", "POST"): Row("admin/quotas", "action", (302,), {"yaml": QUOTAS}, True),
    # no such server: 404 from the handler, which only an admin reaches
    ("admin/servers/stop", "POST"): Row(
        "admin/servers/stop", "action", (404,), {"user": "nobody", "server": "x"}, True
    ),
    ("admin/bookings", "GET"): Row("admin/bookings", "admin-page"),
    ("admin/bookings", "POST"): Row(
        "admin/bookings", "action", (302,), {"yaml": PAGE_BOOKING}, True
    ),
    ("admin/bookings/([^/]+)/delete", "POST"): Row(
        "admin/bookings/auth-page-booking/delete", "action", (302,), {}, True
    ),
    # the prefix without its slash: a redirect to the index page
    ("/services/gpupool", "GET"): Row("/services/gpupool", "open", (301,)),
}


def served_routes() -> set[tuple[str, str]]:
    """(pattern under the prefix, method) for every method each of the app's handlers defines."""
    served = set()
    for pattern, handler, _ in route_table(PREFIX):
        key = pattern.removeprefix(PREFIX)
        for method in handler.SUPPORTED_METHODS:
            own = getattr(handler, method.lower(), None)
            if own is not None and own is not getattr(web.RequestHandler, method.lower()):
                served.add((key, method))
    return served


def test_the_table_has_a_row_for_every_route_and_method_the_service_serves():
    served, table = served_routes(), set(TABLE)
    assert not served - table, f"routes without a row in TABLE: {sorted(served - table)}"
    assert not table - served, f"rows for routes the service does not serve: {table - served}"


def request_for(hub, row: Row, token: str | None, admission_id: str):
    path = row.path.replace("{id}", admission_id)
    url = hub["url"] + path if path.startswith("/") else hub["direct"] + path
    if row.form:
        body = urllib.parse.urlencode(row.body or {}).encode()
        return url, body, {"Content-Type": "application/x-www-form-urlencoded"}
    return url, row.body, {}


def test_every_route_and_method_for_every_kind_of_caller(hub):
    tokens = hub["callers"]
    wrong = []
    for who in CALLERS:
        admission_id = "0000000000000000"
        for (pattern, method), row in TABLE.items():
            url, body, headers = request_for(hub, row, tokens[who], admission_id)
            status, answer = call(url, method, tokens[who], body, headers)
            expected = KINDS[row.kind][who]
            good = status in row.ok if expected == OK else status == expected
            if good and pattern == "api/v1/admissions" and method == "POST" and status == 201:
                admission_id = answer["id"]
            if not good:
                shown = answer if isinstance(answer, dict) else str(answer)[:300]
                wrong.append(f"{who} {method} {row.path}: {status}, expected {expected}: {shown}")
    assert not wrong, "\n".join(wrong)


def test_refusals_say_why(hub):
    tokens = hub["callers"]
    status, answer = call(hub["direct"] + "api/v1/pools", "POST", tokens["user"], POOL)
    assert (status, answer) == (
        403,
        {"status": 403, "message": "user alice lacks the scope custom:gpupool:admin"},
    )
    status, answer = call(hub["direct"] + "api/v1/pools", token=tokens["noaccess"])
    assert status == 403
    assert answer["message"] == (
        "user erin may not use the gpupool service: it needs the scope "
        "access:services!service=gpupool"
    )
    status, answer = call(hub["direct"] + "api/v1/pools")
    assert status == 401 and "JupyterHub API token" in answer["message"]
    # the scrape token reads the metrics and nothing else
    status, text = call(hub["direct"] + "metrics", token=tokens["metrics"])
    assert status == 200 and "gpupool_" in text
    status, answer = call(hub["direct"] + "api/v1/pools/dev-pool", "DELETE", tokens["metrics"])
    assert status == 403 and "custom:gpupool:admin" in answer["message"]
    status, answer = call(hub["direct"] + "api/v1/pools/dev-pool", token=hub["admin"])
    assert status == 200 and answer["name"] == "dev-pool"


def logged_in(hub, user: str) -> requests.Session:
    """A browser's session: logged in to the hub, and through OAuth to the service's pages."""
    s = requests.Session()
    r = s.get(hub["url"] + "/hub/login")
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', r.text)
    form = {"username": user, "password": "x"}
    if xsrf:
        form["_xsrf"] = xsrf.group(1)
    r = s.post(hub["url"] + "/hub/login?next=" + PREFIX, data=form)
    assert r.status_code == 200 and f"Signed in as <b>{user}</b>" in r.text, r.text[:500]
    return s


def test_the_admin_page_forms_need_the_xsrf_token(hub):
    """Every page form an admin's browser posts, with its cookie: refused without ``_xsrf``
    (nothing changes), done with it."""
    s = logged_in(hub, "admin")
    page = s.get(hub["api"] + "admin")
    assert page.status_code == 200
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
    actions = [(p, row) for (p, m), row in TABLE.items() if m == "POST" and row.kind == "action"]
    assert len(actions) == 8
    booking = hub["direct"] + "api/v1/bookings/auth-page-booking"
    for _, row in actions:
        url = hub["api"] + row.path
        refused = s.post(url, data=row.body, allow_redirects=False)
        assert refused.status_code == 403, (row.path, refused.status_code, refused.text[:300])
        if row.path == "admin/pools":  # nothing was made
            assert call(hub["direct"] + "api/v1/pools/auth-page-pool", token=hub["admin"])[0] == 404
        if row.path == "admin/bookings":
            assert call(booking, token=hub["admin"])[0] == 404
        done = s.post(url, data={**row.body, "_xsrf": xsrf}, allow_redirects=False)
        assert done.status_code in row.ok, (row.path, done.status_code, done.text[:300])
        if row.path == "admin/pools":
            assert call(hub["direct"] + "api/v1/pools/auth-page-pool", token=hub["admin"])[0] == 200
        if row.path == "admin/bookings":
            assert call(booking, token=hub["admin"])[0] == 200


def test_the_access_log_leaves_out_query_strings(hub):
    secret = "s3cr3t" + "0" * 26
    status, _ = call(hub["direct"] + f"api/v1/pools?token={secret}&x=1", token="wrong" * 8)
    assert status == 401  # an unknown token is no identity
    marker = "api/v1/no-such-route-for-the-log"
    call(hub["direct"] + marker + f"?token={secret}", token=hub["admin"])
    log = hub["state"] / "jupyterhub.log"
    wait_for(lambda: marker in log.read_text(), what="the service to log the request")
    text = log.read_text()
    assert f"404 GET {PREFIX}{marker} " in text  # the path is logged, without its query
    assert secret not in text


def test_the_index_page_uses_hub_oauth(hub):
    status, _ = call(hub["api"])
    assert status == 302  # to the hub's OAuth authorization
    status, page = call(hub["api"], token=hub["user_token"]("bob"))
    assert status == 200 and "Signed in as <b>bob</b>" in page and "training-pool" in page
    status, page = call(hub["api"], token=hub["callers"]["noaccess"])
    assert status == 403 and "needs the scope access:services!service=gpupool" in page


def test_a_browser_logs_in_through_oauth_and_the_cookie_works_for_the_api(hub):
    s = logged_in(hub, "carol")
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


#: GET and DELETE of ``api/v1/admissions/ID`` for a request waiting in line, alice's: who gets
#: what. ``other`` is bob, a user like alice (the `user` role); the rest are CALLERS.
IN_LINE = {
    "none": 401,
    "noaccess": 403,
    "noscope": 403,
    "other": 403,
    "metrics": 403,
    "user": 200,  # alice, the owner
    "admin": 200,
}


def test_an_entry_in_line_is_read_and_cancelled_by_its_owner_and_admins_only(hub):
    """The table above checks held admissions; this, a request waiting in line: nobody else
    reads alice's place or cancels it (after each refusal it still waits, as an admin reads it),
    and she and an admin can."""
    api, admin = hub["direct"], hub["admin"]
    tokens = {**hub["callers"], "other": hub["user_token"]("bob")}
    # an admission holds dev-pool's 4 GPUs for dave: alice's request waits in line
    status, held = call(
        api + "api/v1/admissions",
        "POST",
        admin,
        {"user": "dave", "groups": [], "pools": ["dev-pool"], "gpus": 4},
    )
    assert status == 201, held
    entries: list[str] = []

    def alice_waits() -> str:
        body = {"pools": ["dev-pool"], "gpus": 1, "queue": True}
        status, entry = call(api + "api/v1/admissions", "POST", tokens["user"], body)
        assert (status, entry.get("state"), entry.get("user")) == (202, "queued", "alice"), entry
        entries.append(entry["id"])
        return entry["id"]

    def state(entry: str) -> str:
        status, answer = call(api + f"api/v1/admissions/{entry}", token=admin)
        assert status == 200, answer
        return answer["state"]

    try:
        entry = alice_waits()
        wrong = []
        for who, expected in IN_LINE.items():
            status, answer = call(api + f"api/v1/admissions/{entry}", "GET", tokens[who])
            if status != expected or (status == 200 and answer["user"] != "alice"):
                wrong.append(f"{who} GET: {status}, expected {expected}: {answer}")
        for who, expected in IN_LINE.items():
            if expected == 200:
                continue
            status, answer = call(api + f"api/v1/admissions/{entry}", "DELETE", tokens[who])
            after = state(entry)
            if status != expected or after != "queued":
                wrong.append(f"{who} DELETE: {status}, expected {expected}, then {after}: {answer}")
        assert not wrong, "\n".join(wrong)
        for who in ("user", "admin"):  # each cancels a request of alice's waiting in line
            entry = entry if who == "user" else alice_waits()
            status, answer = call(api + f"api/v1/admissions/{entry}", "DELETE", tokens[who])
            assert (status, answer.get("state")) == (200, "cancelled"), (who, answer)
            assert state(entry) == "cancelled"
    finally:
        for entry in entries:
            call(api + f"api/v1/admissions/{entry}", "DELETE", admin)
        call(api + f"api/v1/admissions/{held['id']}", "DELETE", admin)
