"""JupyterHub's REST API as the notebook side uses it: a user's servers, starting and stopping
named servers, and following a start's progress (the hub's event stream).

::

    hub = HubClient(os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"])
    options = {"pools": ["training-pool"], "gpus": 2}
    async for event in hub.start_and_follow("alice", "big", options):  # start, then progress
        print(event.get("progress"), event["message"])
    await hub.stop_server("alice", "big")
    await hub.close()

The same plumbing as :class:`~jupyter_gpupool.client.GPUPoolClient` (:mod:`jupyter_gpupool.http`:
kept-alive connections, an error carrying the status and the hub's message; status 0 when the
hub does not answer). The token needs the scopes of
:data:`~jupyter_gpupool.core.pools.placement.SERVER_TOKEN_SCOPES`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

from .http import Answer, HTTPSession, NoAnswer, error_message

__all__ = ["HubClient", "HubError", "parse_event_stream", "server_path"]


class HubError(Exception):
    """The hub answered with an error (``status``), or not at all (``status`` 0)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


def server_path(user: str, server: str) -> str:
    """The REST path of a user's server: ``users/NAME/server`` for the default one."""
    name = quote(user, safe="")
    if not server:
        return f"users/{name}/server"
    return f"users/{name}/servers/{quote(server, safe='')}"


def parse_event_stream(buffer: str) -> tuple[list[dict[str, Any]], str]:
    """The complete ``data:`` events in ``buffer`` (server-sent events, JSON data) and what is
    left of it (an event not yet ended by a blank line). Comments and other fields are skipped;
    data that is not JSON is given as ``{"message": text}``."""
    events: list[dict[str, Any]] = []
    text = buffer.replace("\r\n", "\n")
    *blocks, rest = text.split("\n\n")
    for block in blocks:
        data = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if not data:
            continue
        raw = "\n".join(data)
        try:
            event = json.loads(raw)
        except ValueError:
            event = {"message": raw}
        events.append(event if isinstance(event, dict) else {"message": str(event)})
    return events, rest


class HubClient:
    """Async client of JupyterHub's REST API (``api_url`` is ``$JUPYTERHUB_API_URL``)."""

    def __init__(self, api_url: str, token: str, *, request_timeout: float = 30.0):
        self.api_url = api_url.rstrip("/") + "/"
        self.token = token
        self.request_timeout = request_timeout
        self._http = HTTPSession(
            self.api_url,
            token,
            timeout=request_timeout,
            no_answer=self._no_answer,
            error=_error,
        )

    def _no_answer(self, why: str) -> HubError:
        return HubError(0, f"no answer from JupyterHub at {self.api_url}: {why}")

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> HubClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _fetch(self, method: str, path: str, body: Any = None) -> Answer:
        return await self._http.request(method, path, json_body=body)

    async def user(self, name: str) -> dict[str, Any]:
        """The user's model, with ``servers`` (name -> model) when the token may read them."""
        resp = await self._fetch("GET", f"users/{quote(name, safe='')}")
        return dict(resp.json())

    async def servers(self, user: str) -> dict[str, dict[str, Any]]:
        return dict((await self.user(user)).get("servers") or {})

    async def start_server(
        self, user: str, server: str, user_options: Mapping[str, Any] | None = None
    ) -> int:
        """Ask for a server; 201 when it is already up, 202 when it is starting. A start that
        fails quickly (no pool can take it) raises :class:`HubError` with the spawner's words."""
        body = {"user_options": dict(user_options or {})}
        resp = await self._fetch("POST", server_path(user, server), body)
        return int(resp.code)

    async def start_and_follow(
        self,
        user: str,
        server: str,
        user_options: Mapping[str, Any] | None = None,
        *,
        timeout: float = 600.0,
        poll: float = 0.2,
    ) -> AsyncIterator[dict[str, Any]]:
        """Ask for a server and yield its start's progress events, as :meth:`progress` does.

        JupyterHub answers the request only once the start is over or after its
        ``slow_spawn_timeout`` (10 s): progress asked for after that answer has only the last
        event, so every step of a quick start would be lost. The progress is followed while
        the request is still waiting instead. A start the hub refuses at once raises
        :class:`HubError` with the spawner's words, as :meth:`start_server` does; one that fails
        later ends with a ``failed`` event.
        """
        post = asyncio.ensure_future(self.start_server(user, server, user_options))
        try:
            while not post.done():
                await asyncio.wait({post}, timeout=poll)
                if post.done() or await self._starting(user, server):
                    break
            if post.done():
                post.result()  # a refusal raises here
            last: Mapping[str, Any] = {}
            async for event in self.progress(user, server, timeout):
                last = event
                yield event
            if not last.get("failed"):
                await post  # an error the stream did not end with
        finally:
            if not post.done():
                post.cancel()
            elif not post.cancelled():
                post.exception()  # retrieved: a failed start was reported as an event

    async def _starting(self, user: str, server: str) -> bool:
        """Whether the hub says the server is starting (so its progress can be followed)."""
        try:
            model = (await self.servers(user)).get(server) or {}
        except HubError:
            return False  # the start request will say what is wrong
        return model.get("pending") == "spawn"

    async def create_user(self, name: str) -> bool:
        """Add a user to the hub (the token needs ``admin:users``); False if they exist."""
        try:
            await self._fetch("POST", f"users/{quote(name, safe='')}", {})
        except HubError as e:
            if e.status == 409:
                return False
            raise
        return True

    async def stop_server(self, user: str, server: str) -> int:
        """Ask the hub to stop a server: 204 stopped, 202 stopping."""
        resp = await self._fetch("DELETE", server_path(user, server))
        return int(resp.code)

    async def progress(
        self, user: str, server: str, timeout: float = 600.0
    ) -> AsyncIterator[dict[str, Any]]:
        """The start's progress events (``progress``, ``message``; the last has ``ready`` and
        ``url``, or ``failed``) until the hub ends the stream."""
        path = server_path(user, server) + "/progress"
        try:
            async with self._http.stream("GET", path, timeout=timeout) as answer:
                if answer.code >= 400:
                    body = await answer.read(2000)
                    raise HubError(answer.code, error_message(body, answer.reason, answer.code))
                buffer = ""
                async for text in answer.chunks():
                    events, buffer = parse_event_stream(buffer + text)
                    for event in events:
                        yield event
        except NoAnswer as e:
            raise HubError(0, f"the progress of {user}/{server} stopped: {e}") from e


def _error(answer: Answer) -> HubError:
    return HubError(answer.code, answer.message())
