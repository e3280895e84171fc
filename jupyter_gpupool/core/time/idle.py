"""The idle-GPU policy: a server whose GPUs all stayed under a threshold for long enough is
warned, then stopped (or only reported).

A pool file's ``idle`` section, or the service's ``c.GPUPoolService.idle_policy`` for pools
without one::

    idle: {below_percent: 5, after: 2h, warn: 15m, action: stop,
           exempt: {users: [alice], groups: [long-jobs]}}

**The clock** (*decided*; also in ``docs/pools.md``). A server's idle time starts at the first
measurement where its busiest GPU is under ``below_percent`` and runs while every measurement
stays so. Any GPU activity (a measurement at or above the threshold) stops it; so does a poll
without a fresh measurement of the server: no data is not idle, so a source that is down never
stops a server. ``warn`` before ``after`` is reached the server is warned; at ``after`` it is
stopped (``action: stop``) or listed (``action: report``). Servers without GPUs, and the servers
of exempt users and groups, are never touched.

**Every shape** (*decided*; also in ``docs/shapes.md``). A server on a MIG instance is judged by
its instance's activity (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``). A server on a time-sliced or MPS GPU is judged by
its GPU's utilization, the only figure the exporter gives: while the GPU is busy none of its
servers is idle, even one that does nothing itself; when the GPU is idle all of them are, and
each runs on its own clock (warned and stopped as any server), so a shared GPU left idle is
given back whole.

Pure: the service feeds measurements in (``jupyter_gpupool.service.monitoring.idlewatch``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..documents.durations import duration_seconds

ACTIONS = ("stop", "report")


def duration_words(seconds: float) -> str:
    """``1h05m``, ``55m``, ``20s``."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m" if not sec else f"{m}m{sec:02d}s"
    return f"{sec}s"


#: How long before its stop a server is warned when a rule does not say.
DEFAULT_WARN = "15m"


class TimedRule:
    """What a rule that stops a server ``after`` some time, warning ``warn`` before, with its
    exempt users and groups, shares (:class:`IdlePolicy`, ``runtime.RuntimeLimit``)."""

    after: str
    warn: str | None
    exempt_users: tuple[str, ...]
    exempt_groups: tuple[str, ...]

    @property
    def after_seconds(self) -> float:
        return duration_seconds(self.after)

    @property
    def warn_seconds(self) -> float:
        """``warn`` (default 15 minutes), at most all of ``after``."""
        return min(duration_seconds(self.warn or DEFAULT_WARN), self.after_seconds)

    def exempts(self, user: str, groups: Iterable[str]) -> bool:
        return user in self.exempt_users or any(g in self.exempt_groups for g in groups)


@dataclass(frozen=True)
class IdlePolicy(TimedRule):
    """When a server's GPUs count as idle, and what is done about it."""

    below_percent: float = 5.0
    after: str = "2h"
    warn: str | None = None  # default: 15 minutes, or all of ``after`` when that is shorter
    action: str = "stop"
    exempt_users: tuple[str, ...] = ()
    exempt_groups: tuple[str, ...] = ()
    source: Any = field(default=None, compare=False)  # a pools.Source: where it was written

    def words(self) -> str:
        """``under 5% for 2h (warned 15m before; then stopped)``."""
        then = "stopped" if self.action == "stop" else "reported"
        warn = duration_words(self.warn_seconds)
        return f"under {self.below_percent:g}% for {self.after} (warned {warn} before; then {then})"


def policy_from_mapping(data: Mapping[str, Any]) -> IdlePolicy:
    """An :class:`IdlePolicy` from a checked ``idle`` mapping (pool file or service config)."""
    exempt = data.get("exempt") or {}
    return IdlePolicy(
        below_percent=float(data.get("below_percent", 5)),
        after=str(data.get("after", "2h")),
        warn=str(data["warn"]) if data.get("warn") else None,
        action=str(data.get("action", "stop")),
        exempt_users=tuple(exempt.get("users") or ()),
        exempt_groups=tuple(exempt.get("groups") or ()),
    )


@dataclass(frozen=True)
class IdleState:
    """Where one server stands: idle since ``since``; warned from ``warn_at``; due at ``due_at``
    (stopped or reported then)."""

    since: float
    warn_at: float
    due_at: float
    action: str

    def as_json(self, now: float) -> dict[str, Any]:
        return {
            "since": self.since,
            "warned": now >= self.warn_at,
            "stops_at": self.due_at if self.action == "stop" else None,
            "due_at": self.due_at,
            "action": self.action,
        }


class IdleClock:
    """Since when each server's GPUs have been idle, measurement after measurement."""

    def __init__(self) -> None:
        self.since: dict[Any, float] = {}

    def observe(self, key: Any, util_max: float | None, at: float, below_percent: float) -> None:
        """One poll's measurement of a server: its busiest GPU's utilization, or None when the
        poll has no fresh measurement of it (no data is not idle)."""
        if util_max is None or util_max >= below_percent:
            self.since.pop(key, None)
        else:
            self.since.setdefault(key, at)

    def forget_all_but(self, keys: Iterable[Any]) -> None:
        keep = set(keys)
        for key in [k for k in self.since if k not in keep]:
            del self.since[key]

    def state(self, key: Any, policy: IdlePolicy) -> IdleState | None:
        since = self.since.get(key)
        if since is None:
            return None
        due = since + policy.after_seconds
        return IdleState(since, due - policy.warn_seconds, due, policy.action)
