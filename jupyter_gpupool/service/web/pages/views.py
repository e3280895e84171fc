"""The pages that show: every user's own page, and the admins' pools, pool, nodes, quotas,
idle GPUs and reports.

Each is a GET that renders one template from the same view functions as the JSON API (see
:mod:`.pages` for login, scopes and rendering); the live ones are refreshed by
``static/gpupool.js``. What the database keeps (the usage history of the pools page's chart,
GPU-hours) is read through :class:`~.records.Records`; when the database is missing or down the
pages say why and show what they can without it. With a GPU utilization source, the server
tables show what each server's GPUs do (:func:`utilization_cells`) and the pools page the GPUs
actually busy next to those in use. The fair queue's line (:mod:`.queue`) shows as the number
waiting per pool on the pools page, the entries waiting for a pool on its page (where an admin
may take one out of the line), and a user's own entries on *My GPUs*.
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

from tornado import web

from ....core.decision import AdmissionRequest, gpus_text
from ....core.history import RANGES, parse_range
from ....core.idle import IdlePolicy
from ....core.poolrows import pool_exists, pool_names, pool_or_bare
from ....core.poolwrite import pool_to_document
from ....core.queue import ADMITTED, CANCELLED, EXPIRED, Waiting
from ....core.reports import quota_rows
from ....core.usagerows import ServerUsage
from ....core.utilization import busy_gpus
from ... import clock, views
from ...admission.line import Ended, Line
from ...errors import ApiError
from ...registry.documents import dump_document
from ..nodetable import STATUSES, NodeQuery, Page, page_of, parse_query, select, whole_number
from .admin import sentence
from .base import AdminPageHandler, PageHandler
from .charts import Chart, Usage, downsample, history_series, hour_bars, tidy, usage_chart

NODES_PER_PAGE = 100
SERVERS_PER_PAGE = 100


# --- what the GPUs do ---------------------------------------------------------------------------
# The texts are made as static/gpupool.js makes them when it refreshes a row (data-format util,
# memory, idle, spark): the same rounding, so a refreshed cell reads as the first one did.


def one_decimal(value: float) -> str:
    """``value`` to one decimal, halves up (as the script's ``Math.floor(x * 10 + 0.5)``)."""
    return f"{math.floor(value * 10 + 0.5) / 10:.1f}"


def utilization_text(percent: float | None) -> str:
    """A server's mean GPU utilization: ``50%``, ``33.3%``; ``—`` when not measured."""
    return "—" if percent is None else f"{tidy(percent)}%"


def memory_text(used_mib: float | None, total_mib: float | None) -> str:
    """GPU memory used (of total), in GiB; empty when not measured."""
    if used_mib is None:
        return ""
    used = one_decimal(used_mib / 1024)
    if total_mib is None:
        return f"{used} GiB memory"
    return f"{used} of {one_decimal(total_mib / 1024)} GiB memory"


def clock_text(when: float) -> str:
    """``14:05 UTC``."""
    return datetime.fromtimestamp(when, timezone.utc).strftime("%H:%M UTC")


def idle_text(idle: Mapping[str, Any] | None) -> str:
    """A server's ``idle`` (the idle policy's view: ``since``, ``warned``, ``stops_at``,
    ``action``) in words; empty when it is not idle."""
    if not idle or idle.get("since") is None:
        return ""
    text = f"idle since {clock_text(float(idle['since']))}"
    if idle.get("stops_at") is not None:
        text += f", stops at {clock_text(float(idle['stops_at']))}"
    elif idle.get("action") == "report":
        text += ", reported (not stopped)"
    if idle.get("warned"):
        text += "; its user was warned"
    return text


#: The size of a server's utilization sparkline (percent 0..100 bottom to top), and the most
#: points it draws (one per pixel column; a page of 100 servers stays small).
SPARK_WIDTH, SPARK_HEIGHT, SPARK_POINTS = 60, 16, 60


def sparkline(history: Sequence[Sequence[float]] | None) -> str:
    """``points`` of a polyline of ``[[time, percent], ...]`` over :data:`SPARK_WIDTH`
    x :data:`SPARK_HEIGHT` (time left to right; a longer history picked down to
    :data:`SPARK_POINTS` evenly, first and last kept); empty under two points."""
    if not history or len(history) < 2:
        return ""
    n = len(history)
    if n > SPARK_POINTS:
        history = [history[i * (n - 1) // (SPARK_POINTS - 1)] for i in range(SPARK_POINTS)]
    t0, t1 = float(history[0][0]), float(history[-1][0])
    span = (t1 - t0) or 1.0
    out = []
    for t, p in history:
        x = (float(t) - t0) / span * SPARK_WIDTH
        y = SPARK_HEIGHT - max(0.0, min(100.0, float(p))) / 100 * SPARK_HEIGHT
        out.append(f"{one_decimal(x)},{one_decimal(y)}")
    return " ".join(out)


def utilization_cells(row: Mapping[str, Any]) -> dict[str, Any]:
    """A server row of ``GET api/v1/servers`` with the texts of its utilization cell."""
    return {
        **row,
        "util_text": utilization_text(row.get("gpu_utilization")),
        "util_title": "mean of the server's GPUs"
        + (
            ""
            if row.get("gpu_utilization_max") is None
            else f"; busiest {utilization_text(row['gpu_utilization_max'])}"
        ),
        "memory_text": memory_text(row.get("gpu_memory_used_mib"), row.get("gpu_memory_total_mib")),
        "idle_text": idle_text(row.get("idle")),
        "spark": sparkline(row.get("gpu_utilization_history")),
    }


@dataclass(frozen=True)
class ServerTable:
    """The rows of a servers table and what the page says about their utilization."""

    rows: list[dict[str, Any]]
    measured: bool  # a utilization source is configured: the column is shown
    problem: str  # why utilization is not measured now (shown once above the table)


def server_table(ctx: Any, servers: Sequence[ServerUsage], total: int) -> ServerTable:
    """``servers`` as ``GET api/v1/servers`` gives them (with their utilization and, once the
    idle policy says so, ``idle``), and the utilization source's problem."""
    registry, now = ctx.state.registry, clock.now()
    answer = views.servers_answer(
        servers, total, ctx.utilization, lambda s: ctx.idle.row(registry, s, now)
    )
    source = answer["utilization"]
    measured = source["source"] != "none"
    return ServerTable(
        [utilization_cells(r) for r in answer["servers"]],
        measured,
        _full_stop(source["problem"]) if measured and source["problem"] else "",
    )


def _full_stop(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def _tidy_or_none(value: float | None) -> float | None:
    return None if value is None else tidy(value)


def pools_busy(ctx: Any, pools: Iterable[str], now: float) -> dict[str, float | None] | None:
    """Per pool, the GPUs actually busy now (None where nothing is measured); None without a
    utilization source."""
    utilization = ctx.utilization
    if utilization.source is None:
        return None
    measure = functools.partial(utilization.of, now=now)
    return {name: busy_gpus(ctx.state.index.servers(name), measure) for name in pools}


# --- the line (the fair queue) -------------------------------------------------------------------


def standing_text(row: Mapping[str, Any]) -> str:
    """A waiting request's standing in words: ``within quota (group students)``, ``over quota
    (user dave)`` (as ``static/gpupool.js`` writes it: data-format standing)."""
    words = "within quota" if row.get("within_quota") else "over quota"
    return f"{words} ({row['subject']})" if row.get("subject") else words


def queue_rows(
    ctx: Any, *, pool: str | None = None, user: str | None = None
) -> list[dict[str, Any]]:
    """The requests waiting in line as ``GET api/v1/queue`` lists them, first in line first:
    those waiting for ``pool`` (one of their pools), or ``user``'s own; with their standing in
    words (``standing_text``); none without a line."""
    line = ctx.desk.line
    if line is None:
        return []
    rows = line.rows(user)
    if pool is not None:
        rows = [r for r in rows if pool in r["pools"]]
    return [{**r, "standing_text": standing_text(r)} for r in rows]


def queue_lengths(ctx: Any) -> dict[str, int]:
    """Per pool, the requests waiting in line for it (``GET api/v1/queue``'s ``pools``)."""
    line = ctx.desk.line
    return line.lengths() if line is not None else {}


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
        mine = index.servers(user=name)
        table = server_table(self.ctx, mine, len(mine))
        self.render_page(
            "user.html",
            pools=pools,
            groups=groups,
            quota_text=texts,
            caps=cap if cap and cap.get("gpu") is not None else None,
            servers=table.rows,
            utilization=table,
            admissions=[views.reservation_row(r) for r in res if r.user == name],
            queue=queue_rows(self.ctx, user=name),
            has_line=self.ctx.desk.line is not None,
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


def current_usage(ctx: Any, now: float, busy: bool = False) -> dict[str, Usage]:
    """Each pool's GPUs in use and in total now (and, given ``busy``, actually busy, where
    measured): the chart's last point."""
    rows = ctx.state.pool_summaries()
    measured = pools_busy(ctx, [r["name"] for r in rows], now) if busy else None
    return {
        row["name"]: Usage(
            now, row["gpu_used"], row["gpu_total"], (measured or {}).get(row["name"])
        )
        for row in rows
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
            current = current_usage(ctx, now, busy=True)
            chart = await asyncio.to_thread(
                database_chart, answer["pools"], current, now, RANGES[range_] / 3600
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
        counts, waiting = admissions_per_pool(self.ctx), queue_lengths(self.ctx)
        rows = [
            {**r, "admissions": counts.get(r["name"], 0), "waiting": waiting.get(r["name"], 0)}
            for r in self.ctx.state.pool_summaries()
        ]
        busy = pools_busy(self.ctx, [r["name"] for r in rows], clock.now())
        if busy is not None:
            rows = [{**r, "gpu_busy": _tidy_or_none(busy[r["name"]])} for r in rows]
        self.render_page(
            "pools.html",
            pools=rows,
            busy=busy is not None,
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
    """``{prefix}pools/NAME``: a pool's nodes, servers (with a stop button), the requests
    waiting in line for it (with a cancel button) and quota; ``POST`` with ``cancel=ID`` takes
    a request out of the line."""

    nav = "pools"
    live = True

    async def get(self, name: str) -> None:
        state = self.ctx.state
        if not pool_exists(state.registry, state.index, name):
            raise web.HTTPError(404, f"There is no pool named {name}.")
        self.title = f"Pool {name}"
        pool = pool_or_bare(state.registry, name)
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

        table = server_table(self.ctx, servers.rows, servers.total)
        self.render_page(
            "pool.html",
            pool=state.pool_summary(name),
            servers=table.rows,
            utilization=table,
            servers_page=servers,
            servers_url=servers_url,
            servers_query=urlencode(
                {"pool": name, "offset": servers.offset, "limit": SERVERS_PER_PAGE}
            ),
            reservations=[views.reservation_row(r) for r in state.reservations if r.pool == name],
            queue=queue_rows(self.ctx, pool=name),
            quota_rows=rows,
            borrowing=bool(quota and quota.get("borrowing")),
            document=dump_document(pool_to_document(pool)) if pool.source is not None else None,
            back=self.request.uri,
            pool_choices=None,
            **node_page_values(self, query, page, f"{self.svc}pools/{quote(name)}"),
        )

    async def post(self, name: str) -> None:
        """Cancel a request waiting in line for this pool (``cancel``: its id), as ``DELETE
        api/v1/admissions/ID`` does: its spawner is told it was cancelled."""
        admission_id = self.get_body_argument("cancel", "").strip()
        back = self.back(f"{self.svc}pools/{quote(name)}")
        desk = self.ctx.desk
        line: Line | None = desk.line
        async with desk.lock:
            found = line.lookup(admission_id) if line is not None and admission_id else None
            if isinstance(found, Ended):  # admitted (or gone) since the page was shown
                became = ENDED_WORDS.get(found.state, found.state)
                self.flash(f"That request no longer waits in line: {became}.")
                self.redirect(back)
                return
            if (
                line is None
                or not isinstance(found, Waiting)
                or name not in line.row(found)["pools"]
            ):
                raise web.HTTPError(404, f"No request {admission_id} waits in line for {name}.")
            line.cancel(admission_id)
        what = cancelled_words(found.request, name)
        self.record(what)
        self.flash(sentence(what))
        self.redirect(back)


#: How a request left the line, for the flash after a cancel that came too late.
ENDED_WORDS = {
    ADMITTED: "it was admitted",
    CANCELLED: "it was cancelled",
    EXPIRED: "its spawn was gone, so it was dropped",
}


def cancelled_words(request: AdmissionRequest, pool: str) -> str:
    """``cancelled bob's request for 2 GPUs (server gpu) waiting in line for dev-pool``."""
    server = f" (server {request.server})" if request.server else ""
    return (
        f"cancelled {request.user}'s request for {gpus_text(request.gpus)}{server} "
        f"waiting in line for {pool}"
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
            pool_choices=pool_names(state.registry, state.index),
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


#: Rows of a GPU-hours report the reports page shows (the largest).
REPORT_ROWS = 100


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
        every = report["rows"] if report is not None else []
        # The largest rows only (they come largest first): a table of 2,000 users was a 1.5 MB
        # page; the totals are of every row, and the CSV has them all.
        rows = hour_bars(every[:REPORT_ROWS])
        self.render_page(
            "reports.html",
            status=status,
            query=query,
            report=report,
            rows=rows,
            row_count=len(every),
            totals=report_totals(every),
            problem=problem,
            refusal=refusal,
            by_choices=REPORT_BY,
            since_choices=REPORT_SINCE,
            csv_url=f"{self.svc}api/v1/reports/gpu-hours.csv?{query.query()}",
        )


# --- idle GPUs -----------------------------------------------------------------------------------

#: How far back the idle page lists the servers the policy warned (from the ledger).
IDLE_WARNED_DAYS = 7


def idle_policies(ctx: Any) -> list[tuple[str, str, str]]:
    """Each pool with the idle policy that applies to it (its own, else the service's) in
    words, and who is exempt (``alice, group admins``)."""
    state, idle = ctx.state, ctx.idle
    rows = []
    for name in pool_names(state.registry, state.index):
        policy: IdlePolicy | None = idle.policy_for(state.registry, name)
        if policy is None:
            rows.append((name, "none", ""))
            continue
        exempt = [*policy.exempt_users, *(f"group {g}" for g in policy.exempt_groups)]
        rows.append((name, policy.words(), ", ".join(exempt)))
    return rows


class IdlePage(AdminPageHandler):
    """``{prefix}idle``: the servers whose GPUs are idle under a policy now (the candidates of
    ``action: report`` and those about to be stopped, each with a stop button), the policy of
    each pool, and from the ledger the servers warned in the last days and how they ended."""

    nav = "idle"
    title = "Idle GPUs"

    async def get(self) -> None:
        ctx, state = self.ctx, self.ctx.state
        now = clock.now()
        idle = ctx.idle.idle_servers(state.registry, state.index)
        table = server_table(ctx, idle, len(idle))
        warned: list[dict[str, Any]] = []
        ledger_problem = ""
        try:
            warned = await ctx.records.idle_warnings(now - IDLE_WARNED_DAYS * 86400)
        except ApiError as e:
            ledger_problem = sentence(e.message)
        self.render_page(
            "idle.html",
            servers=table.rows,
            utilization=table,
            source=ctx.utilization.name,
            policies=idle_policies(ctx),
            warned=warned,
            warned_days=IDLE_WARNED_DAYS,
            ledger_problem=ledger_problem,
            culled=ctx.idle.culled,
            back=f"{self.svc}idle",
        )
