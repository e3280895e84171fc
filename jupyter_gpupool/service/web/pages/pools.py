"""The admins' pools page (``{prefix}pools``) with its usage chart (:class:`UsageChart`, the
chart alone for the page to refresh), and a pool's page (``{prefix}pools/NAME``) where an admin
may take a request out of the line.

The chart's history comes from the database through :class:`~..records.Records` (averaged to
about one point per pixel column), or, without one or while it is down, from the samples kept in
memory, saying why. With a GPU utilization source the pools page shows the GPUs actually busy
next to those in use (:func:`pools_busy`), and the number waiting in line per pool.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

from tornado import web

from ....core.admission.decision import AdmissionRequest, gpus_text
from ....core.admission.queue import ADMITTED, CANCELLED, EXPIRED, Waiting
from ....core.pools.writing import pool_to_document
from ....core.usage.history import RANGES, parse_range
from ....core.usage.utilization import busy_gpus
from ....core.words.pool_rows import pool_exists, pool_or_bare
from ....core.words.reports import quota_rows
from ... import clock, views
from ...admission.line import Ended, Line
from ...errors import ApiError
from ...registry.documents import dump_document
from ..nodetable import page_of, parse_query, select, whole_number
from .admin import sentence
from .base import AdminPageHandler
from .charts import Chart, Usage, downsample, history_series, tidy, usage_chart
from .parts import NODES_PER_PAGE, node_page_values, queue_rows, server_table

SERVERS_PER_PAGE = 100


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


def queue_lengths(ctx: Any) -> dict[str, int]:
    """Per pool, the requests waiting in line for it (``GET api/v1/queue``'s ``pools``)."""
    line = ctx.desk.line
    return line.lengths() if line is not None else {}


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
    series = history_series(pools, now, CHART_POINTS, start=now - hours * 3600)
    return chart_with_now(series, current, now, hours)


def memory_chart(ctx: Any, now: float) -> Chart:
    """The chart of the samples kept in memory (the last ``history_hours``)."""
    series = ctx.history.series()
    points = downsample(series, now - ctx.history.hours * 3600, now, CHART_POINTS)
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
            recuts=None
            if pool.recut is None or self.ctx.recut is None
            else self.ctx.recut.rows(clock.now(), views.iso, name),
            recut_nodes=pool.recut.nodes if pool.recut is not None else (),
            recut_configs=pool.recut.configs if pool.recut is not None else (),
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
