"""``/gpupool/...``: what the JupyterLab status item and side panel ask this server.

Every route needs the server's own authentication (``@authenticated``: in a JupyterHub server,
the hub's OAuth for users allowed to access it); without it the answer is 403. The routes call
the gpupool service and the hub with the *server's* token (``$JUPYTERHUB_API_TOKEN``, whose
scopes the spawner chose), never with the browser's.

- ``GET /gpupool/status``: where this server runs (its environment; no network);
- ``GET /gpupool/pools``: the pools the user may use, free GPUs and quota (the service's
  launch options);
- ``GET /gpupool/servers``: the user's servers, the hub's view (ready, url) joined with the
  service's (pool, node, GPUs, over quota, and what the GPUs do: utilization, memory, idle).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ...client import GPUPoolError
from ...core.placement import Placement
from ...hubclient import HubError
from ..session import NotConfigured, UserSession


def status_body(placement: Placement) -> dict[str, Any]:
    """The status item's data: the label it shows and the fields the side panel lists."""
    p = placement
    return {
        "label": p.label(),
        "in_pool": p.in_pool,
        "pool": p.pool,
        "platform": p.platform,
        "gpus": p.gpus,
        "gpu_type": p.gpu_type,
        "over_quota": p.over_quota,
        "node": p.node,
        "user": p.user,
        "server": p.server,
    }


#: The fields of a service row about what the server's GPUs do, passed on as they are.
USE_KEYS = (
    "gpu_utilization",
    "gpu_utilization_max",
    "gpu_memory_used_mib",
    "gpu_memory_total_mib",
    "measured_at",
    "idle",
)


def servers_body(
    hub_servers: Mapping[str, Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], this: str
) -> dict[str, Any]:
    """One row per server of the hub, with its pod's pool, node and GPUs where the service
    counts one; ``this`` marks the server answering."""
    by_name = {str(p.get("server") or ""): p for p in pods}
    rows = []
    for name in sorted(hub_servers):
        hub = hub_servers[name]
        pod = by_name.get(name, {})
        options = hub.get("user_options") or {}
        rows.append(
            {
                "name": name,
                "this": name == this,
                "ready": bool(hub.get("ready")),
                "pending": hub.get("pending"),
                "url": hub.get("url"),
                "pool": pod.get("pool") or options.get("pool"),
                "node": pod.get("node"),
                "gpus": pod.get("gpus", options.get("gpus")),
                "over_quota": bool(pod.get("over_quota")),
                "state": pod.get("state")
                or ("running" if hub.get("ready") else hub.get("pending")),
                # what its GPUs do, as the service measures them (null when not measured)
                **{key: pod.get(key) for key in USE_KEYS},
            }
        )
    return {"servers": rows}


class GPUPoolHandler(APIHandler):
    """Answers JSON; a missing setting is a 503 and a failed call a 502, with the words."""

    def placement(self) -> Placement:
        return Placement.from_environ(os.environ)

    def write_json(self, body: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def fail(self, status: int, message: str) -> None:
        self.set_status(status)
        self.write_json({"status": status, "message": message})

    async def answer(self, make: Any) -> None:
        try:
            async with UserSession(self.placement()) as session:
                body = await make(session)
        except NotConfigured as e:
            return self.fail(503, str(e))
        except (GPUPoolError, HubError) as e:
            return self.fail(502, e.message)
        self.write_json(body)


class StatusHandler(GPUPoolHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_json(status_body(self.placement()))


class PoolsHandler(GPUPoolHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.answer(lambda session: session.launch_options())


class ServersHandler(GPUPoolHandler):
    @web.authenticated
    async def get(self) -> None:
        this = self.placement().server

        async def servers(session: UserSession) -> dict[str, Any]:
            hub = await session.hub_servers()
            try:
                pods = await session.pod_servers()
            except GPUPoolError:
                pods = []  # the hub's list alone still helps
            return servers_body(hub, pods, this)

        await self.answer(servers)


def setup_handlers(web_app: Any) -> None:
    base = url_path_join(web_app.settings["base_url"], "gpupool")
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "status"), StatusHandler),
            (url_path_join(base, "pools"), PoolsHandler),
            (url_path_join(base, "servers"), ServersHandler),
        ],
    )
