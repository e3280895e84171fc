"""A scripted JupyterHub REST API and gpupool service, on a thread of its own.

The magics block their caller while a thread of theirs talks to the hub, so the fake cannot
share the test's event loop: it runs its own loop in a thread. It records what it was asked.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import tornado.web

from jupyter_gpupool.demo.run import free_port

TOKEN = "secret-token"

LAUNCH_OPTIONS = {
    "user": "alice",
    "groups": ["ml-research"],
    "default_pools": ["training-pool", "dev-pool"],
    "restricted_pools": ["secret-pool"],
    "max_gpus": 1024,
    "pools": [
        {
            "name": "compute-pool",
            "description": "CPU only",
            "status": "active",
            "gpu_total": 0,
            "gpu_available": 0,
            "largest_free_block": 0,
            "node_count": 2,
            "schedulable_nodes": 2,
            "gpu_types": [],
            "limits": {"min_gpus": 0},
            "largest_node_gpus": 0,
            "quota": {"managed": False, "borrowing": False, "within_quota": 0, "available": 0},
        },
        {
            "name": "dev-pool",
            "description": "dev",
            "status": "active",
            "gpu_total": 4,
            "gpu_available": 3,
            "largest_free_block": 3,
            "node_count": 1,
            "schedulable_nodes": 1,
            "gpu_types": ["RTX4090-24G"],
            "limits": {"min_gpus": 0},
            "largest_node_gpus": 4,
            "quota": {"managed": True, "borrowing": True, "within_quota": 0, "available": 4},
        },
        {
            "name": "training-pool",
            "description": "training",
            "status": "active",
            "gpu_total": 16,
            "gpu_available": 10,
            "largest_free_block": 6,
            "node_count": 2,
            "schedulable_nodes": 2,
            "gpu_types": ["A100-80G"],
            "limits": {"min_gpus": 0, "max_gpus": 8},
            "largest_node_gpus": 8,
            "quota": {"managed": True, "borrowing": False, "within_quota": 4, "available": 4},
        },
    ],
}

SERVER_PODS = [
    {
        "namespace": "default",
        "name": "jupyter-alice",
        "user": "alice",
        "server": "",
        "pool": "training-pool",
        "node": "gpu-node-1",
        "gpus": 2,
        "state": "running",
        "over_quota": False,
        "charged": "group:ml-research",
        "admission": "adm1",
        "platform": None,
        "created": "2024-01-01T00:00:00Z",
    }
]

#: A start with this many GPUs is refused at once, as GPUPoolSpawner does when no pool can.
REFUSED_GPUS = 99
REFUSAL = "No pool can take your server now. training-pool: no node has 99 free GPUs"
#: A start with this many GPUs fails during its progress.
FAILING_GPUS = 98
#: A start with this many GPUs is over before the hub answers the request for it (201), as
#: JupyterHub does with starts quicker than its slow_spawn_timeout (the demo's are).
QUICK_GPUS = 3
QUICK_SECONDS = 0.5


class Base(tornado.web.RequestHandler):
    @property
    def fake(self) -> FakeHub:
        return self.settings["fake"]

    def prepare(self) -> None:
        self.fake.requests.append((self.request.method, self.request.path))
        if self.request.headers.get("Authorization") != f"token {TOKEN}":
            self.send_json(403, {"status": 403, "message": "bad token"})
            self.finish()

    def send_json(self, code: int, body: Any) -> None:
        self.set_status(code)
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(body))


class UserHandler(Base):
    def get(self, user: str) -> None:
        self.send_json(200, {"name": user, "servers": self.fake.servers})


class ServerHandler(Base):
    async def post(self, user: str, name: str) -> None:
        options = json.loads(self.request.body)["user_options"]
        self.fake.started.append((name, options))
        if options.get("gpus") == REFUSED_GPUS:
            return self.send_json(409, {"status": 409, "message": REFUSAL})
        if name in self.fake.servers:
            return self.send_json(400, {"status": 400, "message": f"{name} is already running"})
        self.fake.servers[name] = {"name": name, "ready": False, "pending": "spawn"}
        if options.get("gpus") == QUICK_GPUS:
            await asyncio.sleep(QUICK_SECONDS)
            url = f"/user/{user}/{name}/"
            self.fake.servers[name] = {"name": name, "ready": True, "url": url}
            return self.set_status(201)
        self.set_status(202)

    def delete(self, user: str, name: str) -> None:
        self.fake.stopped.append(name)
        if self.fake.servers.pop(name, None) is None:
            return self.send_json(404, {"status": 404, "message": "no such server"})
        self.set_status(204)


class ProgressHandler(Base):
    async def get(self, user: str, name: str) -> None:
        self.set_header("Content-Type", "text/event-stream")
        options = dict(next((o for n, o in reversed(self.fake.started) if n == name), {}))
        events: list[dict[str, Any]] = [
            {"progress": 10, "message": "admitted to dev-pool within quota (1 GPU)"},
            {"progress": 50, "message": "scheduled on node gpu-node-5"},
        ]
        if options.get("gpus") == FAILING_GPUS:
            events.append({"progress": 100, "failed": True, "message": "Spawn failed: no luck"})
        else:
            url = f"/user/{user}/{name}/"
            events.append(
                {"progress": 100, "ready": True, "message": f"ready at {url}", "url": url}
            )
        if self.fake.servers.get(name, {}).get("ready"):
            events = events[-1:]  # as JupyterHub: a server already up has only its last event
        elif events[-1].get("ready"):
            self.fake.servers[name] = {"name": name, "ready": True, "url": events[-1]["url"]}
        for event in events:
            # split mid-event too: the client must put chunks together
            text = f"data: {json.dumps(event)}\n\n"
            self.write(text[:7])
            await self.flush()
            self.write(text[7:])
            await self.flush()
            await asyncio.sleep(0.01)


class LaunchOptionsHandler(Base):
    def get(self) -> None:
        self.send_json(200, LAUNCH_OPTIONS)


class ServersHandler(Base):
    def get(self) -> None:
        self.send_json(200, {"servers": SERVER_PODS, "total": len(SERVER_PODS)})


class FakeHub:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, str]] = []
        self.started: list[tuple[str, dict[str, Any]]] = []
        self.stopped: list[str] = []
        self.servers: dict[str, dict[str, Any]] = {"": {"name": "", "ready": True}}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def environ(self, **more: str) -> dict[str, str]:
        """What GPUPoolSpawner and JupyterHub put in a server's environment."""
        return {
            "JUPYTERHUB_API_URL": self.url + "/hub/api",
            "JUPYTERHUB_API_TOKEN": TOKEN,
            "JUPYTERHUB_USER": "alice",
            "JUPYTERHUB_SERVER_NAME": "",
            "GPUPOOL_SERVICE_URL": self.url + "/services/gpupool/",
            "GPUPOOL_POOL": "training-pool",
            "GPUPOOL_GPUS": "2",
            "GPUPOOL_GPU_TYPE": "A100-80G",
            "GPUPOOL_OVER_QUOTA": "false",
            "GPUPOOL_NODE": "gpu-node-1",
            **more,
        }

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = tornado.web.Application(
            [
                (r"/hub/api/users/([^/]+)", UserHandler),
                (r"/hub/api/users/([^/]+)/servers/([^/]*)", ServerHandler),
                (r"/hub/api/users/([^/]+)/servers/([^/]*)/progress", ProgressHandler),
                (r"/services/gpupool/api/v1/launch-options", LaunchOptionsHandler),
                (r"/services/gpupool/api/v1/servers", ServersHandler),
            ],
            fake=self,
        )
        server = app.listen(self.port, "127.0.0.1")
        self._ready.set()
        await self._stop.wait()
        server.stop()

    def start(self) -> FakeHub:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
