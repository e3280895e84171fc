"""`gpupool demo` as a newcomer runs it: a real JupyterHub on the simulated cluster."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from jupyter_gpupool.demo.testing import DemoProcess


def descendants(pid):
    """Every process below ``pid`` (from /proc), so the test can check none is left behind."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


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
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code, user = api("GET", "/hub/api/users/alice")
        if user["servers"].get("", {}).get("ready"):
            break
        time.sleep(0.5)
    else:
        pytest.fail("server never became ready")
    # the single-user server itself answers through the proxy
    code, status = api("GET", "/user/alice/api/status")
    assert code == 200 and "started" in status
    code, _ = api("DELETE", "/hub/api/users/alice/server")
    assert code in (202, 204)


def test_sigterm_stops_everything_and_leaves_no_process(demo):
    proc = demo.proc
    api = demo.api
    api("POST", "/hub/api/users/bob")
    api("POST", "/hub/api/users/bob/server")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if api("GET", "/hub/api/users/bob")[1]["servers"].get("", {}).get("ready"):
            break
        time.sleep(0.5)
    tree = descendants(proc.pid)
    assert len(tree) >= 3  # at least the hub, the proxy and bob's server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    time.sleep(0.5)
    left = [pid for pid in tree if alive(pid)]
    assert left == [], [Path(f"/proc/{p}/cmdline").read_text() for p in left]
