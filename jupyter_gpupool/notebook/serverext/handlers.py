"""``/gpupool/...``: what the JupyterLab status item and side panel ask this server.

Every route needs the server's own authentication (``@authenticated``: in a JupyterHub server,
the hub's OAuth for users allowed to access it); without it the answer is 403. The routes call
the gpupool service and the hub with the *server's* token (``$JUPYTERHUB_API_TOKEN``, whose
scopes the spawner chose), never with the browser's.

- ``GET /gpupool/status``: where this server runs (its environment; no network);
- ``GET /gpupool/pools``: the pools the user may use, free GPUs and quota (the service's
  launch options);
- ``GET /gpupool/servers``: the user's servers, the hub's view (ready, url) joined with the
  service's (pool, node, GPUs, over quota, and what the GPUs do: utilization, memory, idle);
- ``GET /gpupool/use``: what this server's GPUs do (utilization, memory, idle and when it will
  be stopped), with this server's clock (``now``) so that the page can say the time left on its
  own clock. A server without GPUs answers at once; a service that cannot be asked is a 200
  with ``error`` (the status item keeps its label).
- ``POST /gpupool/saved``: the lab saved its documents before a stop; the paths
  every page of this server reported for that notice are joined (two tabs of the lab save the
  same notebook once) and the service's ledger is told (``POST api/v1/servers/saved``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ...client import GPUPoolError
from ...core.pools.placement import Placement
from ...hubclient import HubError
from ..session import NO_POD, NotConfigured, ServerUse, UserSession


def pages_url(environ: Mapping[str, str]) -> str:
    """The service's pages (My GPUs) as the browser reaches them: under the hub's public URL
    when JupyterHub says it, else under its base URL on this page's host
    (``/services/gpupool/``)."""
    public = environ.get("JUPYTERHUB_PUBLIC_URL", "").strip()
    if public:
        return public.rstrip("/") + "/services/gpupool/"
    base = environ.get("JUPYTERHUB_BASE_URL", "").strip() or "/"
    return url_path_join(base, "services/gpupool/")


def status_body(placement: Placement, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The status item's data: the label it shows and the fields the side panel lists."""
    p = placement
    return {
        "label": p.label(),
        "in_pool": p.in_pool,
        "pool": p.pool,
        "platform": p.platform,
        "gpus": p.gpus,
        "gpu_type": p.gpu_type,
        # the shape admitted and its words ("MIG 1g.10gb of an A100-80G"), and what
        # the server counts in GPU-equivalents ("1/7"); null from a spawner without shapes
        "shape": p.shape,
        "shape_text": p.shape_text,
        "gpu_equivalents": p.gpu_equivalents,
        "over_quota": p.over_quota,
        "node": p.node,
        "user": p.user,
        "server": p.server,
        # the notifications' "Details" link
        "pages_url": pages_url(os.environ if environ is None else environ),
    }


#: The fields of a service row about what the server's GPUs do, passed on as they are.
USE_KEYS = (
    "gpu_utilization",
    "gpu_utilization_max",
    "gpu_memory_used_mib",
    "gpu_memory_total_mib",
    "measured_at",
    "idle",
    # the most urgent warning (idle, runtime, budget, booking): words, deadline, action
    "notice",
    # all of them, most urgent first: the lab announces each
    "notices",
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
                # what it has, in every surface's words ("MIG 1g.10gb of an A100-80G")
                "shape_text": pod.get("shape_text"),
                "over_quota": bool(pod.get("over_quota")),
                "state": pod.get("state")
                or ("running" if hub.get("ready") else hub.get("pending")),
                # what its GPUs do, as the service measures them (null when not measured)
                **{key: pod.get(key) for key in USE_KEYS},
            }
        )
    return {"servers": rows}


def use_body(use: ServerUse | None, now: float) -> dict[str, Any]:
    """``GET /gpupool/use``: the fields of this server's row about its GPUs (all null for
    ``None``, a server without GPUs: ``"gpus": 0``), the service's utilization ``source`` and
    ``problem``, why the service could not be asked (``error``), and this server's clock."""
    body: dict[str, Any] = {key: None for key in USE_KEYS}
    body.update(source=None, problem=None, error=None, now=now)
    if use is None:
        return {**body, "gpus": 0}
    if use.row is not None:
        body.update({key: use.row.get(key) for key in USE_KEYS})
    body.update(source=use.source, problem=use.problem, error=use.error)
    if use.error is None and use.row is None:
        body["error"] = NO_POD
    return body


async def server_use_body(placement: Placement) -> dict[str, Any]:
    """What this server's GPUs do, asked of the service with the server's token; a server
    without GPUs (or not in a pool) asks nothing."""
    if not placement.in_pool or placement.gpus <= 0:
        return use_body(None, time.time())
    async with UserSession(placement) as session:
        use = await session.server_use()
    return use_body(use, time.time())


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


class UseHandler(GPUPoolHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_json(await server_use_body(self.placement()))


def saved_key(notice: Any) -> str:
    """The notice a save was for, as the reports of several pages are joined: its kind and
    deadline."""
    if not isinstance(notice, Mapping):
        return ""
    return f"{notice.get('kind')}@{notice.get('deadline')}"


def join_saved(seen: dict[str, list[str]], body: Any) -> tuple[int, list[str], Any]:
    """A page's report (``{"count", "paths", "notice"}``) joined to those of the other pages
    for the same notice: ``(count, paths, notice)``. ValueError says what is wrong."""
    if not isinstance(body, Mapping):
        raise ValueError('the body is {"count": N, "paths": [...], "notice": {...}}')
    count, paths, notice = body.get("count"), body.get("paths", []), body.get("notice")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count is a whole number, not {count!r}")
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ValueError("paths is a list of the saved documents' paths")
    key = saved_key(notice)
    known = seen.setdefault(key, [])
    known.extend(p for p in paths if p not in known)
    # a page that counted documents it could not name adds them (paths tell only so much)
    return max(len(known), count), list(known), notice


class SavedHandler(GPUPoolHandler):
    @web.authenticated
    async def post(self) -> None:
        seen = self.settings.setdefault("gpupool_saved", {})
        try:
            count, paths, notice = join_saved(seen, json.loads(self.request.body or b"null"))
        except ValueError as e:
            return self.fail(400, str(e))

        async def record(session: UserSession) -> dict[str, Any]:
            return await session.record_saved(count, paths, notice)

        await self.answer(record)


def setup_handlers(web_app: Any) -> None:
    base = url_path_join(web_app.settings["base_url"], "gpupool")
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "status"), StatusHandler),
            (url_path_join(base, "pools"), PoolsHandler),
            (url_path_join(base, "servers"), ServersHandler),
            (url_path_join(base, "use"), UseHandler),
            (url_path_join(base, "saved"), SavedHandler),
        ],
    )
