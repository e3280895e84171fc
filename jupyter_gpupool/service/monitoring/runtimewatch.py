"""The runtime limit at work (rules: :mod:`...core.time.runtime`): every ``history_interval`` the
running servers with GPUs in a pool (or of a shape) with ``max-runtime`` are looked at; one
within ``warn`` of its limit is warned (a log line; its ``runtime`` notice in the API, which
the status item, the pages and ``%gpupool status`` show), one past it is stopped through
JupyterHub (the ledger says "limit"), never less than ``warn`` after its warning was first
shown. The servers of exempt users and groups are never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ...core.accounting.budgets import when_text
from ...core.pools.model import Registry
from ...core.time import runtime
from ...core.time.idle import duration_words
from ...core.time.notices import Notice
from ...core.usage.index import ServerUsage, UsageIndex
from ..stopasks import StopAsks
from .idlewatch import cannot_stop, exempt_from, no_groups

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, pod)


class RuntimeWatch:
    def __init__(
        self,
        user_groups: Callable[[str], Awaitable[tuple[str, ...]]] = no_groups,
        stop: Callable[[ServerUsage], Awaitable[None]] = cannot_stop,
    ):
        self.user_groups = user_groups
        self.stop = stop
        #: Told of each server stopped for its runtime, before it is (the ledger says "limit")
        self.on_stop: Callable[[ServerUsage], None] | None = None
        #: When each server's warning was first shown (a stop comes ``warn`` after, at least)
        self.warned: dict[Key, float] = {}
        self.exempt: set[Key] = set()
        self.asked = StopAsks()
        self.stopped = 0

    def limited(
        self, registry: Registry, index: UsageIndex
    ) -> list[tuple[ServerUsage, runtime.RuntimeLimit]]:
        """The running servers with GPUs under a runtime limit, with it."""
        out = []
        for s in index.servers():
            if s.state != "running" or not s.units or not s.pool:
                continue
            limit = runtime.limit_of(registry.pool(s.pool), s)
            if limit is not None:
                out.append((s, limit))
        return out

    async def round(self, registry: Registry, index: UsageIndex, now: float) -> list[ServerUsage]:
        """Warn the servers near their limit, stop those past it; the stopped are returned."""
        limited = self.limited(registry, index)
        keys = {(s.namespace, s.name) for s, _ in limited}
        self.warned = {k: t for k, t in self.warned.items() if k in keys}
        self.exempt &= keys
        self.asked.keep_only(keys)
        due: list[tuple[ServerUsage, str]] = []  # and why
        for s, limit in limited:
            key = (s.namespace, s.name)
            state = runtime.state_of(s, limit, self.warned.get(key))
            if state is None or now < state.warn_at:
                self.warned.pop(key, None)  # a longer limit since: warn again when it nears
                self.exempt.discard(key)
                continue
            if await self._exempt(s, limit):
                self.exempt.add(key)
                continue
            self.exempt.discard(key)
            if key not in self.warned:
                self.warned[key] = now
                state = runtime.state_of(s, limit, now)
                assert state is not None
                log.warning(
                    "Server %s/%s of %s in %s has run for %s (%s): stopped at %s",
                    s.namespace,
                    s.name,
                    s.user,
                    s.pool,
                    duration_words(now - state.since),
                    limit.words(),
                    when_text(state.stop_at),
                )
            if now >= state.stop_at:
                due.append((s, f"it ran for {duration_words(now - state.since)} ({limit.words()})"))
        stopped = await self.asked.stop_due(due, now, self.stop, self.on_stop, log)
        self.stopped += len(stopped)
        return stopped

    async def _exempt(self, s: ServerUsage, limit: runtime.RuntimeLimit) -> bool:
        return await exempt_from(limit, s.user, self.user_groups)

    def notice(self, registry: Registry, s: ServerUsage, now: float) -> Notice | None:
        """A server's ``runtime`` notice, from ``warn`` before its limit."""
        if s.state != "running" or not s.units or not s.pool:
            return None
        key = (s.namespace, s.name)
        limit = runtime.limit_of(registry.pool(s.pool), s)
        if limit is None or key in self.exempt or s.user in limit.exempt_users:
            return None
        # not warned yet by a round: the round that does will say now or later, never earlier
        state = runtime.state_of(s, limit, self.warned.get(key, now))
        if state is None or now < state.warn_at:
            return None
        return runtime.notice(s, limit, state, now)
