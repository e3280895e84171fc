"""The idle-GPU policy in `gpupool demo` (issue 17), as the issue's demo scenario: dev-pool gets
``idle: {below_percent: 5, after: 20s, warn: 10s, action: stop}``; carol's server is at 0% and
dave's at 80% (set through the simulated cluster); carol's is warned, then stopped within a
minute; dave's keeps running; then erin's server, at 0% too, loses its utilization source (its
node's DCGM exporter stops answering) and is kept: no data is not idle. Real time, real
JupyterHub, the demo's own dcgm source."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from service_kit import set_dcgm_reachable, set_utilization
from waiting import wait_for

from jupyter_gpupool.demo.testing import DemoProcess

DEV_POOL = Path(__file__).resolve().parents[2] / "examples" / "pools" / "dev-pool.yaml"
POLICY = {"below_percent": 5, "after": "20s", "warn": "10s", "action": "stop"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("demo-idle")) as demo:
        yield demo


def server_rows(demo) -> dict[str, dict]:
    code, answer = demo.api("GET", "/services/gpupool/api/v1/servers?pool=dev-pool")
    assert code == 200, answer
    return {r["user"]: r for r in answer["servers"]}


def test_the_idle_server_is_warned_then_stopped_and_the_busy_one_keeps_running(demo):
    documents = list(yaml.safe_load_all(DEV_POOL.read_text()))
    [pool] = [d for d in documents if d and d.get("kind") == "pool"]
    code, answer = demo.api("POST", "/services/gpupool/api/v1/pools", {**pool, "idle": POLICY})
    assert code in (200, 201), answer
    for user in ("carol", "dave"):
        demo.api("POST", f"/hub/api/users/{user}")
        code, body = demo.api(
            "POST", f"/hub/api/users/{user}/server", {"pools": ["dev-pool"], "gpus": 1}
        )
        assert code in (201, 202), body
    for user in ("carol", "dave"):
        wait_for(lambda u=user: server_rows(demo).get(u), timeout=90, what=f"{user}'s server")
    rows = server_rows(demo)
    kubeconfig = demo.state / "kubeconfig"
    set_utilization(kubeconfig, rows["dave"]["namespace"], rows["dave"]["name"], 80)
    set_utilization(kubeconfig, rows["carol"]["namespace"], rows["carol"]["name"], 0)
    began = time.monotonic()
    warned = wait_for(
        lambda: (server_rows(demo)["carol"].get("idle") or {}).get("warned") or None,
        timeout=60,
        interval=1,
        what="carol's server to be warned",
    )
    assert warned is True
    wait_for(
        lambda: not demo.server_running("carol"),
        timeout=60,
        interval=1,
        what="carol's idle server to be stopped",
    )
    assert time.monotonic() - began < 60
    assert demo.server_running("dave")  # busy: kept
    assert server_rows(demo)["dave"]["gpu_utilization"] == 80.0
    log = (demo.state / "jupyterhub.log").read_text()  # the service runs under the hub
    assert "GPUs idle since" in log and "Stopping server" in log

    # erin's server, idle too, loses its measurements: its node's exporter stops answering
    demo.api("POST", "/hub/api/users/erin")
    code, body = demo.api("POST", "/hub/api/users/erin/server", {"pools": ["dev-pool"], "gpus": 1})
    assert code in (201, 202), body
    wait_for(lambda: server_rows(demo).get("erin"), timeout=90, what="erin's server")
    erin = server_rows(demo)["erin"]
    set_utilization(kubeconfig, erin["namespace"], erin["name"], 80)
    wait_for(
        lambda: server_rows(demo)["erin"]["gpu_utilization"] == 80.0,
        timeout=30,
        interval=0.5,
        what="erin's server measured busy",
    )
    set_dcgm_reachable(kubeconfig, erin["node"], False)
    set_utilization(kubeconfig, erin["namespace"], erin["name"], 0)  # idle, but unseen
    try:
        wait_for(
            lambda: server_rows(demo)["erin"]["gpu_utilization"] is None,
            timeout=60,
            interval=0.5,
            what="erin's measurement to go stale",
        )
        # the policy's 20 s and a 5 s poll: measured at 0%, she would have been stopped
        kept_until = time.monotonic() + 25
        while time.monotonic() < kept_until:
            row = server_rows(demo)["erin"]
            assert demo.server_running("erin"), "erin's server was stopped without data"
            assert not (row.get("idle") or {}).get("warned"), row["idle"]
            time.sleep(1)
        assert row["idle"] is None and row["gpu_utilization"] is None, row
    finally:
        set_dcgm_reachable(kubeconfig, erin["node"], True)
