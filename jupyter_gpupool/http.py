"""One way to ask an HTTP API, shared by every client of the gpupool service and of JupyterHub.

:class:`~jupyter_gpupool.client.GPUPoolClient` (the service's API),
:class:`~jupyter_gpupool.hubclient.HubClient` (the hub's, from a notebook) and
:class:`~jupyter_gpupool.service.cluster.hubapi.HubAPI` (the hub's, from the service) all send a token,
JSON bodies and a timeout, and tell "no answer at all" apart from "an answer that is an error";
each turns those into its own exceptions (:class:`GPUPoolError`, :class:`HubError`,
:class:`ApiError`), through the two callables given to :class:`HTTPSession`.

Connections are kept alive: one :class:`aiohttp.ClientSession` per session object, with a pool
of at most ``max_connections`` connections, so that the questions a spawner asks in one start
(launch options, admission, a release and the next admission) go over one connection instead of
one connection each, as tornado's simple HTTP client did (it closes the connection after every
request). Idle connections are closed by aiohttp after its keep-alive timeout (15 s), so an
object that is not closed holds no socket for long; it must still be closed
(:meth:`HTTPSession.close`, or ``async with``), else aiohttp reports an unclosed session.

::

    http = HTTPSession(url, token, timeout=30, no_answer=lambda why: MyError(0, why))
    answer = await http.request("GET", "api/v1/pools")      # raises MyError(0, ...) unanswered
    data = answer.json()
    await http.close()
"""

from __future__ import annotations

import asyncio
import codecs
import errno as errnos
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from yarl import URL

__all__ = ["Answer", "HTTPSession", "NoAnswer", "Stream", "auth_headers", "describe"]


class NoAnswer(Exception):
    """No HTTP answer at all: the connection was refused, reset or closed, or it timed out."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read to the end (the names are tornado's ``HTTPResponse``'s)."""

    code: int
    reason: str
    body: bytes
    url: str

    def json(self) -> Any:
        """The decoded JSON body; None for an empty body."""
        return json.loads(self.body) if self.body else None

    def text(self) -> str:
        return self.body.decode("utf-8")

    def document(self) -> dict[str, Any]:
        """The body as a JSON object (an error's ``message``, ``status``...), else ``{}``."""
        return error_document(self.body)

    def message(self) -> str:
        """What the server says went wrong: its JSON ``message``, else the status's reason."""
        return error_message(self.body, self.reason, self.code)


def error_document(body: bytes | None) -> dict[str, Any]:
    try:
        data = json.loads(body or b"")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def error_message(body: bytes | None, reason: str | None, code: int) -> str:
    """The JSON ``message`` of an error body (JupyterHub's and the service's errors have one),
    else the reason phrase, else ``HTTP <code>``."""
    message = error_document(body).get("message")
    return str(message) if message else (reason or f"HTTP {code}")


def auth_headers(token: str) -> dict[str, str]:
    """JupyterHub's token header (the service checks the same tokens); none without a token."""
    return {"Authorization": f"token {token}"} if token else {}


def describe(error: BaseException, timeout: float | None = None) -> str:
    """Why there was no answer, in the words tornado's client used (``[Errno 111] Connection
    refused``), which the CLI shows as the reason it cannot reach the service."""
    if isinstance(error, asyncio.TimeoutError):
        return f"timed out after {timeout:g} seconds" if timeout else "timed out"
    if isinstance(error, aiohttp.ClientConnectorError):
        error = error.os_error
    number = error.errno if isinstance(error, OSError) else None
    if isinstance(number, int) and number in errnos.errorcode:
        return f"[Errno {number}] {os.strerror(number)}"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    return str(error) or type(error).__name__


#: What an unanswered request raises: aiohttp's errors, sockets' errors and timeouts.
_UNANSWERED = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


