"""What a server's GPUs do, in words: the ``gpupool get jobs -o wide`` cells and the
``%gpupool status`` lines, from a row of ``GET api/v1/servers``.

The row carries ``gpu_utilization`` (mean of the server's GPUs, %), ``gpu_utilization_max``,
``gpu_memory_used_mib``, ``gpu_memory_total_mib`` (None when not measured or stale),
``gpu_utilization_shared`` (the figure is a shared GPU's, for all its servers) and ``idle``
(None, or ``{"since", "warned", "stops_at", "action", ...}`` while its GPUs are idle). Durations
are the idle policy's words (:func:`~..time.idle.duration_words`: ``1h05m``, ``55m``), times UTC.

Pure: values in, strings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..accounting.budgets import when_text
from ..time.idle import duration_words

__all__ = [
    "SHARED_WORDS",
    "clock_words",
    "gib",
    "idle_cell",
    "idle_line",
    "memory_cell",
    "percent",
    "utilization_cell",
    "utilization_line",
]

Row = Mapping[str, Any]
MIB_PER_GIB = 1024
#: Said after the figure of a server on a time-sliced or MPS GPU: it is the GPU's, not its own.
SHARED_WORDS = "shared GPU: all its servers"


def percent(value: float | None) -> str | None:
    """``50%`` (whole percent); None for no value."""
    return None if value is None else f"{float(value):.0f}%"


def gib(mib: float, *, decimals: bool = True) -> str:
    """MiB as GiB with one decimal (``31.0``); without ``decimals`` a whole number loses its
    ``.0`` (``160``, but ``22.5``)."""
    text = f"{float(mib) / MIB_PER_GIB:.1f}"
    return text[:-2] if not decimals and text.endswith(".0") else text


def memory_cell(row: Row) -> str | None:
    """``31.0/160 GiB`` (used of total), ``31.0 GiB`` without a total; None when not measured."""
    used, total = row.get("gpu_memory_used_mib"), row.get("gpu_memory_total_mib")
    if used is None:
        return None
    if total is None:
        return f"{gib(used)} GiB"
    return f"{gib(used)}/{gib(total, decimals=False)} GiB"


def _shared(words: str, row: Row) -> str:
    return f"{words} ({SHARED_WORDS})" if row.get("gpu_utilization_shared") else words


def utilization_cell(row: Row) -> str | None:
    """The mean utilization of the server's GPUs, ``50%`` (``41% (shared GPU: all its
    servers)`` on a shared GPU); None when not measured."""
    mean = percent(row.get("gpu_utilization"))
    return None if mean is None else _shared(mean, row)


def utilization_line(row: Row) -> str | None:
    """``50% (max 90%), memory 31.0 of 160 GiB``: the mean, the busiest GPU when it differs,
    and the memory when measured (``41% (shared GPU: all its servers), ...`` on a shared
    GPU); None when the utilization is not measured."""
    mean = percent(row.get("gpu_utilization"))
    if mean is None:
        return None
    most = percent(row.get("gpu_utilization_max"))
    words = _shared(mean if most is None or most == mean else f"{mean} (max {most})", row)
    used, total = row.get("gpu_memory_used_mib"), row.get("gpu_memory_total_mib")
    if used is not None and total is not None:
        words += f", memory {gib(used)} of {gib(total, decimals=False)} GiB"
    elif used is not None:
        words += f", memory {gib(used)} GiB used"
    return words


def clock_words(t: float, now: float) -> str:
    """A time as a clock says it, ``14:05 UTC``, with its date when it is not ``now``'s day
    (``2025-01-30 14:05 UTC``)."""
    when = datetime.fromtimestamp(t, tz=timezone.utc)
    if when.date() == datetime.fromtimestamp(now, tz=timezone.utc).date():
        return when.strftime("%H:%M UTC")
    return when_text(t)


def _idle(idle: Row | None) -> Row | None:
    """``idle`` when it says since when (the API gives null while the GPUs are not idle)."""
    return idle if isinstance(idle, Mapping) and idle.get("since") is not None else None


def idle_cell(idle: Row | None, now: float) -> str | None:
    """A row's ``idle`` as a cell: ``idle 1h05m, stops in 55m``, ``idle 2h, stopping`` (due), ``idle 10m (report)`` (the
    policy only reports), ``idle 10m``; None when the server's GPUs are not idle."""
    idle = _idle(idle)
    if idle is None:
        return None
    words = f"idle {duration_words(now - float(idle['since']))}"
    if idle.get("action") == "report":
        return f"{words} (report)"
    stops_at = idle.get("stops_at")
    if stops_at is None:
        return words
    left = float(stops_at) - now
    return f"{words}, stops in {duration_words(left)}" if left >= 1 else f"{words}, stopping"


def idle_line(idle: Row | None, now: float) -> str | None:
    """A row's ``idle`` as a line: ``idle since 14:05 UTC; will be stopped at 16:05 UTC`` (or
    ``...; being stopped`` once due), ``idle since 14:05 UTC; reported to admins`` (``...; will
    be reported to admins at 16:05 UTC`` before it is due); None when the GPUs are not idle."""
    idle = _idle(idle)
    if idle is None:
        return None
    words = f"idle since {clock_words(float(idle['since']), now)}"
    if idle.get("action") == "report":
        due = idle.get("due_at")
        if due is not None and float(due) > now:
            return f"{words}; will be reported to admins at {clock_words(float(due), now)}"
        return f"{words}; reported to admins"
    stops_at = idle.get("stops_at")
    if stops_at is None:
        return words
    if float(stops_at) > now:
        return f"{words}; will be stopped at {clock_words(float(stops_at), now)}"
    return f"{words}; being stopped"
