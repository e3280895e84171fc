"""Stand-ins for the spawner tests: a JupyterHub user and a scripted gpupool service.

(A module of its own, so test modules import them by a name no other test directory uses.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import real_answers
import tornado.httpserver
import tornado.netutil
import tornado.web

TOKEN = "spawner-token"


@dataclass
class Group:
    name: str


@dataclass
class FakeUser:
    """The parts of jupyterhub.user.User a spawner reads."""

    name: str = "alice"
    id: int = 7
    groups: list[Group] = field(default_factory=lambda: [Group("ml-research")])
    spawners: dict[str, Any] = field(default_factory=dict)

    @property
    def escaped_name(self) -> str:
        return self.name

    @property
    def url(self) -> str:
        return f"/user/{self.name}/"


#: The pools of the demo's cluster as the spawner tests see them: alice's group ml-research is
#: guaranteed GPUs in training-pool and inference-pool (its default order) and borrows in
#: dev-pool; secret-pool and the ``default`` pool (node-6) are kept for others.
DOCUMENTS = """
kind: pool
version: v0.1
pool: {name: compute-pool, description: compute-pool for tests}
nodes: {cpu-node-1: {gpu-type: ""}, cpu-node-2: {gpu-type: ""}}
---
kind: pool
version: v0.1
pool: {name: dev-pool, description: dev-pool for tests}
nodes: {gpu-node-5: {gpu-type: RTX4090-24G}}
---
kind: pool
version: v0.1
pool: {name: inference-pool, description: inference-pool for tests}
nodes: {gpu-node-3: {gpu-type: A10-24G}, gpu-node-4: {gpu-type: A10-24G}}
---
kind: pool
version: v0.1
pool: {name: training-pool, description: training-pool for tests}
nodes: {gpu-node-1: {gpu-type: A100-80G}, gpu-node-2: {gpu-type: A100-80G}}
---
kind: pool
version: v0.1
pool: {name: secret-pool, description: not alice's}
access: {groups: [secret-team]}
---
kind: pool
version: v0.1
pool: {name: default, description: "node-6: the ops team's"}
access: {groups: [ops]}
---
kind: quota
version: v0.1
quota: {name: spawner-test-quotas}
namespace:
  ml-research: {gpu: 64}
pools:
  training-pool:
    borrowing: false
    groups: {ml-research: {guaranteed: 16}}
  inference-pool:
    borrowing: false
    groups: {ml-research: {guaranteed: 8}}
  dev-pool:
    borrowing: true
default-pools:
  groups:
    ml-research: [training-pool, inference-pool]
"""
#: Most GPUs one server may ask for (the service's max_gpus).
MAX_GPUS = 64
#: Why a pool the test calls full is skipped.
FULL_REASON = "no node has 2 free GPUs"


class CountingHTTPServer(tornado.httpserver.HTTPServer):
    """Counts the TCP connections it accepts: the truth about keep-alive."""

    accepted = 0

    def handle_stream(self, stream: Any, address: Any) -> None:
        self.accepted += 1
        super().handle_stream(stream, address)


class FakeService:
    """The gpupool API as far as the spawner uses it, answering as the service would.

    Its answers are made by the service's own code (``real_answers``) from a real registry and
    usage index of the demo's cluster (``DOCUMENTS``); admission ids are ``adm0``, ``adm1``...
    in order. The test may say that pools are ``full`` (skipped, a 409 when none is left), or
    that the service is ``down``.
    """

    def __init__(self) -> None:
        self.state = real_answers.service_state(DOCUMENTS, real_answers.example_nodes())
        self.full: set[str] = set()
        self.admissions: list[dict[str, Any]] = []  # request bodies, in order
        self.released: list[str] = []
        self.down = False  # answer every request with a 503
        self.admissions_down = False  # answer admissions only with a 500
        self.url = ""
        self._server: CountingHTTPServer | None = None

    def launch_options(self, user: str, groups: list[str]) -> dict[str, Any]:
        return real_answers.launch_options(self.state, user, groups, MAX_GPUS)

    def admit(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = len(self.admissions) - 1  # this request is already recorded
        return real_answers.admission(
            self.state,
            body,
            admission_id=f"adm{n}",
            max_gpus=MAX_GPUS,
            full=self.full,
            full_reason=FULL_REASON,
        )

    async def start(self) -> FakeService:
        fake = self

        class Base(tornado.web.RequestHandler):
            def prepare(self) -> None:
                if fake.down:
                    raise tornado.web.HTTPError(503)
                if self.request.headers.get("Authorization") != f"token {TOKEN}":
                    raise tornado.web.HTTPError(403)

            def check_xsrf_cookie(self) -> None:
                pass

            def answer(self, code: int, body: Any) -> None:
                self.set_status(code)
                self.finish(json.dumps(body))

        class LaunchOptions(Base):
            def get(self) -> None:
                # the hub's spawner asks as an admin, for a user and their groups
                user = self.get_argument("user")
                groups = json.loads(self.get_argument("groups"))
                self.answer(200, fake.launch_options(user, groups))

        class Admissions(Base):
            def post(self) -> None:
                if fake.admissions_down:
                    raise tornado.web.HTTPError(500)
                body = json.loads(self.request.body)
                fake.admissions.append(body)
                self.answer(*fake.admit(body))

        class Admission(Base):
            def delete(self, admission_id: str) -> None:
                fake.released.append(admission_id)
                self.answer(*real_answers.release(fake.state, admission_id))

        prefix = "/services/gpupool/api/v1/"
        app = tornado.web.Application(
            [
                (prefix + "launch-options", LaunchOptions),
                (prefix + "admissions", Admissions),
                (prefix + "admissions/([^/]+)", Admission),
            ]
        )
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self._server = CountingHTTPServer(app)
        self._server.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/services/gpupool/"
        return self

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._server.accepted if self._server is not None else 0

    async def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            await self._server.close_all_connections()
