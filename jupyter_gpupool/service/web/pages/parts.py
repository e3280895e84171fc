"""The parts several pages share: a server's GPU utilization cells and the servers table
(:func:`server_table`, on *My GPUs*, a pool's page and the idle page), the requests waiting in
the fair queue's line (:func:`queue_rows`, on *My GPUs* and a pool's page), and the node table's
filter and pager (:func:`node_page_values`, on the nodes page and a pool's page).

This module imports none of the page modules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from ....core.usage.rows import ServerUsage
from ....core.usage.utilization import ENGINE_ACTIVE
from ....core.words.gpu_use import SHARED_WORDS
from ... import clock, views
from ..nodetable import STATUSES, NodeQuery, Page
from .base import PageHandler
from .charts import tidy

NODES_PER_PAGE = 100


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


def notice_text(notice: Mapping[str, Any] | None) -> str:
    """A server's most urgent ``notice`` (idle, runtime, budget, booking) in words; empty
    without one. Its words say when the service acts."""
    if not notice:
        return ""
    return str(notice.get("words") or "")


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


def utilization_title(row: Mapping[str, Any]) -> str:
    """What a server's utilization figure is, for its cell's tooltip."""
    if row.get("gpu_utilization_shared"):
        return "the shared GPU's utilization: all the servers on it, not this one alone"
    mig = row.get("gpu_utilization_field") == ENGINE_ACTIVE
    what = "mean of the server's MIG instances" if mig else "mean of the server's GPUs"
    if row.get("gpu_utilization_max") is None:
        return what
    return f"{what}; busiest {utilization_text(row['gpu_utilization_max'])}"


def utilization_cell_text(row: Mapping[str, Any]) -> str:
    """A server's utilization cell: ``50%``, ``41% (shared GPU: all its servers)`` on a
    time-sliced or MPS GPU, ``—`` when not measured."""
    text = utilization_text(row.get("gpu_utilization"))
    if row.get("gpu_utilization") is not None and row.get("gpu_utilization_shared"):
        text = f"{text} ({SHARED_WORDS})"
    return text


def utilization_cells(row: Mapping[str, Any]) -> dict[str, Any]:
    """A server row of ``GET api/v1/servers`` with the texts of its utilization cell."""
    return {
        **row,
        "util_text": utilization_cell_text(row),
        "util_title": utilization_title(row),
        "memory_text": memory_text(row.get("gpu_memory_used_mib"), row.get("gpu_memory_total_mib")),
        "idle_text": idle_text(row.get("idle")),
        "notice_text": notice_text(row.get("notice")),
        "notice_stop": bool((row.get("notice") or {}).get("action") == "stop"),
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
        servers,
        total,
        ctx.state.index,
        ctx.utilization,
        lambda s: ctx.idle.row(registry, s, now),
        lambda s: ctx.notices.row(s, now),
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


# --- the node table ------------------------------------------------------------------------------


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
