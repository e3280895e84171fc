"""The service's pages, as served: login, the scope a page needs, rendering, flash messages.

Pages are server-rendered from the templates in ``templates/`` (which extend JupyterHub's
``page.html``, see :mod:`.templating`), from the same view functions as the JSON API; a small
script (``static/gpupool.js``) then keeps their numbers current by polling that API.

Visitors log in through JupyterHub OAuth (they are sent to the hub and come back through
``oauth_callback``) and need the service's access scope. The page for every user
(``{prefix}``) needs ``custom:gpupool:use``; the others need ``custom:gpupool:admin``. Forms
are POSTed with JupyterHub's XSRF token, and every change is logged with who made it
(:mod:`.changelog`). A form's body obeys ``max_body_size`` as the API's does: a larger one is
refused before it is read (streamed, as :class:`~..base.StreamedBody` says); the login check,
which reads the XSRF token from the form, runs once the form has arrived.

This module holds what every page shares (:class:`PageHandler`); the pages that show are in
:mod:`.user`, :mod:`.pools`, :mod:`.nodes`, :mod:`.reports` and :mod:`.idle` (with the parts
they share in :mod:`.parts`), the admin page and its form actions in :mod:`.admin`.
"""

from __future__ import annotations

import time
from typing import Any

from jupyterhub.services.auth import HubOAuthCallbackHandler
from markupsafe import Markup
from tornado import httputil, web

from .... import __version__
from ...errors import ApiError
from ..auth import ADMIN_SCOPE, USE_SCOPE, Caller
from ..base import StreamedBody
from .templating import hub_namespace

FLASH_COOKIE = "gpupool-flash"
REFRESH_SECONDS = 5


@web.stream_request_body
class PageHandler(StreamedBody):
    """A page: OAuth login, the scope it needs, and rendering with the hub's look."""

    scope = USE_SCOPE
    nav = ""
    title = "GPU pools"
    live = False  # whether the page refreshes itself
    caller: Caller | None = None

    async def prepare(self) -> None:
        self.start_body()
        # nobody until the login check says: left unset, a refusal rendered before it would ask
        # the hub who this is synchronously (HubOAuthenticated.get_current_user), in this loop
        self.current_user = None
        too_large = self.body_too_large("The form")
        if too_large is not None:
            self.refuse_after_body(too_large)
        elif self.request.method in ("GET", "HEAD") or not self.expects_body():
            await self._log_in()
        else:
            self.after_body(self._form_then_log_in)

    async def _form_then_log_in(self) -> None:
        body = self.body  # a 400 when a body without a length went over the limit
        request = self.request
        request.body = body
        httputil.parse_body_arguments(
            request.headers.get("Content-Type", ""),
            body,
            request.body_arguments,
            request.files,
            request.headers,
        )
        for name, values in request.body_arguments.items():
            request.arguments.setdefault(name, []).extend(values)
        await self._log_in()

    async def _log_in(self) -> None:
        try:
            model = await self.hub_auth.get_user(self, sync=False)
        except web.HTTPError as e:
            raise web.HTTPError(
                503, f"cannot check your login with JupyterHub: {e.log_message}"
            ) from e
        if model:
            refusal = self.access_refusal(model)
            if refusal is not None:
                raise ApiError(403, refusal)
        if not model:
            if self.request.method in ("GET", "HEAD"):
                self.redirect(self.get_login_url())
                return
            self.check_xsrf_cookie()  # the likely reason a logged-in browser is not recognised
            raise web.HTTPError(403, "log in to JupyterHub first")
        self.current_user = model
        self.caller = Caller.from_model(model)
        if not self.caller.allows(self.scope):
            raise web.HTTPError(
                403,
                f"this page needs the {self.scope} scope, which {self.caller.kind} "
                f"{self.caller.name} does not have",
            )

    # --- rendering -------------------------------------------------------------------------------

    @property
    def svc(self) -> str:
        return self.ctx.base_url

    def namespace(self) -> dict[str, Any]:
        caller = self.caller
        ns = hub_namespace(
            hub_prefix=self.hub_auth.hub_prefix,
            service_prefix=self.svc,
            user=caller.name if caller else "",
            scopes=sorted(caller.scopes) if caller else [],
            xsrf_token=self.xsrf_token.decode("ascii"),
        )
        if caller is None:
            ns["user"] = None
        ns.update(
            svc=self.svc,
            api=self.svc + "api/v1/",
            own_static=lambda path: f"{self.svc}static/{path}?v={__version__}",
            caller=caller,
            is_admin=bool(caller and caller.is_admin),
            nav=self.nav,
            title=self.title,
            live=self.live,
            xsrf_form_html=Markup(self.xsrf_form_html()),
            flash=self.pop_flash(),
            refresh_seconds=REFRESH_SECONDS,
            # UTC, as every time on the pages and as the live refresh writes it (gpupool.js)
            rendered_at=time.strftime("%H:%M:%S UTC", time.gmtime()),
            version=__version__,
        )
        return ns

    def render_page(self, template: str, status: int = 200, **values: Any) -> None:
        html = self.ctx.templates.get_template(template).render({**self.namespace(), **values})
        self.set_status(status)
        self.set_header("Cache-Control", "no-store")
        self.finish(html)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            message = exc.message
        elif isinstance(exc, web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
        else:
            message = "Something went wrong in the gpupool service; its log says what."
        try:
            self.render_page(
                "error.html",
                status=status_code,
                status_code=status_code,
                reason=self._reason,
                message=message,
                live=False,  # a refusal or an error is not refreshed
            )
        except Exception:  # the error page itself failed: say it plainly
            self.set_header("Content-Type", "text/plain; charset=UTF-8")
            self.finish(f"{status_code} {self._reason}: {message}\n")

    # --- flash messages (one line, shown on the next page) ---------------------------------------

    def flash(self, message: str) -> None:
        self.set_signed_cookie(FLASH_COOKIE, message[:1000], path=self.svc, httponly=True)

    def pop_flash(self) -> str | None:
        value = self.get_signed_cookie(FLASH_COOKIE, max_age_days=1)
        if value is None:
            return None
        self.clear_cookie(FLASH_COOKIE, path=self.svc)
        return value.decode("utf-8", "replace")

    def back(self, fallback: str) -> str:
        """Where to go after a form: its ``next`` if that is one of our pages, else ``fallback``."""
        return local_target(self.get_body_argument("next", "") or "", self.svc, fallback)

    def record(self, what: str) -> None:
        assert self.caller is not None
        self.ctx.changes.record(self.caller.kind, self.caller.name, what, via="page")

    def arg(self, name: str) -> str | None:
        return self.get_query_argument(name, None)


def local_target(target: str, prefix: str, fallback: str) -> str:
    """``target`` if it is a path under ``prefix`` (never another site), else ``fallback``."""
    if target.startswith(prefix) and "//" not in target and "\\" not in target:
        return target
    return fallback


class AdminPageHandler(PageHandler):
    scope = ADMIN_SCOPE


class OAuthCallbackHandler(HubOAuthCallbackHandler):
    def initialize(self, ctx: Any) -> None:
        self.hub_auth = ctx.hub_auth
