"""The ledger of server sessions: when a server's time on GPUs begins and ends, and how it ended.

A session begins when a server's pod runs (at the pod's ``status.startTime``) and ends when the
pod is gone or finished (at its containers' ``finishedAt`` when the pod says, else when the
service saw it go). Pure: the service feeds pods and the usage index's rows in and writes what
these functions return (``jupyter_gpupool.service.records.ledger``).

GPU-hours are counted from sessions: :func:`gpu_hours` splits each session's overlap with a
window by subject, within and over quota. They are GPU-equivalent hours: a session counts its
``equivalents`` (``1/7`` for a MIG 1g of an A100, ``2`` for two whole GPUs) times its hours; a
session written before shapes were kept has none and counts its ``gpus``
(:func:`session_equivalents`).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from ..documents.whole_numbers import parse_whole
from ..usage.amounts import Amount, amount_text, parse_amount
from ..usage.rows import ServerUsage

#: How a session ended.
STOPPED = "stopped"  # by its user or an admin (or the hub's idle culler: the service can't tell)
RECLAIMED = "reclaimed"  # stopped by the service to give a guarantee back
OVER_BUDGET = "over budget"  # stopped by the service: its GPU-hour budget was spent
CULLED = "culled"  # stopped by the service: its GPUs stayed idle (the idle policy)
LIMIT = "limit"  # stopped by the service: it ran longer than its max-runtime
FAILED = "failed"  # the pod failed
TERMINAL_PHASES = ("Succeeded", "Failed")


def parse_time(text: Any) -> float | None:
    """An RFC 3339 time from the API (``2026-11-23T10:00:00Z``) as epoch seconds."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def started_at(pod: Mapping[str, Any]) -> float | None:
    """When the pod started running: its containers' ``startedAt``, else ``status.startTime``."""
    status = pod.get("status") or {}
    times = [
        parse_time(((c.get("state") or {}).get("running") or {}).get("startedAt"))
        for c in status.get("containerStatuses") or []
    ]
    known = [t for t in times if t is not None]
    return min(known) if known else parse_time(status.get("startTime"))


def finished_at(pod: Mapping[str, Any]) -> float | None:
    """When the pod's containers finished, if it says (the latest ``finishedAt``)."""
    status = pod.get("status") or {}
    times = [
        parse_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in status.get("containerStatuses") or []
    ]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def is_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def how_it_ended(pod: Mapping[str, Any] | None, stopped_by_service: str | None) -> str:
    """``stopped_by_service``: how the service said it was stopping it (reclaimed, over
    budget), if it did."""
    if stopped_by_service:
        return stopped_by_service
    if pod is not None and (pod.get("status") or {}).get("phase") == "Failed":
        return FAILED
    return STOPPED


def session_fields(
    server: ServerUsage, gpu_type: str | None, started: float, now: float
) -> dict[str, Any]:
    """The columns of a new session for a running server."""
    return {
        "pod_uid": server.uid,
        "namespace": server.namespace,
        "pod": server.name,
        "user": server.user,
        "server": server.server,
        "charged": server.charged,
        "pool": server.pool,
        "platform": server.platform,
        "gpu_type": gpu_type,
        "gpus": server.gpus,
        # None for whole GPUs; what it counts in GPU-equivalents, exact, as text ("1/7")
        "shape": server.shape,
        "equivalents": amount_text(server.equivalents),
        "over_quota": server.over_quota,
        "started": started,
        "stopped": None,
        "last_seen": now,
        "ended": None,
    }


def session_equivalents(session: Mapping[str, Any]) -> Amount:
    """What a session counts per hour, in GPU-equivalents: its ``equivalents`` (text as the
    database keeps it, or an amount), else its ``gpus`` (a session written before shapes were
    kept was of whole GPUs)."""
    value = session.get("equivalents")
    if isinstance(value, str):
        parsed = parse_amount(value)
        if parsed is not None:
            return parsed
    elif isinstance(value, int | Fraction) and not isinstance(value, bool):
        return value
    return int(session.get("gpus") or 0)


