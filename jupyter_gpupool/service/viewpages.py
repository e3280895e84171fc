"""The pages that show: every user's own page, and the admins' pools, pool, nodes and quotas.

Each is a GET that renders one template from the same view functions as the JSON API (see
:mod:`.pages` for login, scopes and rendering); the live ones are refreshed by
``static/gpupool.js``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlencode

from tornado import web

from ..core.poolwrite import pool_to_document
from ..core.reports import quota_rows
from . import clock, views
from .charts import Chart, usage_chart
from .history import Sample
from .layout import dump_document
from .nodetable import STATUSES, NodeQuery, Page, page_of, parse_query, select, whole_number
from .pages import AdminPageHandler, PageHandler

NODES_PER_PAGE = 100
SERVERS_PER_PAGE = 100


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
