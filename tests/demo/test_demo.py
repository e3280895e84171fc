"""`gpupool demo` as a newcomer runs it: a real JupyterHub on the simulated cluster."""

import json
import signal

import pytest
from proctree import alive, cmdline, descendants
from waiting import wait_for

from jupyter_gpupool.demo.testing import DemoProcess


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
    assert (pools["training-pool"]["gpu_total"], pools["training-pool"]["node_count"]) == (16, 2)
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
