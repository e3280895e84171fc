"""The service's pages: one for every user, and the admins' pools, nodes, quotas and actions.

Pages are server-rendered from the templates in ``templates/`` (which extend JupyterHub's
``page.html``, see :mod:`.templating`), from the same view functions as the JSON API; a small
script (``static/gpupool.js``) then keeps their numbers current by polling that API.

Visitors log in through JupyterHub OAuth (they are sent to the hub and come back through
``oauth_callback``) and need the service's access scope. The page for every user
(``{prefix}``) needs ``custom:gpupool:use``; the others need ``custom:gpupool:admin``. Forms
are POSTed with JupyterHub's XSRF token, and every change is logged with who made it
(:mod:`.changelog`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlencode

from jupyterhub.services.auth import HubOAuthCallbackHandler
from markupsafe import Markup
from tornado import web

from .. import __version__
from ..core.poolfile import pool_to_document, quota_to_document
from ..core.pools import DEFAULT_POOL
from ..core.reports import quota_rows
from . import changelog, clock, views
from .auth import ADMIN_SCOPE, USE_SCOPE, Caller
from .bodies import LabelPatch
from .charts import Chart, usage_chart
from .errors import ApiError
from .handlers import ServiceHandler
from .history import Sample
from .kube import KubeError
from .layout import REQUEST, dump_document
from .nodetable import STATUSES, NodeQuery, Page, page_of, parse_query, select, whole_number
from .templating import hub_namespace

FLASH_COOKIE = "gpupool-flash"
REFRESH_SECONDS = 5
NODES_PER_PAGE = 100
SERVERS_PER_PAGE = 100

EXAMPLE_POOL = """\
kind: pool
version: v0.1
pool:
  name: my-pool
  description: "What the pool is for"
nodes:
  gpu-node-1:
    gpu-type: A100-80G
"""

EXAMPLE_QUOTA = """\
kind: quota
version: v0.1
quota:
  name: quotas
pools:
  my-pool:
    borrowing: true
    user-default: {guaranteed: 0, limit: 4}
    groups:
      my-group: {guaranteed: 8, limit: 16}
"""


class PageHandler(ServiceHandler):
    """A page: OAuth login, the scope it needs, and rendering with the hub's look."""

    scope = USE_SCOPE
    nav = ""
    title = "GPU pools"
    live = False  # whether the page refreshes itself
    caller: Caller | None = None

    async def prepare(self) -> None:
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
            rendered_at=time.strftime("%H:%M:%S"),
            version=__version__,
        )
        return ns

    def render_page(self, template: str, status: int = 200, **values: Any) -> None:
        html = self.ctx.templates.get_template(template).render(**self.namespace(), **values)
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


# --- every user ----------------------------------------------------------------------------------


def quota_text(quota: dict[str, Any] | None, user: str) -> str:
    """A user's quota in one pool, in a few words (their entry, and their groups')."""
    if quota is None:
        return "no quota: the whole pool"
    mine = (quota.get("users") or {}).get(user) or {}
    limit = mine.get("limit")
    parts = [
        f"{mine.get('all_gpus', mine.get('used', 0))} in use",
        f"{mine.get('guaranteed', 0)} guaranteed",
        f"limit {'none' if limit is None else limit}",
    ]
    text = ", ".join(parts)
    for group, entry in (quota.get("groups") or {}).items():
        g_limit = entry.get("limit")
        text += (
            f"; group {group}: {entry.get('used', 0)} in use of {entry.get('guaranteed', 0)}"
            f" guaranteed, limit {'none' if g_limit is None else g_limit}"
        )
    return text


class UserPage(PageHandler):
    """``{prefix}``: the pools I may use with their free GPUs, my quota in each, my servers."""

    nav = "me"
    title = "My GPUs"
    live = True

    async def get(self) -> None:
        assert self.caller is not None
        name = self.caller.name
        groups = self.caller.groups
        if groups is None:
            groups = await self.ctx.user_groups(name)
        state = self.ctx.state
        reg, index, res = state.registry, state.index, state.reservations
        pools = state.pool_summaries(name, groups)
        texts = {
            p["name"]: quota_text(views.pool_quota(reg, index, res, p["name"], name, groups), name)
            for p in pools
        }
        cap = views.quotas(reg, index, res, name, groups)["caps"]["users"].get(name)
        self.render_page(
            "user.html",
            pools=pools,
            groups=groups,
            quota_text=texts,
            caps=cap if cap and cap.get("gpu") is not None else None,
            servers=[views.server_row(s) for s in index.servers(user=name)],
            admissions=[views.reservation_row(r) for r in res if r.user == name],
        )


