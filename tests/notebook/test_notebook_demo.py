"""A notebook run end to end against ``gpupool demo``, on both clusters of tests/clusters.py (the
simulated one and a real control plane): alice's server is started through the hub, a kernel is
started in it (its API, as JupyterLab does), and the notebook's cells run there, with the
environment the kubelet gave her pod. The LaunchPanel launches a named server in dev-pool and
stops it; ``%gpupool status`` names the pool and node her pod is on, as the API server says."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from clusters import CLUSTERS, DemoOn, demo_on
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from jupyter_gpupool.core.pools.placement import TIMES

POOL_KEY = "runwhere.ai/pool"
TYPE_KEY = "runwhere.ai/gpu-type"

CELLS = [
    """
from jupyter_gpupool.widgets import LaunchPanel
panel = LaunchPanel()
await panel.refresh()
print([p["name"] for p in panel.pools], panel.order)
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


@pytest.fixture(scope="module", params=CLUSTERS)
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """``gpupool demo`` on the simulated or the real cluster, for the module."""
    kind = str(request.param)
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    yield from demo_on(kind, tmp_path_factory.mktemp(f"nb-demo-{kind}"), real)


# --- a kernel in a single-user server ------------------------------------------------------------


class ServerKernel:
    """A kernel started in a single-user server through the hub's proxy (the server's
    ``api/kernels``) and run cell by cell over its websocket, as JupyterLab does."""

    def __init__(self, server_url: str, token: str):
        self.server_url = server_url  # .../user/alice/
        self.headers = {"Authorization": f"token {token}"}
        self.session = uuid.uuid4().hex
        self.id = ""
        self.ws: WebSocketClientConnection | None = None

    async def start(self) -> None:
        http = AsyncHTTPClient()
        resp = await http.fetch(
            self.server_url + "api/kernels",
            method="POST",
            body=json.dumps({"name": "python3"}),
            headers=self.headers,
            request_timeout=60,
        )
        self.id = json.loads(resp.body)["id"]
        url = self.server_url.replace("http", "ws", 1) + f"api/kernels/{self.id}/channels"
        self.ws = await websocket_connect(
            HTTPRequest(
                f"{url}?session_id={self.session}", headers=self.headers, connect_timeout=30
            )
        )

    async def execute(self, code: str, timeout: float = 120) -> list[dict[str, Any]]:
        """Run ``code``; its outputs as a notebook stores them. An error fails the test."""
        return await asyncio.wait_for(self._execute(code), timeout)

    async def _execute(self, code: str) -> list[dict[str, Any]]:
        assert self.ws is not None
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "session": self.session}
        content = {"code": code, "silent": False, "store_history": True, "allow_stdin": False}
        message: dict[str, Any] = {
            "header": {**header, "username": "test", "version": "5.3"},
            "parent_header": {},
            "metadata": {},
            "content": {**content, "user_expressions": {}, "stop_on_error": True},
            "channel": "shell",
            "buffers": [],
        }
        await self.ws.write_message(json.dumps(message))
        outputs: list[dict[str, Any]] = []
        idle = replied = False
        while not (idle and replied):
            raw = await self.ws.read_message()
            if raw is None:
                raise AssertionError("the kernel's websocket closed during a cell")
            msg = json.loads(raw)
            if (msg.get("parent_header") or {}).get("msg_id") != msg_id:
                continue
            kind, body = msg["header"]["msg_type"], msg["content"]
            if kind == "status":
                idle = body["execution_state"] == "idle"
            elif kind == "execute_reply":
                replied = True
            elif kind == "error":
                raise AssertionError(f"the cell failed:\n{code}\n" + "\n".join(body["traceback"]))
            elif kind in ("stream", "display_data", "execute_result"):
                outputs.append(body)
        return outputs

    async def stop(self) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.id:
            await AsyncHTTPClient().fetch(
                self.server_url + f"api/kernels/{self.id}",
                method="DELETE",
                headers=self.headers,
                raise_error=False,
            )


