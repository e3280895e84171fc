"""What the service asks JupyterHub: a user's groups, and to stop a server it reclaims.

The service's own token (``JUPYTERHUB_API_TOKEN``) needs ``read:users:groups`` for the first
and ``delete:servers`` for the second; ``docs/service.md`` has the role. Groups are cached for a
short while: admission asks for them on every spawn. Requests go through
:mod:`jupyter_gpupool.http` (kept-alive connections; :meth:`HubAPI.close` when the service stops).
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from ...http import Answer, HTTPSession
from ...hubclient import server_path
from .. import clock
from ..errors import ApiError

log = logging.getLogger(__name__)


class HubAPI:
    """JupyterHub's REST API as the gpupool service uses it."""

    def __init__(
        self,
        api_url: str,
        token: str,
        groups_ttl: float = 60.0,
        request_timeout: float = 20.0,
    ):
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.groups_ttl = groups_ttl
        self.request_timeout = request_timeout
        self._groups: dict[str, tuple[float, tuple[str, ...]]] = {}
        # error answers are returned: each call says what a status means for it
        self._http = HTTPSession(
            self.api_url + "/", token, timeout=request_timeout, no_answer=self._no_answer
        )

    def _no_answer(self, why: str) -> ApiError:
        return ApiError(503, f"cannot reach JupyterHub at {self.api_url}: {why}")

    async def close(self) -> None:
        await self._http.close()

    async def _fetch(self, method: str, path: str) -> Answer:
        return await self._http.request(method, path)

    async def user_groups(self, user: str) -> tuple[str, ...]:
        """The user's groups (cached for ``groups_ttl`` seconds); ``()`` for an unknown user."""
        hit = self._groups.get(user)
        now = clock.now()
        if hit is not None and hit[0] > now:
            return hit[1]
        resp = await self._fetch("GET", f"users/{quote(user, safe='')}")
        if resp.code == 404:
            groups: tuple[str, ...] = ()
        elif resp.code == 200:
            groups = tuple(resp.json().get("groups") or ())
        else:
            raise ApiError(
                503,
                f"JupyterHub did not tell the groups of {user!r} (HTTP {resp.code}); "
                "the gpupool service needs the read:users:groups scope",
            )
        self._groups[user] = (now + self.groups_ttl, groups)
        return groups

    async def stop_server(self, user: str, server: str) -> int:
        """Ask the hub to stop a server; returns the hub's HTTP status (202/204 stopping, 404 none)."""
        resp = await self._fetch("DELETE", server_path(user, server))
        if resp.code >= 400 and resp.code != 404:
            log.warning(
                "JupyterHub refused to stop %s/%s: %s %s", user, server, resp.code, resp.body
            )
        return resp.code
