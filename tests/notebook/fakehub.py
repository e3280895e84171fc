"""A scripted JupyterHub REST API and gpupool service, on a thread of its own.

The magics block their caller while a thread of theirs talks to the hub, so the fake cannot
share the test's event loop: it runs its own loop in a thread. It records what it was asked.
The hub's answers are scripted; the gpupool service's are made by the service's own view
functions from a real registry and usage index (``tests/real_answers.py``). A server the fake
hub starts gets a pod in the fake's own usage index, admitted by the service's admission code
in the first pool asked for (or alice's first default pool): the service then counts it, with
its pool and whether it runs over quota, as it would count the pod the spawner creates.

A start that asks to wait in line (``"queue": true``, issue 18) waits in the fake's line: its
progress says its place in the spawner's words ("waiting for 2 GPUs: position 2 in line for
dev-pool"), again while it holds and at each change, until it is admitted (its pod then runs
and the start goes on) or its server is stopped (JupyterHub then ends the progress with "Spawn
cancelled"). The line's answer to ``GET api/v1/queue`` is scripted in the service's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

import real_answers
import tornado.web

from jupyter_gpupool.core.admission.queue import waiting_words
from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.service.state import ServiceState

TOKEN = "secret-token"

#: alice's corner of the demo's cluster (no inference-pool): her group ml-research is guaranteed
#: 10 GPUs of training-pool and borrows in dev-pool; secret-pool and the ``default`` pool are
#: kept for others. Bob (ml-research) and carol use GPUs too, so not everything is free.
DOCUMENTS = """
kind: pool
version: v0.1
pool: {name: compute-pool, description: CPU only}
nodes: {cpu-node-1: {gpu-type: ""}, cpu-node-2: {gpu-type: ""}}
---
kind: pool
version: v0.1
pool: {name: dev-pool, description: dev}
nodes: {gpu-node-5: {gpu-type: RTX4090-24G}}
---
kind: pool
version: v0.1
pool: {name: training-pool, description: training}
nodes: {gpu-node-1: {gpu-type: A100-80G}, gpu-node-2: {gpu-type: A100-80G}}
limits: {max-gpus: 8}
---
kind: pool
version: v0.1
pool: {name: secret-pool, description: not alice's}
access: {groups: [secret-team]}
---
kind: pool
version: v0.1
pool: {name: default, description: the ops team's}
access: {groups: [ops]}
---
kind: quota
version: v0.1
quota: {name: notebook-test-quotas}
pools:
  training-pool:
    borrowing: false
    groups: {ml-research: {guaranteed: 10}}
  dev-pool:
    borrowing: true
default-pools:
  groups:
    ml-research: [training-pool, dev-pool]
"""
MAX_GPUS = 1024
GROUPS = ["ml-research"]


def service_state() -> ServiceState:
    """The service's state: the pools above, and three servers running."""
    nodes = ("gpu-node-1", "gpu-node-2", "gpu-node-5", "cpu-node-1", "cpu-node-2")
    state = real_answers.service_state(DOCUMENTS, real_answers.example_nodes(nodes))
    for name, user, groups, pool, gpus, node in (
        ("jupyter-alice", "alice", GROUPS, "training-pool", 2, "gpu-node-1"),
        ("jupyter-bob", "bob", GROUPS, "training-pool", 4, "gpu-node-2"),
        ("jupyter-carol", "carol", [], "dev-pool", 1, "gpu-node-5"),
    ):
        real_answers.run_server(
            state,
            name=name,
            user=user,
            groups=groups,
            pool=pool,
            gpus=gpus,
            node=node,
            admission_id=f"adm-{user}",
        )
    return state


#: What GET api/v1/launch-options answers alice (before any start of the fake's).
LAUNCH_OPTIONS = real_answers.launch_options(service_state(), "alice", GROUPS, MAX_GPUS)
#: Where the fake's scheduler puts a started server's pod, by pool.
NODE_OF_POOL = {
    "training-pool": "gpu-node-1",
    "dev-pool": "gpu-node-5",
    "compute-pool": "cpu-node-1",
}

#: A start with this many GPUs is refused at once, as GPUPoolSpawner does when no pool can.
REFUSED_GPUS = 99
REFUSAL = "No pool can take your server now. training-pool: no node has 99 free GPUs"
#: A start with this many GPUs fails during its progress.
FAILING_GPUS = 98
#: A start with this many GPUs is over before the hub answers the request for it (201), as
#: JupyterHub does with starts quicker than its slow_spawn_timeout (the demo's are). The fake
#: answers once the start's progress has been read to its end, or after slow_spawn_timeout.
QUICK_GPUS = 3
SLOW_SPAWN_TIMEOUT = 10
#: A start that waits in line with this many GPUs stays first in line until the test admits it
#: (:meth:`FakeHub.admit`) or its server is stopped. Any other moves up from position 2 (said
#: twice, as the spawner says a place that holds) to 1, and is admitted.
WAITING_GPUS = 7
#: A waiting start's progress (the bar stays at its start while in line).
WAITING_PROGRESS = 0


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
        if options.get("queue"):
            # no pool can take it now: in line, its pod made once admitted
            position = 1 if options.get("gpus") == WAITING_GPUS else 2
            self.fake.line[name] = self.fake.queue_row(user, name, options, position)
            return self.set_status(202)
        if options.get("gpus") != FAILING_GPUS:
            self.fake.run_pod(user, name, options)
        if options.get("gpus") == QUICK_GPUS:
            # the answer comes after the start is over: here, when its progress said "ready"
            followed = self.fake.progress_read.setdefault(name, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(followed.wait(), SLOW_SPAWN_TIMEOUT)
            url = f"/user/{user}/{name}/"
            self.fake.servers[name] = {"name": name, "ready": True, "url": url}
            return self.set_status(201)
        self.set_status(202)

    def delete(self, user: str, name: str) -> None:
        self.fake.stopped.append(name)
        self.fake.line.pop(name, None)  # a pending start stopped: it leaves the line
        self.fake.delete_pod(name)
        if self.fake.servers.pop(name, None) is None:
            return self.send_json(404, {"status": 404, "message": "no such server"})
        self.set_status(204)


class ProgressHandler(Base):
    async def get(self, user: str, name: str) -> None:
        self.set_header("Content-Type", "text/event-stream")
        options = dict(next((o for n, o in reversed(self.fake.started) if n == name), {}))
        if name in self.fake.line and not await self.wait_in_line(name):
            # stopped while it waited: JupyterHub's words for a start cancelled
            await self.send({"progress": 100, "failed": True, "message": "Spawn cancelled"})
            return
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
            await self.send(event)
        self.fake.progress_read.setdefault(name, asyncio.Event()).set()

    async def send(self, event: dict[str, Any]) -> None:
        # split mid-event too: the client must put chunks together
        text = f"data: {json.dumps(event)}\n\n"
        self.write(text[:7])
        await self.flush()
        self.write(text[7:])
        await self.flush()
        await asyncio.sleep(0.01)  # a stream in time, as the hub's: not one burst

    async def wait_in_line(self, name: str) -> bool:
        """A start in line: its place, as it holds and changes, until it leaves the line;
        True when it was admitted (False: stopped)."""
        fake = self.fake
        if fake.line[name]["gpus"] != WAITING_GPUS:
            for position in (2, 2, 1):
                if name not in fake.line:
                    break
                fake.line[name] = {**fake.line[name], **fake.place(fake.line[name], position)}
                await self.send(waiting_event(fake.line[name]))
            fake.admit(name)
        told = None
        while name in fake.line:
            entry = fake.line[name]
            if entry["message"] != told:
                told = entry["message"]
                await self.send(waiting_event(entry))
            await asyncio.sleep(0.01)
        return name in fake.admitted


def waiting_event(entry: dict[str, Any]) -> dict[str, Any]:
    return {"progress": WAITING_PROGRESS, "message": entry["message"]}


class LaunchOptionsHandler(Base):
    def get(self) -> None:
        # the token is alice's server's: the service answers for her
        self.send_json(200, real_answers.launch_options(self.fake.state, "alice", GROUPS, MAX_GPUS))


class ServersHandler(Base):
    def get(self) -> None:
        self.send_json(200, real_answers.servers(self.fake.state, "alice"))


class SavedHandler(Base):
    def post(self) -> None:
        # the service keeps it on alice's session (issue 31): the fake keeps the body
        body = json.loads(self.request.body)
        self.fake.saved.append(body)
        self.send_json(200, {"user": "alice", "server": body["server"], "saved": body["count"]})


class QueueHandler(Base):
    def get(self) -> None:
        # the token is alice's server's: her entries, first in line first
        rows = sorted(self.fake.line.values(), key=lambda r: (r["position"], r["waiting_since"]))
        pools: dict[str, int] = {}
        for row in rows:
            for pool in row["pools"]:
                pools[pool] = pools.get(pool, 0) + 1
        self.send_json(200, {"queue": rows, "pools": pools})


class FakeHub:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, str]] = []
        self.started: list[tuple[str, dict[str, Any]]] = []
        self.stopped: list[str] = []
        #: the bodies of ``POST api/v1/servers/saved``
        self.saved: list[dict[str, Any]] = []
        self.servers: dict[str, dict[str, Any]] = {"": {"name": "", "ready": True}}
        #: starts waiting in line (``"queue": true``), by server: their rows of api/v1/queue
        self.line: dict[str, dict[str, Any]] = {}
        #: the starts admitted from the line
        self.admitted: list[str] = []
        self._options: dict[str, dict[str, Any]] = {}
        #: the service's state: the scenario's servers, and the pods of servers started here
        self.state = service_state()
        self.pods: dict[str, dict[str, Any]] = {}
        #: set (on the fake's loop) when a server's progress has been sent to its end
        self.progress_read: dict[str, asyncio.Event] = {}
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

    def run_pod(self, user: str, server: str, options: dict[str, Any]) -> None:
        """The pod of a started server, as the spawner and the scheduler would make it."""
        first = (options.get("pools") or ["training-pool"])[0]
        # a {"pool", "shape"} entry (issue 29): the fake runs whole GPUs in its pool
        pool = first["pool"] if isinstance(first, dict) else first
        try:
            self.pods[server] = real_answers.run_server(
                self.state,
                name=f"jupyter-{user}-{server}",
                user=user,
                groups=GROUPS,
                pool=pool,
                gpus=int(options.get("gpus") or 0),
                node=NODE_OF_POOL[pool],
                admission_id=f"adm-{user}-{server}",
                server=server,
            )
        except (KeyError, ValueError):
            pass  # a pool the fake places nothing in, or no room: no pod

    def queue_row(
        self, user: str, server: str, options: dict[str, Any], position: int
    ) -> dict[str, Any]:
        """A start's entry in line, as ``GET api/v1/queue`` shows it."""
        self._options[server] = options
        pools = list(options.get("pools") or ["training-pool", "dev-pool"])
        gpus = int(options.get("gpus") or 0)
        return {
            "id": f"adm-{user}-{server}",
            "state": "queued",
            "queued": True,
            "user": user,
            "server": server,
            "gpus": gpus,
            "gpu_type": options.get("gpu_type"),
            "pools": pools,
            # ml-research's guarantee is in training-pool: 4 of its 10 GPUs are not used
            "within_quota": pools[0] == "training-pool" and gpus <= 4,
            "subject": "group ml-research",
            "waiting_since": time.time(),
            "reclaiming": False,
            "reasons": "\n".join(f"{p}: no node has {gpus} free GPUs" for p in pools),
            **self.place({"gpus": gpus, "pools": pools}, position),
        }

    @staticmethod
    def place(entry: dict[str, Any], position: int) -> dict[str, Any]:
        return {
            "position": position,
            "message": waiting_words(entry["gpus"], position, entry["pools"]),
        }

    def admit(self, server: str) -> None:
        """GPUs came free for a start in line: it leaves the line and its pod runs (on the
        fake's loop, whichever thread asks)."""
        if self._loop is not None and threading.current_thread() is not self._thread:
            self._loop.call_soon_threadsafe(self.admit, server)
            return
        if self.line.pop(server, None) is not None:
            self.admitted.append(server)
            self.run_pod("alice", server, self._options.get(server, {}))

    def delete_pod(self, server: str) -> None:
        pod = self.pods.pop(server, None)
        if pod is not None:
            self.state.index.apply_pod("DELETED", pod)

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
                (r"/services/gpupool/api/v1/servers/saved", SavedHandler),
                (r"/services/gpupool/api/v1/queue", QueueHandler),
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
