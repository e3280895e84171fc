"""The pages that show: every user's own page, and the admins' pools, pool, nodes, quotas and
reports.

Each is a GET that renders one template from the same view functions as the JSON API (see
:mod:`.pages` for login, scopes and rendering); the live ones are refreshed by
``static/gpupool.js``. What the database keeps (the usage history of the pools page's chart,
GPU-hours) is read through :class:`~.records.Records`; when the database is missing or down the
pages say why and show what they can without it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

from tornado import web

from ..core.history import RANGES, parse_range
from ..core.poolwrite import pool_to_document
from ..core.reports import quota_rows
from . import clock, views
from .adminpages import sentence
from .charts import Chart, Usage, downsample, history_series, hour_bars, tidy, usage_chart
from .errors import ApiError
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
        hours, hours_problem = await own_gpu_hours(self.ctx.records, name)
        self.render_page(
            "user.html",
            pools=pools,
            groups=groups,
            quota_text=texts,
            caps=cap if cap and cap.get("gpu") is not None else None,
            servers=[views.server_row(s) for s in index.servers(user=name)],
            admissions=[views.reservation_row(r) for r in res if r.user == name],
            hours=hours,
            hours_problem=hours_problem,
        )


#: The periods of a user's own GPU-hours on *My GPUs*.
OWN_PERIODS = (("7d", "Last 7 days"), ("30d", "Last 30 days"))


def own_hours_row(period: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """A GPU-hours report of one user's own sessions as one row of *My GPUs*' table."""
    rows = report["rows"]
    return {
        "period": period,
        **{k: sum(r[k] for r in rows) for k in ("within_quota", "over_quota", "gpu_hours")},
        "sessions": sum(r["sessions"] for r in rows),
    }


async def own_gpu_hours(records: Any, user: str) -> tuple[list[dict[str, Any]], str]:
    """``user``'s own GPU-hours over :data:`OWN_PERIODS` (their sessions only, as the API
    gives a user), or no rows and why they cannot be had."""
    answers = await asyncio.gather(
        *(records.gpu_hours(since, None, "user", user) for since, _ in OWN_PERIODS),
        return_exceptions=True,
    )
    reports: list[dict[str, Any]] = []
    for answer in answers:
        if isinstance(answer, ApiError) and answer.status == 503:
            return [], sentence(answer.message)
        if isinstance(answer, BaseException):
            raise answer
        reports.append(answer)
    rows = [
        own_hours_row(label, report)
        for (_, label), report in zip(OWN_PERIODS, reports, strict=True)
    ]
    return rows, sentence(reports[0]["problem"]) if reports[0].get("problem") else ""


# --- pools ---------------------------------------------------------------------------------------


def admissions_per_pool(ctx: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in ctx.state.reservations:
        counts[r.pool] = counts.get(r.pool, 0) + 1
    return counts


#: The pools page's chart: the ranges it offers (those of ``GET api/v1/usage/history``).
RANGE_LABELS = {"6h": "6 hours", "24h": "24 hours", "7d": "7 days", "30d": "30 days"}
DEFAULT_RANGE = "6h"  # as the API, and the span the in-memory chart has always shown


def current_usage(ctx: Any, now: float) -> dict[str, Usage]:
    """Each pool's GPUs in use and in total now: the chart's last point."""
    return {
        row["name"]: Usage(now, row["gpu_used"], row["gpu_total"])
        for row in ctx.state.pool_summaries()
    }


#: About one point per pixel column of the chart's plot.
CHART_POINTS = 600


def chart_with_now(
    series: Mapping[str, Sequence[Any]], current: Mapping[str, Usage], now: float, hours: float
) -> Chart:
    """The chart of ``series`` ending with the ``current`` numbers, over at most ``hours``."""
    points = {name: list(ss) for name, ss in series.items()}
    for name, usage in current.items():
        points.setdefault(name, []).append(usage)
    return usage_chart(points, now, hours)


def database_chart(
    pools: Mapping[str, Sequence[Sequence[float]]],
    current: Mapping[str, Usage],
    now: float,
    hours: float,
) -> Chart:
    """The chart of the database's samples (``GET api/v1/usage/history``'s ``pools``), long
    ones averaged to about one point per pixel column, ending with the ``current`` numbers."""
    return chart_with_now(history_series(pools, now, CHART_POINTS), current, now, hours)


def memory_chart(ctx: Any, now: float) -> Chart:
    """The chart of the samples kept in memory (the last ``history_hours``)."""
    series = ctx.history.series()
    starts = [ss[0].time for ss in series.values() if ss]
    points = downsample(series, min(starts, default=now), now, CHART_POINTS)
    return chart_with_now(points, current_usage(ctx, now), now, ctx.history.hours)


@dataclass
class UsageView:
    """The pools page's chart and where it comes from."""

    chart: Chart
    range: str  # the range shown (RANGES), or "" for the in-memory history
    problem: str  # why the database's history is not shown, or what it says is wrong
    from_database: bool