class Stream:
    """An answer being read as it comes (server-sent events): ``code``, ``reason``, ``chunks()``."""

    def __init__(self, response: aiohttp.ClientResponse, timeout: float):
        self._response = response
        self._timeout = timeout
        self.code = response.status
        self.reason = response.reason or ""

    async def chunks(self) -> AsyncIterator[str]:
        """The body as text, as it arrives (a character split between chunks waits for its
        end). Raises :class:`NoAnswer` if the connection breaks or the timeout passes."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            async for chunk in self._response.content.iter_any():
                if text := decoder.decode(chunk):
                    yield text
        except _UNANSWERED as e:
            raise NoAnswer(describe(e, self._timeout)) from e
        if rest := decoder.decode(b"", final=True):
            yield rest

    async def read(self, limit: int = 65536) -> bytes:
        """The first ``limit`` bytes of the body (for an error's message)."""
        try:
            return await self._response.content.read(limit)
        except _UNANSWERED as e:
            raise NoAnswer(describe(e, self._timeout)) from e


class HTTPSession:
    """Requests to one base URL with one token, over kept-alive connections.

    ``no_answer(why)`` makes the exception raised when there is no answer; ``error(answer)``,
    if given, the one raised for an answer of 400 or more (else such answers are returned).
    The aiohttp session is made on the first request, in the running event loop, and made
    again after :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float,
        no_answer: Callable[[str], Exception],
        error: Callable[[Answer], Exception] | None = None,
        max_connections: int = 10,
    ):
        self.base_url = base_url
        self.token = token
        self.timeout = timeout
        self.max_connections = max_connections
        self._no_answer = no_answer
        self._error = error
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                headers=auth_headers(self.token),
                # tornado's client kept no cookies: a token is the only credential sent
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    def url(self, path: str, params: Mapping[str, str | None] | None = None) -> str:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.base_url + path + (f"?{urlencode(query)}" if query else "")

    @property
    def is_open(self) -> bool:
        """Whether an aiohttp session is open (made by a request and not closed since)."""
        return self._session is not None and not self._session.closed

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> HTTPSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _options(
        self,
        json_body: Any,
        text: str | None,
        content_type: str,
        accept: str,
        timeout: float,
    ) -> dict[str, Any]:
        headers = {"Accept": accept}
        data: bytes | None = None
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif text is not None:
            data = text.encode("utf-8")
            headers["Content-Type"] = content_type
        return {
            "headers": headers,
            "data": data,
            "timeout": aiohttp.ClientTimeout(total=timeout),
        }

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        text: str | None = None,
        content_type: str = "application/json",
        params: Mapping[str, str | None] | None = None,
        timeout: float | None = None,
        accept: str = "application/json",
    ) -> Answer:
        """One request to ``base_url + path``, its answer read to the end.

        ``json_body`` (any JSON value but None) or ``text`` (sent as ``content_type``) is the
        body. Raises ``no_answer(...)`` without an answer and ``error(answer)`` for an error.
        """
        url = self.url(path, params)
        seconds = timeout or self.timeout
        options = self._options(json_body, text, content_type, accept, seconds)
        try:
            # encoded: the paths are quoted already (a "/" in a name stays %2F)
            async with self._client().request(method, URL(url, encoded=True), **options) as r:
                answer = Answer(r.status, r.reason or "", await r.read(), url)
        except _UNANSWERED as e:
            raise self._no_answer(describe(e, seconds)) from e
        if answer.code >= 400 and self._error is not None:
            raise self._error(answer)
        return answer

    @asynccontextmanager
    async def stream(
        self, method: str, path: str, *, timeout: float, accept: str = "text/event-stream"
    ) -> AsyncIterator[Stream]:
        """A request whose answer is read as it comes; the connection goes back to the pool
        (or is closed, if the answer was not read to its end) when the block is left.
        Raises :class:`NoAnswer` without an answer; error answers are given as they are."""
        options = self._options(None, None, "", accept, timeout)
        try:
            response = await self._client().request(
                method, URL(self.url(path), encoded=True), **options
            )
        except _UNANSWERED as e:
            raise NoAnswer(describe(e, timeout)) from e
        try:
            yield Stream(response, timeout)
        finally:
            response.release()
