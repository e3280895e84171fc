"""The handlers every route builds on: the service context, authentication, JSON answers.

:class:`ServiceHandler` carries the service context and JupyterHub's OAuth (pages and API alike);
:class:`APIHandler` authenticates in :meth:`~APIHandler.prepare` (401 without an identity, 403
without access to the service or without the route's scope), streams the body so an oversized one
is refused with a 400 before it is read, and writes errors as JSON ``{"status", "message", ...}``.

:class:`StreamedBody` is how both the API and the pages' forms take a body: at most
``max_body_size`` bytes are kept, a larger ``Content-Length`` is refused before any of it is read,
and a refusal decided before the body has arrived is answered only once the client has sent it
all (the bytes are thrown away as they come). Answered earlier, tornado closes the connection
while the client still writes: a proxy in front (the demo's) then gets "Broken pipe" or a reset
instead of the answer, and tells its client 503.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from tornado import web

from ...core.usage.amounts import json_default
from ..errors import ApiError
from .auth import ADMIN_SCOPE, USE_SCOPE, Caller, access_scope_text

if TYPE_CHECKING:
    from ..context import ServiceContext


class ServiceHandler(HubOAuthenticated, web.RequestHandler):
    """Base of every handler: the service context and its HubOAuth."""

    ctx: ServiceContext

    def initialize(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.hub_auth = ctx.hub_auth

    def access_refusal(self, model: dict[str, Any]) -> str | None:
        """Why the hub's answer about the caller does not let them into this service, or None.

        JupyterHub's own check (``check_hub_user``): the caller's scopes must include one of the
        service's access scopes (``$JUPYTERHUB_OAUTH_ACCESS_SCOPES``, which the hub sets for a
        managed service to ``access:services`` and ``access:services!service=NAME``). The pages
        and the API both ask it, so a token that may not open the pages may not use the API.
        """
        try:
            self.check_hub_user(model)
        except UserNotAllowed:
            scope = access_scope_text(self.hub_scopes or ())
            return (
                f"{model.get('kind', 'user')} {model.get('name')} may not use the gpupool "
                f"service: it needs the scope {scope}"
            )
        return None

    def _request_summary(self) -> str:
        # tornado logs refused requests (HTTPError) with this; the query may hold ?token=...
        return f"{self.request.method} {self.request.path} ({self.request.remote_ip})"


class StreamedBody(ServiceHandler):
    """A body streamed in (subclasses are ``@web.stream_request_body``), at most
    ``max_body_size`` bytes of it kept; refusals wait for the body to have arrived."""

    def start_body(self) -> None:
        """Call first in ``prepare``."""
        self._chunks: list[bytes] = []
        self._size = 0
        self._keep = True

    def body_too_large(self, what: str) -> ApiError | None:
        """The 400 for a ``Content-Length`` over ``max_body_size`` (``what``: "the request
        body"), or None."""
        length = self.request.headers.get("Content-Length", "")
        limit = self.ctx.max_body_size
        # at most 20 digits: no body is longer, and int() of thousands of digits raises
        if length.isascii() and length.isdigit() and (len(length) > 20 or int(length) > limit):
            return ApiError(400, f"{what} is {length[:20]} bytes; at most {limit} are accepted")
        return None

    def expects_body(self) -> bool:
        length = self.request.headers.get("Content-Length", "0")
        return "Transfer-Encoding" in self.request.headers or length not in ("", "0")

    def after_body(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` once the whole body has arrived, before this request's method (tornado
        calls the method then, and has no hook of its own there); it may raise a refusal."""
        name = (self.request.method or "GET").lower()
        method = getattr(self, name)

        async def stepped(*args: Any, **kwargs: Any) -> None:
            await step()
            result = method(*args, **kwargs)
            if result is not None:
                await result

        setattr(self, name, stepped)

    def refuse_after_body(self, error: Exception) -> None:
        """Answer ``error`` once the client has sent its body, which is thrown away as it comes
        (up to the server's cap: past it, tornado refuses the request itself)."""
        self._keep = False

        async def refuse() -> None:
            raise error

        self.after_body(refuse)

    def data_received(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._keep and self._size <= self.ctx.max_body_size:
            self._chunks.append(chunk)

    @property
    def body(self) -> bytes:
        limit = self.ctx.max_body_size
        if self._size > limit:
            raise ApiError(400, f"the request body is over {limit} bytes")
        return b"".join(self._chunks)


@web.stream_request_body
class APIHandler(StreamedBody):
    """JSON API handler: authentication, scopes, bounded bodies, JSON errors."""

    #: Scope each HTTP method needs; methods not listed need the admin scope.
    scopes: Mapping[str, str] = {"GET": USE_SCOPE}
    caller: Caller

    async def prepare(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.start_body()
        try:
            await self._admit()
        except (ApiError, web.HTTPError) as e:
            if not self.expects_body():
                raise
            self.refuse_after_body(e)

    async def _admit(self) -> None:
        """Who asks, whether they may, and whether the body is not too large."""
        try:
            model = await self.hub_auth.get_user(self, sync=False)
        except web.HTTPError as e:
            raise ApiError(503, f"cannot check the token with JupyterHub: {e.log_message}") from e
        if not model:
            raise ApiError(
                401,
                "authentication required: send a JupyterHub API token (Authorization: token ...)",
            )
        refusal = self.access_refusal(model)
        if refusal is not None:
            raise ApiError(403, refusal)
        self.caller = Caller.from_model(model)
        scope = self.scopes.get(self.request.method or "", ADMIN_SCOPE)
        if not self.caller.allows(scope):
            raise ApiError(403, f"{self.caller.kind} {self.caller.name} lacks the scope {scope}")
        too_large = self.body_too_large("the request body")
        if too_large is not None:
            raise too_large

    def write_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(value, default=json_default))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            body = exc.body()
        elif isinstance(exc, web.HTTPError):
            body = {"status": status_code, "message": exc.log_message or exc.reason or ""}
        else:
            body = {"status": status_code, "message": self._reason}
            if status_code >= 500:
                body["message"] = "internal error in the gpupool service; see its log"
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(body, default=json_default))

    # --- who is asking ---------------------------------------------------------------------------

    async def caller_groups(self) -> tuple[str, ...]:
        if self.caller.groups is not None:
            return self.caller.groups
        return await self.ctx.user_groups(self.caller.name)

    def record(self, what: str) -> None:
        """Log a change with who made it (:mod:`.changelog`)."""
        self.ctx.changes.record(self.caller.kind, self.caller.name, what)

    async def view_of(self) -> tuple[str | None, tuple[str, ...]]:
        """``(None, ())`` for an admin (everything), else the caller's name and groups."""
        if self.caller.is_admin:
            return None, ()
        return self.caller.name, await self.caller_groups()
