"""The runtime limit: a server with GPUs that has run longer than its pool's (or its shape's)
``max-runtime`` is warned, then stopped.

A pool file's ``max-runtime`` section, on the pool or on an entry of its ``shapes`` list (the
shape's overrides the pool's for servers of that shape)::

    max-runtime: {after: 8h, warn: 15m, exempt: {users: [alice], groups: [long-jobs]}}

**The clock** (*decided*; also in ``docs/pools.md``). A server's runtime counts from its pod's
start (``creationTimestamp``), whatever it does meanwhile. ``warn`` before ``after`` is reached
the server is warned (a notice with the time it stops); at ``after`` it is stopped through the
hub and its ledger session ends ``limit``. A stop never comes less than ``warn`` after the
service first showed the warning: a server already past its limit when the service first sees
it (a limit added to a running pool, a service that was down) is warned then, and stopped
``warn`` later. Servers without GPUs, and the servers of exempt users and groups, are never
touched.

Pure: the service keeps when it warned each server (``service.monitoring.runtimewatch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..accounting.budgets import when_text
from ..accounting.ledger import parse_time
from ..usage.rows import ServerUsage
from .idle import TimedRule, duration_words
from .notices import STOP, Notice


@dataclass(frozen=True)
class RuntimeLimit(TimedRule):
    """How long a server with GPUs may run, and how long before the stop its user is warned."""

    after: str
    warn: str | None = None
    exempt_users: tuple[str, ...] = ()
    exempt_groups: tuple[str, ...] = ()
    source: Any = field(default=None, compare=False)  # a pools.Source: where it was written

    def words(self) -> str:
        """``at most 8h (warned 15m before; then stopped)``."""
        return f"at most {self.after} (warned {duration_words(self.warn_seconds)} before; then stopped)"


def limit_from_mapping(data: Mapping[str, Any]) -> RuntimeLimit:
    """A :class:`RuntimeLimit` from a checked ``max-runtime`` mapping."""
    exempt = data.get("exempt") or {}
    return RuntimeLimit(
        after=str(data["after"]),
        warn=str(data["warn"]) if data.get("warn") else None,
        exempt_users=tuple(exempt.get("users") or ()),
        exempt_groups=tuple(exempt.get("groups") or ()),
    )


def limit_of(pool: Any, server: ServerUsage) -> RuntimeLimit | None:
    """The limit in force for a server in ``pool`` (a :class:`~..pools.model.Pool`, or None): its
    shape's (``whole`` for whole GPUs) when the pool's ``shapes`` entry sets one, else the
    pool's."""
    if pool is None:
        return None
    rule = pool.shape_rule(server.shape or "whole")
    if rule is not None and rule.max_runtime is not None:
        limit: RuntimeLimit | None = rule.max_runtime
        return limit
    found: RuntimeLimit | None = pool.max_runtime
    return found


def started(server: ServerUsage) -> float | None:
    """When the server's pod started (its ``creationTimestamp``), epoch seconds."""
    return parse_time(server.created)


@dataclass(frozen=True)
class RuntimeState:
    """Where one server stands: started at ``since``; due at ``due_at`` (its limit), warned
    from ``warn_at``; ``stop_at`` is when it is stopped: the due time, or ``warn`` after the
    warning was first shown when that is later."""

    since: float
    warn_at: float
    due_at: float
    stop_at: float


def state_of(
    server: ServerUsage, limit: RuntimeLimit, warned_at: float | None
) -> RuntimeState | None:
    """Where ``server`` stands under ``limit``; ``warned_at``: when the service first showed its
    warning (None: not yet). None when its start is unknown."""
    since = started(server)
    if since is None:
        return None
    due = since + limit.after_seconds
    warn_at = due - limit.warn_seconds
    stop_at = due if warned_at is None else max(due, warned_at + limit.warn_seconds)
    return RuntimeState(since, warn_at, due, stop_at)


def notice(server: ServerUsage, limit: RuntimeLimit, state: RuntimeState, now: float) -> Notice:
    """The warning a user reads while their server nears (or passed) its limit."""
    ran = duration_words(now - state.since)
    return Notice(
        "runtime",
        f"this server has run for {ran}; servers here may run {limit.after}: it stops at "
        f"{when_text(state.stop_at)}",
        state.stop_at,
        STOP,
    )