def range_arg(value: str | None) -> str:
    """``?range=``, checked (a 400 names the choices)."""
    try:
        parse_range(value, DEFAULT_RANGE)
    except ValueError as e:
        raise ApiError(400, str(e)) from None
    return value or DEFAULT_RANGE


async def usage_view(ctx: Any, range_: str) -> UsageView:
    """The chart over ``range_`` from the database, or (without one, or while it is down) the
    one kept in memory, saying why."""
    now = clock.now()
    records = ctx.records
    if records.available:
        try:
            answer = await records.history(range_, None)
        except ApiError as e:
            if e.status != 503:
                raise
            problem = e.message
        else:
            # thousands of samples per pool over 7 or 30 days: averaged off the event loop
            chart = await asyncio.to_thread(
                database_chart, answer["pools"], current_usage(ctx, now), now, RANGES[range_] / 3600
            )
            return UsageView(chart, range_, answer.get("problem") or "", True)
    else:
        problem = records.status()
    return UsageView(memory_chart(ctx, now), "", problem, False)


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
    """``{prefix}pools[?range=6h|24h|7d|30d]``: gpuctl's ``get pools`` and more, with usage
    over time."""

    nav = "pools"
    title = "Pools"
    live = True

    async def get(self) -> None:
        usage = await usage_view(self.ctx, range_arg(self.arg("range")))
        counts = admissions_per_pool(self.ctx)
        rows = [
            {**r, "admissions": counts.get(r["name"], 0)} for r in self.ctx.state.pool_summaries()
        ]
        self.render_page(
            "pools.html",
            pools=rows,
            totals={k: sum(r.get(k) or 0 for r in rows) for k in TOTALS},
            usage=usage,
            chart=usage.chart,
            ranges=RANGE_LABELS,
            history_hours=tidy(self.ctx.history.hours),
            history_interval=self.ctx.history.interval,
            raw_days=tidy(self.ctx.records.raw_days),
            keep_days=tidy(self.ctx.records.keep_days),
        )


class UsageChart(AdminPageHandler):
    """``{prefix}pools/usage.svg[?range=...]``: the chart alone, for the pools page to refresh."""

    async def get(self) -> None:
        usage = await usage_view(self.ctx, range_arg(self.arg("range")))
        svg = self.ctx.templates.get_template("usage-chart.svg").render(chart=usage.chart)
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


# --- reports -------------------------------------------------------------------------------------

REPORT_BY = {"user": "User", "group": "Group", "pool": "Pool"}
REPORT_SINCE = {"7d": "last 7 days", "30d": "last 30 days"}


@dataclass(frozen=True)
class ReportQuery:
    """What the reports page's form asks: ``by``, ``since`` (7d, 30d or a date), ``until``."""

    by: str
    since: str
    until: str

    @property
    def since_date(self) -> str:
        """``since`` when it is a date (the form's date field), else empty."""
        return self.since if re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.since) else ""

    def query(self) -> str:
        """The same report's query string, for the API (CSV) and links."""
        args = {"since": self.since, "until": self.until, "by": self.by}
        return urlencode({k: v for k, v in args.items() if v})


def report_query(arg: Any) -> ReportQuery:
    """``?by=&since=&until=``, as the API takes them, or the form's ``since=date&from=DATE``
    (``since`` is then empty when no date was given); the defaults are the API's (by user,
    the last 7 days)."""
    since = (arg("since") or "").strip()
    if since == "date" or (not since and arg("from")):
        since = (arg("from") or "").strip()
    else:
        since = since or "7d"
    return ReportQuery((arg("by") or "user").strip(), since, (arg("until") or "").strip())


def report_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The sums of a GPU-hours report's columns, for the table's last line."""
    keys = ("gpu_hours", "within_quota", "over_quota", "sessions")
    return {k: round(sum(r[k] for r in rows), 4) for k in keys}


class ReportsPage(AdminPageHandler):
    """``{prefix}reports?by=user|group|pool&since=7d|30d|YYYY-MM-DD[&until=YYYY-MM-DD]``:
    GPU-hours per subject from the ledger, within and over quota, as a table with bars, and
    the same as CSV (``api/v1/reports/gpu-hours.csv``)."""

    nav = "reports"
    title = "Reports"

    async def get(self) -> None:
        query = report_query(self.arg)
        report: dict[str, Any] | None = None
        problem, refusal, status = "", "", 200
        try:
            if not query.since:
                raise ApiError(400, "Choose the date the report starts from.")
            report = await self.ctx.records.gpu_hours(query.since, query.until, query.by, None)
        except ApiError as e:
            if e.status == 400:
                refusal, status = sentence(e.message), 400
            elif e.status == 503:
                problem = sentence(e.message)
            else:
                raise
        if report is not None and report.get("problem"):
            problem = sentence(str(report["problem"]))
        rows = hour_bars(report["rows"]) if report is not None else []
        self.render_page(
            "reports.html",
            status=status,
            query=query,
            report=report,
            rows=rows,
            totals=report_totals(rows),
            problem=problem,
            refusal=refusal,
            by_choices=REPORT_BY,
            since_choices=REPORT_SINCE,
            csv_url=f"{self.svc}api/v1/reports/gpu-hours.csv?{query.query()}",
        )