def session_hours(session: Mapping[str, Any], seconds: float) -> float:
    """GPU-equivalent hours of ``seconds`` of a session."""
    return float(session_equivalents(session)) * seconds / 3600


def close_time(session: Mapping[str, Any], pod: Mapping[str, Any] | None, now: float) -> float:
    """When a session that is no longer running ended: when its pod says, else ``now`` if the
    service saw it go (``pod`` given or seen this moment), never before it started."""
    finished = finished_at(pod) if pod is not None else None
    return max(float(session["started"]), finished if finished is not None else now)


def parse_window(since: str | None, until: str | None, now: float) -> tuple[float, float]:
    """A report's window ``[since, until)``: ``since`` is ``7d``, ``24h`` (before ``now``) or a
    date ``YYYY-MM-DD`` (its start, UTC); ``until`` a date (the start of that day) or ``now``.
    ValueError says what is wrong."""

    def point(text: str, what: str) -> float:
        text = text.strip()
        for unit, seconds in (("d", 86400), ("h", 3600)):
            count = parse_whole(text[:-1]) if text.endswith(unit) else None
            if count is not None:
                return now - count * seconds
        try:
            day = datetime.date.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{what} must be a number of days or hours (7d, 24h) or a date (YYYY-MM-DD), "
                f"not {text!r}"
            ) from None
        start = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc)
        return start.timestamp()

    start = point(since or "7d", "since")
    end = point(until, "until") if until else now
    if end <= start:
        raise ValueError("until must be after since")
    return start, end


REPORT_COLUMNS = ("subject", "gpu_hours", "within_quota", "over_quota", "sessions")
#: The fields of a session :func:`gpu_hours` reads (the database reads only these for a report).
REPORT_FIELDS = (
    "user",
    "pool",
    "charged",
    "gpus",
    "shape",
    "equivalents",
    "over_quota",
    "started",
    "stopped",
)
#: What a report can be split by.
REPORT_BY = ("user", "group", "pool", "shape")
#: The ``shape`` row of the sessions of whole GPUs (and of those written before shapes were kept).
WHOLE_SHAPE = "whole"


def subject_of(session: Mapping[str, Any], by: str) -> str:
    """The row a session counts in: its ``user``, its ``pool``, its ``shape`` (``whole`` for
    whole GPUs), or for ``group`` the group it was charged to (a session charged to its user
    counts as ``(no group)``)."""
    if by == "user":
        return str(session["user"])
    if by == "pool":
        return str(session.get("pool") or "(no pool)")
    if by == "shape":
        return str(session.get("shape") or WHOLE_SHAPE)
    charged = str(session.get("charged") or "")
    return charged.split(":", 1)[1] if charged.startswith("group:") else "(no group)"


def gpu_hours(
    sessions: Iterable[Mapping[str, Any]], since: float, until: float, by: str
) -> list[dict[str, Any]]:
    """GPU-equivalent hours of the sessions within ``[since, until)``, per ``by`` (user, group,
    pool or shape), split within and over quota; an open session counts up to ``until``. Most
    hours first."""
    if by not in REPORT_BY:
        raise ValueError(f"by must be user, group, pool or shape, not {by!r}")
    rows: dict[str, dict[str, Any]] = {}
    for s in sessions:
        start = max(float(s["started"]), since)
        end = min(float(s["stopped"]) if s.get("stopped") is not None else until, until)
        if end <= start or not session_equivalents(s):
            continue
        hours = session_hours(s, end - start)
        row = rows.setdefault(
            subject_of(s, by),
            {
                "subject": subject_of(s, by),
                "gpu_hours": 0.0,
                "within_quota": 0.0,
                "over_quota": 0.0,
                "sessions": 0,
            },
        )
        row["gpu_hours"] += hours
        row["over_quota" if s.get("over_quota") else "within_quota"] += hours
        row["sessions"] += 1
    out = sorted(rows.values(), key=lambda r: (-r["gpu_hours"], r["subject"]))
    for r in out:
        for k in ("gpu_hours", "within_quota", "over_quota"):
            r[k] = round(r[k], 4)
    return out
