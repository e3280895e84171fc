"""What a user can do from inside a notebook server: see the pools, launch and release servers.

The magics, the launch widget and the JupyterLab server extension all go through
:class:`UserSession`, built from the server's environment (:class:`~.placement.Placement`):
the gpupool service through :class:`~.client.GPUPoolClient`, the hub through
:class:`~.hubclient.HubClient`, both with the server's own ``$JUPYTERHUB_API_TOKEN``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..client import GPUPoolClient, GPUPoolError
from ..core.pools.placement import Placement
from ..hubclient import HubClient, HubError

__all__ = [
    "LaunchResult",
    "NotConfigured",
    "ServerUse",
    "UserSession",
    "default_server_name",
    "own_row",
]

ProgressCallback = Callable[[Mapping[str, Any]], None]
#: Seconds a launch follows the hub's progress (JupyterHub's client side; the spawner's own
#: ``start_timeout`` ends a start sooner). A start that waits in line (``"queue": true``) may
#: wait as long as the admin's start timeout allows, which the docs advise to make long.
FOLLOW_TIMEOUT = 600.0
QUEUED_FOLLOW_TIMEOUT = 24 * 3600.0


class NotConfigured(Exception):
    """The environment lacks what is needed (not in a JupyterHub server, no service URL)."""


@dataclass(frozen=True)
class LaunchResult:
    """How a launch ended: ``ready`` with the server's ``url``, or not with the hub's words."""

    server: str
    ready: bool
    message: str
    url: str | None = None
    progress: int = 0


@dataclass(frozen=True)
class ServerUse:
    """What the service says of this server's GPUs: its row of ``GET api/v1/servers`` (None
    when the service counts no pod of it), the answer's utilization ``source`` and ``problem``;
    or ``error``, why the service could not be asked."""

    row: Mapping[str, Any] | None = None
    source: str | None = None
    problem: str | None = None
    error: str | None = None


#: Why the utilization of a server whose pod the service does not count is unknown.
NO_POD = "the gpupool service counts no pod of this server"


def own_row(rows: Sequence[Mapping[str, Any]], placement: Placement) -> Mapping[str, Any] | None:
    """This server's row among the user's: same server name, the pod of this server's admission
    first, then one not terminating (a restarted server may have two pods a moment)."""
    mine = [r for r in rows if str(r.get("server") or "") == placement.server]
    if placement.admission:
        mine.sort(key=lambda r: r.get("admission") != placement.admission)
    live = [r for r in mine if r.get("state") != "terminating"]
    found = live or mine
    return found[0] if found else None


def default_server_name(pools: list[str] | tuple[str, ...], gpus: int) -> str:
    """A name for a server launched without one: ``training-pool-2gpu``, ``compute-pool-cpu``
    (the first pool of the list and the GPU count), ``gpupool-1gpu`` without pools."""
    first = pools[0] if pools else "gpupool"
    return f"{first}-{gpus}gpu" if gpus else f"{first}-cpu"


class UserSession:
    """The server's user as a client of the gpupool service and the hub."""

    def __init__(self, placement: Placement, *, request_timeout: float = 30.0):
        self.placement = placement
        self.request_timeout = request_timeout
        self._service: GPUPoolClient | None = None
        self._hub: HubClient | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> UserSession:
        return cls(Placement.from_environ(os.environ if environ is None else environ))

    @property
    def user(self) -> str:
        if not self.placement.user:
            raise NotConfigured(
                "not in a JupyterHub server: JUPYTERHUB_USER is not set "
                "(the magics work in servers started by JupyterHub)"
            )
        return self.placement.user

    def service(self) -> GPUPoolClient:
        if self._service is None:
            if not self.placement.service_url:
                raise NotConfigured(
                    "the gpupool service's address is unknown: GPUPOOL_SERVICE_URL is not set "
                    "(GPUPoolSpawner sets it; see docs/notebook.md)"
                )
            if not self.placement.token:
                raise NotConfigured("JUPYTERHUB_API_TOKEN is not set")
            self._service = GPUPoolClient(
                self.placement.service_url,
                self.placement.token,
                request_timeout=self.request_timeout,
            )
        return self._service

    def hub(self) -> HubClient:
        if self._hub is None:
            if not self.placement.hub_api_url or not self.placement.token:
                raise NotConfigured(
                    "not in a JupyterHub server: JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN "
                    "are not set"
                )
            self._hub = HubClient(
                self.placement.hub_api_url,
                self.placement.token,
                request_timeout=self.request_timeout,
            )
        return self._hub

    async def close(self) -> None:
        for client in (self._service, self._hub):
            if client is not None:
                await client.close()
        self._service = self._hub = None

    async def __aenter__(self) -> UserSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- questions -------------------------------------------------------------------------------

    async def launch_options(self) -> dict[str, Any]:
        """The pools this user may use with free GPUs and their quota (the service's answer)."""
        return await self.service().launch_options()

    async def pod_servers(self) -> list[dict[str, Any]]:
        """The user's server pods as the service counts them (pool, node, GPUs, over quota)."""
        return await self.service().servers(user=self.user)

    async def server_use(self) -> ServerUse:
        """This server's row of ``GET api/v1/servers?user=`` (one request) with the answer's
        utilization source and problem; a service that cannot be asked is an ``error``."""
        try:
            answer = await self.service().request(
                "GET", "api/v1/servers", params={"user": self.user}
            )
            body = answer.json()
            rows = list(body["servers"])
        except SESSION_ERRORS as e:
            return ServerUse(error=getattr(e, "message", None) or str(e))
        except (ValueError, KeyError, TypeError) as e:
            return ServerUse(error=f"the gpupool service's answer is not understood: {e}")
        util = body.get("utilization") or {}
        return ServerUse(own_row(rows, self.placement), util.get("source"), util.get("problem"))

    async def record_saved(
        self, count: int, paths: Sequence[str], notice: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Tell the service that this server's lab saved ``count`` documents (``paths``)
        before the stop ``notice`` announced (``POST api/v1/servers/saved``): the ledger keeps
        it on this server's session, and the stop says so."""
        self.user  # noqa: B018 - NotConfigured outside a JupyterHub server
        body = {
            "server": self.placement.server,
            "count": count,
            "paths": list(paths),
            "notice": dict(notice) if notice else None,
        }
        answer = await self.service().request("POST", "api/v1/servers/saved", json_body=body)
        return dict(answer.json())

    async def queue(self) -> list[dict[str, Any]]:
        """The user's requests waiting in line for GPUs, first in line first (the service's
        ``GET api/v1/queue`` answers a user's token with their own entries)."""
        return list((await self.service().queue()).get("queue") or [])

    async def hub_servers(self) -> dict[str, dict[str, Any]]:
        """The user's servers as the hub knows them (name -> ``ready``, ``pending``, ``url``...)."""
        return await self.hub().servers(self.user)

    # --- actions ---------------------------------------------------------------------------------

    async def launch(
        self,
        server: str,
        options: Mapping[str, Any],
        on_progress: ProgressCallback | None = None,
        *,
        wait: bool = True,
    ) -> LaunchResult:
        """Start a named server with ``user_options`` and follow the hub's progress stream.

        Each event goes to ``on_progress``. Without ``wait`` the result comes as soon as the hub
        accepted the start. A start the hub refuses at once (no pool can take it, bad options)
        is a result that is not ready, with the hub's message. A start that waits in line
        (``"queue": true`` in ``options``) is followed for as long as the hub keeps it going.
        """
        if server == self.placement.server:
            return LaunchResult(
                server, False, f"{_server_words(server)} is this server: name another one"
            )
        if not wait:
            try:
                code = await self.hub().start_server(self.user, server, options)
            except HubError as e:
                return LaunchResult(server, False, e.message)
            return LaunchResult(server, code == 201, "starting" if code == 202 else "ready")
        last: Mapping[str, Any] = {}
        try:
            # followed while the hub's answer to the start is pending (a quick start's steps
            # would be lost otherwise); the hub ends it after the event that says ready or failed
            timeout = QUEUED_FOLLOW_TIMEOUT if options.get("queue") else FOLLOW_TIMEOUT
            follow = self.hub().start_and_follow(self.user, server, options, timeout=timeout)
            async for event in follow:
                last = event
                if on_progress is not None:
                    on_progress(event)
        except HubError as e:
            return LaunchResult(server, False, e.message, progress=_progress(last))
        if last.get("ready"):
            return LaunchResult(
                server, True, str(last.get("message") or "ready"), last.get("url"), 100
            )
        return LaunchResult(
            server,
            False,
            str(last.get("message") or "the start ended without the server"),
            progress=_progress(last),
        )

    async def release(self, server: str) -> str:
        """Stop one of the user's servers; the words to show."""
        if server == self.placement.server:
            raise NotConfigured(
                f"{_server_words(server)} is this server: stop it from the hub's home page"
            )
        try:
            code = await self.hub().stop_server(self.user, server)
        except HubError as e:
            if e.status == 404:
                return f"{_server_words(server)} is not running"
            raise
        return f"{_server_words(server)} {'is stopping' if code == 202 else 'stopped'}"


def _server_words(server: str) -> str:
    return f"server {server!r}" if server else "the default server"


def _progress(event: Mapping[str, Any]) -> int:
    try:
        return int(event.get("progress") or 0)
    except (TypeError, ValueError):
        return 0


#: Errors the callers turn into a message for the user.
SESSION_ERRORS = (NotConfigured, GPUPoolError, HubError)