# --- pools ---------------------------------------------------------------------------------------


def admissions_per_pool(ctx: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in ctx.state.reservations:
        counts[r.pool] = counts.get(r.pool, 0) + 1
    return counts


def chart_of(ctx: Any) -> Chart:
    """The usage chart: the sampled history, up to now (the current numbers are its last point)."""
    now = clock.now()
    series = ctx.history.series()
    for row in ctx.state.pool_summaries():
        series.setdefault(row["name"], []).append(Sample(now, row["gpu_used"], row["gpu_total"]))
    return usage_chart(series, now, ctx.history.hours)


TOTALS = (
    "gpu_total",
    "gpu_used",
    "gpu_free",
    "gpu_borrowed",
    "gpu_reserved",
    "node_count",
    "server_count",
)


class PoolsPage(AdminPageHandler):
    """``{prefix}pools``: gpuctl's ``get pools`` and more, with usage over time."""

    nav = "pools"
    title = "Pools"
    live = True

    async def get(self) -> None:
        counts = admissions_per_pool(self.ctx)
        rows = [
            {**r, "admissions": counts.get(r["name"], 0)} for r in self.ctx.state.pool_summaries()
        ]
        self.render_page(
            "pools.html",
            pools=rows,
            totals={k: sum(r.get(k) or 0 for r in rows) for k in TOTALS},
            chart=chart_of(self.ctx),
            history_hours=self.ctx.history.hours,
            history_interval=self.ctx.history.interval,
        )


class UsageChart(AdminPageHandler):
    """``{prefix}pools/usage.svg``: the chart alone, for the pools page to refresh."""

    async def get(self) -> None:
        svg = self.ctx.templates.get_template("usage-chart.svg").render(chart=chart_of(self.ctx))
        self.set_header("Content-Type", "image/svg+xml; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(svg)


def node_page_values(
    handler: PageHandler, query: NodeQuery, page: Page, action: str
) -> dict[str, Any]:
    """What the node filter, the pager and the live refresh need."""
    keep = {"pool": query.pool, "status": query.status, "q": query.q}
    keep = {k: v for k, v in keep.items() if v}

    def page_url(number: int) -> str:
        return action + "?" + urlencode({**keep, "offset": page.offset_of(number)})

    return {
        "query": query,
        "page": page,
        "page_url": page_url,
        "statuses": [(k, label) for k, (label, _) in STATUSES.items()],
        "filter_action": action,
        "node_query": urlencode({**keep, "offset": page.offset, "limit": page.limit or ""}),
        "csv_query": urlencode(keep),
    }


class PoolPage(AdminPageHandler):
    """``{prefix}pools/NAME``: a pool's nodes, servers (with a stop button) and quota."""

    nav = "pools"
    live = True

    async def get(self, name: str) -> None:
        state = self.ctx.state
        if not views.pool_exists(state.registry, state.index, name):
            raise web.HTTPError(404, f"There is no pool named {name}.")
        self.title = f"Pool {name}"
        pool = views.pool_or_bare(state.registry, name)
        query = replace(parse_query(self.arg, NODES_PER_PAGE), pool=name)
        page = select(state.index, query)
        quota = views.pool_quota(state.registry, state.index, state.reservations, name)
        rows = quota_rows({"pools": {name: quota}}, {name: state.index.usage_by_subject(name)})
        offset = whole_number(self.arg("servers_offset"), "servers_offset", 0, 10**9) or 0
        servers = page_of(state.index.servers(pool=name), offset, SERVERS_PER_PAGE)
        keep = {k: v for k in ("status", "q", "offset") if (v := self.arg(k))}

        def servers_url(number: int) -> str:
            at = {**keep, "servers_offset": servers.offset_of(number)}
            return f"{self.svc}pools/{quote(name)}?{urlencode(at)}#servers"

        self.render_page(
            "pool.html",
            pool=state.pool_summary(name),
            servers=[views.server_row(s) for s in servers.rows],
            servers_page=servers,
            servers_url=servers_url,
            servers_query=urlencode(
                {"pool": name, "offset": servers.offset, "limit": SERVERS_PER_PAGE}
            ),
            reservations=[views.reservation_row(r) for r in state.reservations if r.pool == name],
            quota_rows=rows,
            borrowing=bool(quota and quota.get("borrowing")),
            document=dump_document(pool_to_document(pool)) if pool.source is not None else None,
            back=self.request.uri,
            pool_choices=None,
            **node_page_values(self, query, page, f"{self.svc}pools/{quote(name)}"),
        )


class NodesPage(AdminPageHandler):
    """``{prefix}nodes``: every node with pool, GPU type, status reasons and labels."""

    nav = "nodes"
    title = "Nodes"
    live = True

    async def get(self) -> None:
        state = self.ctx.state
        query = parse_query(self.arg, NODES_PER_PAGE)
        page = select(state.index, query)
        values = node_page_values(self, query, page, f"{self.svc}nodes")
        values["node_query"] += "&labels=1"
        self.render_page(
            "nodes.html",
            labels={n.name: state.index.node_labels(n.name) for n in page.rows},
            pool_choices=views.pool_names(state.registry, state.index),
            **values,
        )


class QuotasPage(AdminPageHandler):
    """``{prefix}quotas``: per pool and subject, used against guaranteed and limit."""

    nav = "quotas"
    title = "Quotas"
    live = True

    async def get(self) -> None:
        state = self.ctx.state
        answer = views.quotas(state.registry, state.index, state.reservations)
        by_subject = {p: state.index.usage_by_subject(p) for p in answer["pools"]}
        self.render_page("quotas.html", rows=quota_rows(answer, by_subject))


# --- admin actions -------------------------------------------------------------------------------


def sentence(text: str) -> str:
    """``text`` as a sentence: capital first letter, full stop."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


def refusal_sentence(message: str) -> str:
    """The first line of a refused change as a sentence that says nothing was changed, once
    (some of the pool manager's messages say it already)."""
    first = message.split("\n", 1)[0].rstrip(":").rstrip()
    if not first.endswith("nothing was changed"):
        first += "; nothing was changed"
    return sentence(first)


def request_lines(problems: list[str]) -> list[str]:
    """``<request>:7: field: message`` as ``line 7: field: message`` (the textarea's lines)."""
    return [p.replace(f"{REQUEST}:", "line ", 1) for p in problems]


class AdminPage(AdminPageHandler):
    """``{prefix}admin``: create or replace a pool, delete one, move a node, edit quotas."""

    nav = "admin"
    title = "Pool admin"

    async def get(self) -> None:
        self.show()

    def show(
        self,
        errors: dict[str, Any] | None = None,
        pool_yaml: str | None = None,
        quota_yaml: str | None = None,
        node: str | None = None,
        status: int = 200,
    ) -> None:
        state = self.ctx.state
        reg = state.registry
        if pool_yaml is None:
            wanted = reg.pool(self.arg("pool") or "")
            pool_yaml = dump_document(pool_to_document(wanted)) if wanted else EXAMPLE_POOL
        if quota_yaml is None:
            docs = [dump_document(quota_to_document(q)) for q in reg.quota_documents]
            quota_yaml = "---\n".join(docs) if docs else EXAMPLE_QUOTA
        summaries = {r["name"]: r for r in state.pool_summaries()}
        self.render_page(
            "admin.html",
            status=status,
            errors=errors or {},
            pool_yaml=pool_yaml,
            quota_yaml=quota_yaml,
            node=node if node is not None else self.arg("node") or "",
            pool_label=state.pool_label,
            pool_choices=views.pool_names(reg, state.index),
            pools_defined=list(reg.pools),
            deletable=[summaries[n] for n in reg.pools if n in summaries],
            changes=self.ctx.changes.latest(30),
        )


class ApplyPoolsAction(AdminPage):
    """``POST {prefix}admin/pools``: the pool YAML of the admin page."""

    async def post(self) -> None:
        text = self.get_body_argument("yaml", "")
        try:
            if not text.strip():
                raise ApiError(400, "Paste a pool document first.")
            result = await self.ctx.pools.apply_pools(text)
        except ApiError as e:
            problems = request_lines([str(p) for p in e.extra.get("problems") or ()])
            message = refusal_sentence(e.message)
            self.show({"pool": message, "pool_problems": problems}, pool_yaml=text, status=e.status)
            return
        what = changelog.applied_pools(result)
        self.record(what)
        self.flash(sentence(what))
        names = [*result["created"], *result["replaced"]]
        self.redirect(f"{self.svc}pools/{quote(names[0])}" if names else f"{self.svc}pools")


class DeletePoolPage(AdminPageHandler):
    """``{prefix}admin/pools/NAME/delete``: which servers still run there; then delete."""

    nav = "admin"

    async def get(self, name: str) -> None:
        state = self.ctx.state
        if name not in state.registry.pools:
            raise web.HTTPError(404, f"There is no pool document named {name} to delete.")
        self.title = f"Delete pool {name}"
        self.render_page(
            "delete-pool.html",
            pool=state.pool_summary(name),
            servers=[views.server_row(s) for s in state.index.servers(pool=name)],
            pool_label=state.pool_label,
            back=self.request.uri,
        )

    async def post(self, name: str) -> None:
        result = await self.ctx.pools.delete_pool(name)
        what = changelog.deleted_pool(result)
        self.record(what)
        running = result.get("servers_still_running") or []
        message = f"Pool {name} deleted."
        if running:
            who = ", ".join(f"{s['user']}/{s['server']}" for s in running[:10])
            message += f" {len(running)} server(s) still run on its nodes: {who}."
        self.flash(message)
        self.redirect(f"{self.svc}pools")


class MoveNodeAction(AdminPage):
    """``POST {prefix}admin/nodes``: set a node's pool label (``default``: remove it)."""

    async def post(self) -> None:
        node = self.get_body_argument("node", "").strip()
        pool = self.get_body_argument("pool", "")
        state = self.ctx.state
        try:
            if not node:
                raise ApiError(400, "Say which node to move.")
            if pool not in views.pool_names(state.registry, state.index):
                raise ApiError(400, f"There is no pool named {pool!r}.")
            value = None if pool == DEFAULT_POOL else pool
            result = await self.ctx.pools.label_node(
                node, LabelPatch({state.pool_label: value}, overwrite=True)
            )
        except ApiError as e:
            self.show({"node": e.message}, node=node, status=e.status)
            return
        self.record(changelog.labelled_node(result))
        self.flash(f"Node {node} moved to {pool}.")
        self.redirect(f"{self.svc}nodes?{urlencode({'q': node})}")


class QuotasAction(AdminPage):
    """``POST {prefix}admin/quotas``: the quota YAML of the admin page replaces all quotas."""

    async def post(self) -> None:
        text = self.get_body_argument("yaml", "")
        try:
            if not text.strip():
                raise ApiError(400, "Paste the quota documents first.")
            await self.ctx.pools.put_quotas(text)
        except ApiError as e:
            problems = request_lines([str(p) for p in e.extra.get("problems") or ()])
            message = refusal_sentence(e.message)
            self.show(
                {"quota": message, "quota_problems": problems}, quota_yaml=text, status=e.status
            )
            return
        names = [q.name for q in self.ctx.state.registry.quota_documents]
        self.record(changelog.replaced_quotas(names))
        self.flash("Quotas replaced.")
        self.redirect(f"{self.svc}quotas")


class StopServerAction(AdminPageHandler):
    """``POST {prefix}admin/servers/stop``: stop a server through the hub (its pod, if the hub
    does not know it)."""

    async def post(self) -> None:
        user = self.get_body_argument("user", "")
        server = self.get_body_argument("server", "")
        namespace = self.get_body_argument("namespace", "")
        pod = self.get_body_argument("pod", "")
        found = [
            s
            for s in self.ctx.state.index.servers(user=user)
            if s.server == server and (not pod or (s.namespace, s.name) == (namespace, pod))
        ]
        if not found:
            raise web.HTTPError(404, f"No server {user}/{server} runs on the cluster now.")
        target = found[0]
        stopped = False
        if self.ctx.hub is not None and user:
            stopped = await self.ctx.hub.stop_server(user, server) in (202, 204)
        if not stopped:  # the hub does not know it (or cannot be asked): delete the pod
            try:
                await self.ctx.kube.delete_pod(target.namespace, target.name)
            except KubeError as e:
                raise web.HTTPError(503, f"Cannot delete pod {target.name}: {e.message}") from e
        self.record(changelog.stopped_server(user, server, target.pool))
        self.flash(f"Stopping {user}'s server{' ' + server if server else ''}.")
        self.redirect(self.back(f"{self.svc}pools"))


class OAuthCallbackHandler(HubOAuthCallbackHandler):
    def initialize(self, ctx: Any) -> None:
        self.hub_auth = ctx.hub_auth
