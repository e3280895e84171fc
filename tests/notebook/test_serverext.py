"""The jupyter-server extension: a real ``jupyter server`` with it enabled, its hub and service
scripted (fakehub.py). Unauthenticated requests are refused."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from fakehub import LAUNCH_OPTIONS, FakeHub
from waiting import WaitTimeout, wait_for

from jupyter_gpupool.core.pools.placement import Placement
from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.notebook.serverext.handlers import (
    server_use_body,
    servers_body,
    status_body,
    use_body,
)
from jupyter_gpupool.notebook.session import ServerUse

TOKEN = "jupyter-server-token"


def start_server(tmp, env):
    port = free_port()
    log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed by the fixture
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}",
            "--ServerApp.open_browser=False",
            f"--ServerApp.root_dir={tmp}",
            "--ServerApp.jpserver_extensions={'jupyter_gpupool': True}",
            "--allow-root",
        ],
        env={**env, "HOME": str(tmp), "JUPYTER_CONFIG_DIR": str(tmp / "config")},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(
                f"jupyter server exited with {proc.returncode}:\n{(tmp / 'server.log').read_text()}"
            )
        urllib.request.urlopen(url + "/api/status?token=" + TOKEN, timeout=2)
        return True

    try:
        # URLError is an OSError: not listening yet
        wait_for(
            answers, what=f"jupyter server at {url}", timeout=60, interval=0.2, ignore=(OSError,)
        )
    except WaitTimeout as e:
        proc.kill()
        raise WaitTimeout(f"{e}\n{(tmp / 'server.log').read_text()}") from None
    return proc, url, log


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    hub = FakeHub().start()
    tmp = tmp_path_factory.mktemp("jupyter-server")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "GPUPOOL_"))}
    proc, url, log = start_server(tmp, {**base, **hub.environ(JUPYTERHUB_SERVER_NAME="")})
    yield url, hub
    proc.terminate()
    proc.wait(30)
    log.close()
    hub.stop()


def get(url, token=TOKEN):
    headers = {"Authorization": f"token {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize("route", ["status", "pools", "servers", "use"])
def test_unauthenticated_requests_are_refused(server, route):
    url, hub = server
    before = len(hub.requests)
    assert get(f"{url}/gpupool/{route}", token=None)[0] == 403
    assert get(f"{url}/gpupool/{route}", token="wrong")[0] == 403
    assert len(hub.requests) == before  # nothing was asked on their behalf


def test_status(server):
    url, _ = server
    code, body = get(f"{url}/gpupool/status")
    assert code == 200
    assert body == {
        "label": "2 \u00d7 A100-80G · training-pool",
        "in_pool": True,
        "pool": "training-pool",
        "platform": None,
        "gpus": 2,
        "gpu_type": "A100-80G",
        "shape": None,  # a spawner that wrote no GPUPOOL_SHAPE (issue 29)
        "shape_text": None,
        "gpu_equivalents": None,
        "over_quota": False,
        "node": "gpu-node-1",
        "user": "alice",
        "server": "",
        # the notifications' Details link: the service's pages under the hub's base URL
        "pages_url": "/services/gpupool/",
    }


def test_pools_come_from_the_service_with_the_servers_token(server):
    url, hub = server
    code, body = get(f"{url}/gpupool/pools")
    assert code == 200 and body == LAUNCH_OPTIONS
    assert ("GET", "/services/gpupool/api/v1/launch-options") in hub.requests


def test_servers_join_the_hub_and_the_service(server):
    url, _ = server
    code, body = get(f"{url}/gpupool/servers")
    assert code == 200
    assert body["servers"][0] == {
        "name": "",
        "this": True,
        "ready": True,
        "pending": None,
        "url": None,
        "pool": "training-pool",
        "node": "gpu-node-1",
        "gpus": 2,
        # what it has in every surface's words, as the service's row says it
        "shape_text": "2 \u00d7 A100-80G",
        "over_quota": False,
        "state": "running",
        # the fake's service measures no GPU utilization (no source)
        "gpu_utilization": None,
        "gpu_utilization_max": None,
        "gpu_memory_used_mib": None,
        "gpu_memory_total_mib": None,
        "measured_at": None,
        "idle": None,
        "notice": None,
        "notices": [],
    }


def test_status_body_outside_a_pool():
    assert status_body(Placement())["label"] == "not in a GPU pool"


def test_servers_body_uses_the_hubs_options_without_a_pod():
    hub = {
        "big": {"ready": False, "pending": "spawn", "user_options": {"pool": "dev-pool", "gpus": 1}}
    }
    row = servers_body(hub, [], this="")["servers"][0]
    assert (row["name"], row["this"], row["pool"], row["gpus"], row["state"]) == (
        "big",
        False,
        "dev-pool",
        1,
        "spawn",
    )


def test_servers_body_passes_on_what_the_gpus_do():
    """A pod's utilization, memory and idle state reach the side panel as the service gives
    them."""
    idle = {"since": 1.0e9, "warned": True, "stops_at": 1.0e9 + 7200, "action": "stop"}
    pod = {"server": "", "pool": "training-pool", "node": "gpu-node-1", "gpus": 2,
           "state": "running", "gpu_utilization": 50.0, "gpu_utilization_max": 90.0,
           "gpu_memory_used_mib": 31744, "gpu_memory_total_mib": 163840,
           "measured_at": 1.0e9 + 3600, "gpu_utilization_history": [[1.0e9, 50.0]],
           "idle": idle}  # fmt: skip
    row = servers_body({"": {"ready": True}}, [pod], this="")["servers"][0]
    assert {k: row[k] for k in pod if k in row and k.startswith(("gpu_", "idle"))} == {
        "gpu_utilization": 50.0,
        "gpu_utilization_max": 90.0,
        "gpu_memory_used_mib": 31744,
        "gpu_memory_total_mib": 163840,
        "idle": idle,
    }
    assert "gpu_utilization_history" not in row  # the panel draws no chart


def test_use_asks_the_service_for_this_servers_row(server):
    """``/gpupool/use``: this server's row of the service's ``servers`` (the fake measures no
    utilization: null, and the service's words why), with this server's clock."""
    url, hub = server
    before = time.time()
    code, body = get(f"{url}/gpupool/use")
    assert code == 200
    assert ("GET", "/services/gpupool/api/v1/servers") in hub.requests
    assert before - 1 <= body.pop("now") <= time.time() + 1
    assert body == {
        "gpu_utilization": None,
        "gpu_utilization_max": None,
        "gpu_memory_used_mib": None,
        "gpu_memory_total_mib": None,
        "measured_at": None,
        "idle": None,
        "notice": None,
        "notices": [],
        "source": "none",
        "problem": "no GPU utilization source is configured",
        "error": None,
    }


def test_use_of_a_server_without_gpus_asks_nothing(fake_hub):
    """A CPU server, or one not started in a pool, answers at once: no request to the
    service."""
    cpu = Placement.from_environ(fake_hub.environ(GPUPOOL_POOL="compute-pool", GPUPOOL_GPUS="0"))
    for placement in (cpu, Placement()):
        body = asyncio.run(server_use_body(placement))
        assert fake_hub.requests == []
        assert body["gpus"] == 0 and body["gpu_utilization"] is None and body["error"] is None


def test_use_says_why_when_the_service_cannot_be_asked():
    """A service that does not answer is words in ``error`` (the route still answers 200)."""
    dead = f"http://127.0.0.1:{free_port()}/services/gpupool/"
    placement = Placement(pool="training-pool", gpus=2, service_url=dead, token="t", user="alice")
    body = asyncio.run(server_use_body(placement))
    assert body["error"] and "127.0.0.1" in body["error"], body
    assert body["gpu_utilization"] is None and body["idle"] is None
    unconfigured = asyncio.run(server_use_body(Placement(pool="training-pool", gpus=2)))
    assert "GPUPOOL_SERVICE_URL is not set" in unconfigured["error"]


def test_use_body_passes_on_what_the_gpus_do():
    """A measured row's fields reach the status item as the service gives them; a row the
    service does not count is said as ``%gpupool status`` says it."""
    idle = {"since": 1.0e9, "warned": True, "stops_at": 1.0e9 + 7200, "due_at": 1.0e9 + 7200,
            "action": "stop"}  # fmt: skip
    notice = {
        "kind": "runtime",
        "words": "this server has run for 7h50m; servers here may run "
        "8h: it stops at 2001-09-09 03:46 UTC",
        "deadline": 1.0e9 + 7200,
        "action": "stop",
    }
    row = {"server": "", "gpu_utilization": 45.0, "gpu_utilization_max": 90.0,
           "gpu_memory_used_mib": 31744, "gpu_memory_total_mib": 163840,
           "measured_at": 1.0e9 + 3600, "gpu_utilization_history": [[1.0e9, 45.0]],
           "idle": idle, "notice": notice, "notices": [notice]}  # fmt: skip
    body = use_body(ServerUse(row, "dcgm", None), now=1.0e9 + 3605)
    assert body == {
        "gpu_utilization": 45.0,
        "gpu_utilization_max": 90.0,
        "gpu_memory_used_mib": 31744,
        "gpu_memory_total_mib": 163840,
        "measured_at": 1.0e9 + 3600,
        "idle": idle,
        "notice": notice,
        "notices": [notice],
        "source": "dcgm",
        "problem": None,
        "error": None,
        "now": 1.0e9 + 3605,
    }
    assert use_body(ServerUse(None, "dcgm"), now=1.0)["error"] == (
        "the gpupool service counts no pod of this server"
    )


def post(url, body, token=TOKEN):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_saved_work_is_forwarded_to_the_service_once_per_document(server):
    """``POST /gpupool/saved`` (issue 31): each page of the lab reports what it saved before a
    stop; the service is told the documents of every page for that notice, each once."""
    url, hub = server
    notice = {"kind": "idle", "deadline": 1_800_000_000}
    before = len(hub.saved)
    assert post(f"{url}/gpupool/saved", {"count": 1, "paths": ["a.ipynb"]}, token=None)[0] == 403
    assert len(hub.saved) == before
    code, body = post(
        f"{url}/gpupool/saved", {"count": 2, "paths": ["a.ipynb", "b.ipynb"], "notice": notice}
    )
    assert code == 200, body
    # a second tab of the same lab saved b (again) and c
    code, body = post(
        f"{url}/gpupool/saved", {"count": 2, "paths": ["b.ipynb", "c.md"], "notice": notice}
    )
    assert code == 200, body
    assert hub.saved[before:] == [
        {"server": "", "count": 2, "paths": ["a.ipynb", "b.ipynb"], "notice": notice},
        {"server": "", "count": 3, "paths": ["a.ipynb", "b.ipynb", "c.md"], "notice": notice},
    ]
    # another notice starts afresh
    other = {"kind": "runtime", "deadline": 1_800_000_500}
    code, _ = post(f"{url}/gpupool/saved", {"count": 0, "paths": [], "notice": other})
    assert code == 200
    assert hub.saved[-1] == {"server": "", "count": 0, "paths": [], "notice": other}
    for bad in ({"count": -1}, {"count": 1, "paths": "a"}, [1]):
        code, body = post(f"{url}/gpupool/saved", bad)
        assert code == 400, (bad, body)
    assert len(hub.saved) == before + 3
