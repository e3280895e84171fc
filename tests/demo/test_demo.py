"""`gpupool demo` as a newcomer runs it: a real JupyterHub on the simulated cluster."""

import json
import re
import signal
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from proctree import alive, cmdline, descendants
from waiting import wait_for

from jupyter_gpupool.demo.testing import DemoProcess

NOT_FOUND = re.compile(r"\b404 (GET|HEAD|POST|PUT|PATCH|DELETE) |/error/404\b")
README = Path(__file__).resolve().parents[2] / "README.md"


def server_ready(api, user):
    """``user``'s default server model once the hub says it is ready, else None."""
    code, model = api("GET", f"/hub/api/users/{user}")
    assert code == 200, (code, model)
    server = model["servers"].get("", {})
    return server if server.get("ready") else None


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("demo-state")) as demo:
        yield demo


# These first: they look at the demo as it is right after its start.


def test_a_start_leaves_no_404_in_the_hub_log(demo):
    log = (demo.state / "jupyterhub.log").read_text()
    assert "JupyterHub is now running" in log  # the whole start is in it
    # the demo's own readiness checks used to go through the proxy before the hub had added its
    # routes: a `404 GET /hub/api/` from the proxy and the hub's error page for each
    # (a request line, or the error page: a bare "404" could be the milliseconds of a timestamp)
    not_found = [line for line in log.splitlines() if NOT_FOUND.search(line)]
    assert not_found == []


def readme_demo_users(groups):
    """The names the README's Quickstart gives as the demo's users (``groups`` left out)."""
    para = README.read_text().split("Users in the demo:", 1)[1].split("\n\n", 1)[0]
    return [name for name in re.findall(r"`([^`]+)`", para) if name not in groups]


def test_the_readme_users_are_in_the_hub_before_they_log_in(demo):
    code, groups = demo.api("GET", "/hub/api/groups")
    assert code == 200, groups
    members = {g["name"]: set(g["users"]) for g in groups}
    users = readme_demo_users(members)
    assert {"alice", "dave", "admin"} <= set(users), users  # the README was read
    for name in users:
        code, model = demo.api("GET", f"/hub/api/users/{name}")
        assert code == 200, (name, code, model)
        assert model["last_activity"] is None, model  # nobody has logged in
    _, admin = demo.api("GET", "/hub/api/users/admin")
    assert admin["admin"] is True
    assert members["ml-research"] == {"alice", "bob"} and members["ml-ops"] == {"carol"}
    # anyone else may still log in, and exists from then on
    assert demo.api("GET", "/hub/api/users/erin")[0] == 404
    assert "/hub/login" not in log_in(demo, "erin"), "erin was sent back to the login page"
    assert demo.api("GET", "/hub/api/users/erin")[0] == 200


def log_in(demo, user):
    """Log in on the hub's login form as a browser does; the URL it ends on."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(f"{demo.url}/hub/login", timeout=30) as resp:
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', resp.read().decode())
    assert xsrf is not None
    form = {"username": user, "password": "any", "_xsrf": xsrf.group(1)}
    try:
        with opener.open(f"{demo.url}/hub/login", urllib.parse.urlencode(form).encode(), 30) as r:
            return r.url
    except urllib.error.HTTPError as e:  # refused: 403 on the login page
        return f"{e.code} {e.url}"


def test_state_dir_holds_everything(demo):
    state = demo.state
    for name in ("jupyterhub.sqlite", "jupyterhub_cookie_secret", "kubeconfig", "admin-token"):
        assert (state / name).exists(), name
    assert oct((state / "admin-token").stat().st_mode & 0o777) == "0o600"


def test_the_gpupool_service_runs_with_the_demo_pools(demo):
    code, answer = demo.api("GET", "/services/gpupool/api/v1/pools")
    assert code == 200
    pools = {p["name"]: p for p in answer["pools"]}
    assert set(pools) == {"training-pool", "inference-pool", "dev-pool", "compute-pool", "default"}
    # 16 whole A100s on 2 nodes, and the MIG node's A100 (GPU-equivalents: its 4 instances are 1)
    assert (pools["training-pool"]["gpu_total"], pools["training-pool"]["node_count"]) == (17, 3)
    assert pools["training-pool"]["whole_gpus"]["total"] == 16
    assert pools["default"]["gpu_total"] == 4  # node-6, in no pool
    code, quotas = demo.api("GET", "/services/gpupool/api/v1/quotas")
    assert code == 200 and "ml-research" in json.dumps(quotas)


def test_a_user_gets_a_working_notebook_server_on_the_cluster(demo):
    api = demo.api
    api("POST", "/hub/api/users/alice")
    code, _ = api("POST", "/hub/api/users/alice/server")
    assert code in (201, 202)
    wait_for(lambda: server_ready(api, "alice"), timeout=60, interval=0.5, what="alice's server")
    # the single-user server itself answers through the proxy
    code, status = api("GET", "/user/alice/api/status")
    assert code == 200 and "started" in status
    code, _ = api("DELETE", "/hub/api/users/alice/server")
    assert code in (202, 204)


def lab_page_config(demo, user):
    code, page = demo.api("GET", f"/user/{user}/lab")
    assert code == 200, page
    data = re.search(
        rb'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S
    )
    assert data is not None, page[:500]
    return json.loads(data.group(1))


def test_jupyterlab_in_the_demo_asks_nothing_about_news(demo):
    demo.start_server("carol")
    try:
        config = lab_page_config(demo, "carol")
        # the plugin that asks "Would you like to get notified about official Jupyter news?"
        assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
        # and the server fetches no news feed (LabApp.news_url is None)
        assert config["news"] == {"disabled": True}
        code, news = demo.api("GET", "/user/carol/lab/api/news")
        assert (code, news) == (200, {"news": []})
    finally:
        demo.api("DELETE", "/hub/api/users/carol/server")
        wait_for(lambda: not demo.server_running("carol"), timeout=60, what="carol's server gone")


def test_sigterm_stops_everything_and_leaves_no_process(demo):
    proc = demo.proc
    api = demo.api
    api("POST", "/hub/api/users/bob")
    code, _ = api("POST", "/hub/api/users/bob/server")
    assert code in (201, 202)
    wait_for(lambda: server_ready(api, "bob"), timeout=60, interval=0.5, what="bob's server")
    tree = descendants(proc.pid)
    assert len(tree) >= 3  # at least the hub, the proxy and bob's server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    # the demo waits for each of its children to be gone before it exits: nothing to wait for
    left = [pid for pid in tree if alive(pid)]
    assert left == [], [cmdline(p) for p in left]
