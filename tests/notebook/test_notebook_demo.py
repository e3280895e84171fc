"""A notebook run with nbclient against ``gpupool demo``: from inside alice's server (the kernel
gets the environment GPUPoolSpawner gave her server's pod, token included), the LaunchPanel
launches a named server in dev-pool and stops it, and the magics say where things run."""

from __future__ import annotations

import json
import os

import nbclient
import nbformat
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from jupyter_gpupool.demo.testing import DemoProcess

CELLS = [
    """
from jupyter_gpupool.widgets import LaunchPanel
panel = LaunchPanel()
await panel.refresh()
print(sorted(p["name"] for p in panel.pools), panel.order)
panel
""",
    """
panel.order = ["dev-pool"]
panel.gpus = 1
panel.server_name = "nb"
panel._launch.click()
await panel.wait()
print(panel.state, panel.url, panel.progress)
""",
    """
%load_ext jupyter_gpupool
%gpupool status
""",
    """
panel._stop.click()
await panel.wait()
print(panel.state, "|", panel.message)
""",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("nb-demo")) as demo:
        yield demo


def pod_environment(demo: DemoProcess, pod: str) -> dict[str, str]:
    """The environment the spawner gave a server's pod (the kubelet's process gets the same)."""
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(demo.state / "kubeconfig")))
    obj = api.read_namespaced_pod(pod, "default")
    env = {}
    for var in obj.spec.containers[0].env:
        if var.value is not None:
            env[var.name] = var.value
        elif var.value_from and var.value_from.field_ref:
            assert var.value_from.field_ref.field_path == "spec.nodeName", var
            env[var.name] = obj.spec.node_name
    api.api_client.close()
    return env


def outputs(cell) -> str:
    text = []
    for out in cell.get("outputs", []):
        if out.get("name") == "stdout":
            text.append(out["text"])
        elif "data" in out:
            text.append(json.dumps(out["data"]))
    return "".join(text)


def test_a_notebook_launches_and_stops_a_server_with_the_panel(demo, tmp_path):
    demo.api("POST", "/hub/api/users/alice")
    status, _ = demo.api(
        "POST",
        "/hub/api/users/alice/server",
        {"user_options": {"pools": ["inference-pool"], "gpus": 1}},
    )
    assert status in (201, 202)
    demo.start_server("alice")
    env = pod_environment(demo, "jupyter-alice")
    assert env["GPUPOOL_POOL"] == "inference-pool" and env["JUPYTERHUB_USER"] == "alice"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.strip()) for c in CELLS])
    runner = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        runner.execute(env={**_base_env(), **env})
        first, launched, status_out, stopped = (outputs(c) for c in nb.cells)
        assert "['compute-pool', 'default', 'dev-pool', 'inference-pool', 'training-pool']" in first
        assert "application/vnd.jupyter.widget-view+json" in first
        assert launched.strip() == "ready /user/alice/nb/ 100"
        assert "inference-pool" in status_out and "A10-24G" in status_out
        assert stopped.strip() == "idle | server 'nb' stopped"
        _, model = demo.api("GET", "/hub/api/users/alice")
        assert "nb" not in model["servers"]
    finally:
        demo.api("DELETE", "/hub/api/users/alice/servers/nb")
        demo.api("DELETE", "/hub/api/users/alice/server")


def _base_env() -> dict[str, str]:
    # the kernel runs here, not in the pod: drop this process's own hub variables
    return {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "GPUPOOL_"))}
