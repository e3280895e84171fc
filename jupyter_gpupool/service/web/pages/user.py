"""*My GPUs* (``{prefix}``), every user's own page: the pools they may use with their free GPUs,
their quota in each (:func:`quota_text`), their servers and requests waiting in line, the
bookings they are in (by name or group: the current or next window of each), their servers
stopped lately with how and what their lab saved before the stop (:func:`recent_stops`), and
their own GPU-hours from the ledger (:func:`own_gpu_hours`; when the database is missing or down
the page says why and shows the rest)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ....core.time.saved_work import stop_row
from ....core.words.booking_rows import booking_row, is_member, rows_shown
from ... import clock, views
from ...errors import ApiError
from .admin import sentence
from .base import PageHandler
from .parts import queue_rows, server_table


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
        pools = list(state.pool_summaries(name, groups))
        views.in_users_order(pools, reg, groups)  # as the spawn form and the lab list them
        texts = {
            p["name"]: quota_text(views.pool_quota(reg, index, res, p["name"], name, groups), name)
            for p in pools
        }
        cap = views.quotas(reg, index, res, name, groups)["caps"]["users"].get(name)
        hours, hours_problem = await own_gpu_hours(self.ctx.records, name)
        now = clock.now()
        stops, stops_problem = await recent_stops(self.ctx.records, name, now)
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
            stops=stops,
            stops_problem=stops_problem,
            stops_days=RECENT_STOP_DAYS,
            bookings=rows_shown(
                (b for b in state.bookings if is_member(b, name, groups)),
                lambda b: booking_row(b, now, views.iso),
            )[0],
        )


#: How far back *My GPUs* lists the user's stopped servers.
RECENT_STOP_DAYS = 7


async def recent_stops(records: Any, user: str, now: float) -> tuple[list[dict[str, Any]], str]:
    """``user``'s servers stopped in the last :data:`RECENT_STOP_DAYS` (the latest ten), each
    with how it ended and what its lab saved before the stop; or none and why."""
    try:
        sessions = await records.recent_stops(user, now - RECENT_STOP_DAYS * 86400)
    except ApiError as e:
        if e.status == 503:
            return [], sentence(e.message)
        raise
    return [stop_row(s) for s in sessions], ""


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
