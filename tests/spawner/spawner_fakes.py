"""Stand-ins for the spawner tests: a JupyterHub user and a scripted gpupool service.

(A module of its own, so test modules import them by a name no other test directory uses.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web

from jupyter_gpupool.admission import AdmissionRequest, build_overrides
from jupyter_gpupool.pools import Pool, Registry

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


def pool_row(name: str, gpu_type: str = "", node_gpus: int = 0, nodes: int = 1) -> dict:
    """A row of launch-options as the service writes it."""
    return {
        "name": name,
        "description": f"{name} for tests",
        "status": "active",
        "gpu_types": [gpu_type] if gpu_type else [],
        "gpu_total": node_gpus * nodes,
        "gpu_available": node_gpus * nodes,
        "largest_free_block": node_gpus,
        "largest_node_gpus": node_gpus,
        "node_count": nodes,
        "schedulable_nodes": nodes,
        "limits": {"max_gpus": None, "min_gpus": 0, "allowed_gpus": []},
        "quota": {"managed": False, "borrowing": False, "within_quota": 0, "available": 0},
    }


#: The example cluster's pools, as launch-options reports them to alice.
CATALOG = {
    "user": "alice",
    "groups": ["ml-research"],
    "default_pools": ["training-pool", "inference-pool"],
    "restricted_pools": ["secret-pool"],
    "max_gpus": 64,
    "pools": [
        pool_row("compute-pool", nodes=2),
        pool_row("dev-pool", "RTX4090-24G", 4),
        pool_row("inference-pool", "A10-24G", 4, 2),
        pool_row("training-pool", "A100-80G", 8, 2),
    ],
}
GPU_TYPES = {r["name"]: (r["gpu_types"] or [""])[0] for r in CATALOG["pools"]}


class FakeService:
    """The gpupool API as far as the spawner uses it, answering as the test says.

    By default it admits to the first pool of the request not in ``full`` (a 409 when none is
    left), with the overrides the real admission builds.
    """

    def __init__(self) -> None:
        self.catalog: dict[str, Any] = json.loads(json.dumps(CATALOG))
        self.full: set[str] = set()
        self.admissions: list[dict[str, Any]] = []  # request bodies, in order
        self.released: list[str] = []
        self.down = False  # answer every request with a 503
        self.admissions_down = False  # answer admissions only with a 500
        self.url = ""
        self._server: tornado.httpserver.HTTPServer | None = None

    def admit(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        pools = body["pools"] or self.catalog["default_pools"]
        skipped = []
        for name in pools:
            if name in self.full:
                skipped.append({"pool": name, "reason": "no node has 2 free GPUs"})
                continue
            n = len(self.admissions) - 1  # this request is already recorded
            request = AdmissionRequest(
                user=body["user"],
                groups=tuple(body["groups"]),
                gpus=body["gpus"],
                server=body["server"],
                admission_id=f"adm{n}",
            )
            overrides = build_overrides(
                registry=Registry(),
                pool=Pool(name),
                platform=None,
                request=request,
                charged="group:ml-research",
                over_quota=name == "dev-pool",
            )
            return 201, {
                "id": f"adm{n}",
                "pool": name,
                "gpu_type": GPU_TYPES.get(name) or None,
                "over_quota": name == "dev-pool",
                "charged": "group:ml-research",
                "skipped": skipped,
                "user": body["user"],
                "server": body["server"],
                "gpus": body["gpus"],
                "overrides": overrides,
                "reclaimed": [],
            }
        return 409, {"status": 409, "message": "no pool can take it", "skipped": skipped}

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
                self.answer(200, fake.catalog)

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
                self.answer(200, {"released": admission_id})

        prefix = "/services/gpupool/api/v1/"
        app = tornado.web.Application(
            [
                (prefix + "launch-options", LaunchOptions),
                (prefix + "admissions", Admissions),
                (prefix + "admissions/([^/]+)", Admission),
            ]
        )
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self._server = tornado.httpserver.HTTPServer(app)
        self._server.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/services/gpupool/"
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            await self._server.close_all_connections()