def text_of(outputs: list[dict[str, Any]]) -> str:
    """A cell's stdout and its displayed data (as JSON)."""
    text = []
    for out in outputs:
        if out.get("name") == "stdout":
            text.append(out["text"])
        elif "data" in out:
            text.append(json.dumps(out["data"]))
    return "".join(text)


def status_fields(outputs: list[dict[str, Any]]) -> dict[str, str]:
    """The ``field  value`` lines of ``%gpupool status``' text, as a dict."""
    [report] = [o["data"]["text/plain"] for o in outputs if "text/plain" in o.get("data", {})]
    fields = {}
    for line in report.splitlines():
        key, _, value = line.partition("  ")
        if key.strip():
            fields[key.strip()] = value.strip()
    return fields


def pod_of(demo: DemoOn, user: str, server: str) -> dict[str, Any] | None:
    """The pod of ``user``'s server ``server`` ("" for the default one), from a fresh list."""
    for pod in demo.run(demo.cluster.list_pods("default")):
        notes = pod["metadata"].get("annotations") or {}
        if (notes.get("hub.jupyter.org/username"), notes.get("hub.jupyter.org/servername", "")) == (
            user,
            server,
        ):
            return pod
    return None


def node_labels(demo: DemoOn, node: str) -> dict[str, str]:
    """A node's labels, read from the API server now."""
    return dict(demo.run(demo.cluster.node(node))["metadata"].get("labels") or {})


def test_a_notebook_launches_and_stops_a_server_with_the_panel(demo):
    """A notebook in a kernel of alice's server: the panel lists the pools, launches a server
    that lands on a dev-pool node and stops it; ``%gpupool status`` names her pod's node and
    its pool as a fresh read from the API server does."""
    demo.api("POST", "/hub/api/users/alice")
    status, _ = demo.api(
        "POST",
        "/hub/api/users/alice/server",
        {"user_options": {"pools": ["inference-pool"], "gpus": 1}},
    )
    assert status in (201, 202)
    _, token = demo.api("POST", "/hub/api/users/alice/tokens", {"note": "notebook test"})
    kernel = ServerKernel(f"{demo.url}/user/alice/", token["token"])
    try:
        demo.start_server("alice")
        demo.run(kernel.start())
        first = text_of(demo.run(kernel.execute(CELLS[0].strip()), timeout=150))
        # the spawn form's order: ml-research's default order first, then the others
        pools = "['training-pool', 'inference-pool', 'dev-pool', 'compute-pool', 'default']"
        assert pools in first
        assert "application/vnd.jupyter.widget-view+json" in first
        launched = text_of(demo.run(kernel.execute(CELLS[1].strip()), timeout=150))
        assert launched.strip() == "ready /user/alice/nb/ 100"
        nb = pod_of(demo, "alice", "nb")
        assert nb is not None and nb["status"]["phase"] == "Running"
        assert node_labels(demo, nb["spec"]["nodeName"])[POOL_KEY] == "dev-pool"

        # where alice's own server runs: her pod, read fresh from the API server
        pod = demo.run(demo.cluster.pod("default", "jupyter-alice"))
        assert pod is not None and pod["status"]["phase"] == "Running"
        node = pod["spec"]["nodeName"]
        labels = node_labels(demo, node)
        status = status_fields(demo.run(kernel.execute(CELLS[2].strip()), timeout=150))
        assert status["server"] == "alice/(default)"
        assert (status["node"], status["pool"]) == (node, labels[POOL_KEY])
        assert status["GPUs"] == f"1 {TIMES} {labels[TYPE_KEY]}"
        assert labels[POOL_KEY] == "inference-pool"

        stopped = text_of(demo.run(kernel.execute(CELLS[3].strip()), timeout=150))
        assert stopped.strip() == "idle | server 'nb' stopped"
        _, model = demo.api("GET", "/hub/api/users/alice")
        assert "nb" not in model["servers"]
        demo.run(demo.cluster.wait_gone("default", nb["metadata"]["name"]))
    finally:
        demo.run(kernel.stop())
        demo.api("DELETE", "/hub/api/users/alice/servers/nb")
        demo.api("DELETE", "/hub/api/users/alice/server")
