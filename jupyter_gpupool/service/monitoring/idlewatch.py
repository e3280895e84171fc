"""The idle-GPU policy at work (rules: :mod:`..core.time.idle`): after each utilization poll, the
idle clocks of the running servers with GPUs move on; a server due for warning is warned (a log
line, the time in its ledger session; the API's ``idle`` field, which the status item and the
pages show), one due for its action is stopped through JupyterHub (the ledger says "culled")
or, under ``action: report``, listed by ``GET api/v1/idle`` and the Idle GPUs page.

A server with GPUs is one that asks for a GPU of any shape (``nvidia.com/gpu``, a MIG device
``nvidia.com/mig-…``, a renamed shared GPU: its ``units``) or that the utilization source
measures (a GPU device attributed to it). A server on
a shared GPU is judged by the GPU's figure (:mod:`..core.usage.utilization`): it is not idle while
the GPU is busy, even if it does nothing itself (its own share cannot be told apart); once the
GPU is idle, all its servers are, and each is warned and stopped on its own clock as any other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.accounting.budgets import when_text
from ...core.pools.model import Registry
from ...core.time.idle import IdleClock, IdlePolicy, IdleState, TimedRule, duration_words
from ...core.time.notices import REPORT, STOP, Notice
from ...core.usage.amounts import amount_text
from ...core.usage.index import ServerUsage, UsageIndex
from ..stopasks import StopAsks
from .polling import Utilization

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, pod)


async def no_groups(user: str) -> tuple[str, ...]:
    """Without the hub's API no groups are known (then no group is exempt from a policy)."""
    return ()


async def exempt_from(
    rule: TimedRule, user: str, user_groups: Callable[[str], Awaitable[tuple[str, ...]]]
) -> bool:
    """Whether ``rule`` exempts ``user``; their groups are asked of the hub only when it
    exempts groups, and a user whose groups cannot be read counts as exempt (an exempt
    server must never be stopped)."""
    if user in rule.exempt_users:
        return True
    if not rule.exempt_groups:
        return False
    try:
        groups = await user_groups(user)
    except Exception as e:  # no groups, no stopping
        log.warning("Cannot read the groups of %s (%s): not stopping their servers", user, e)
        return True
    return rule.exempts(user, groups)


async def cannot_stop(server: ServerUsage) -> None:
    raise RuntimeError("this IdleWatch cannot stop servers")


class IdleWatch:
    def __init__(
        self,
        default: IdlePolicy | None = None,
        user_groups: Callable[[str], Awaitable[tuple[str, ...]]] = no_groups,
        stop: Callable[[ServerUsage], Awaitable[None]] = cannot_stop,
    ):
        self.default = default
        self.user_groups = user_groups
        self.stop = stop
        #: Told of each server stopped for idleness, before it is (the ledger says "culled").
        self.on_cull: Callable[[ServerUsage], None] | None = None
        #: Told of each server warned, with the time (the ledger keeps it)
        self.on_warn: Callable[[ServerUsage, float], None] | None = None
        self.clock = IdleClock()
        self.warned: set[Key] = set()
        self.asked = StopAsks()
        self.exempt: set[Key] = set()
        self.culled = 0

    def policy_for(self, registry: Registry, pool: str | None) -> IdlePolicy | None:
        found = registry.pool(pool) if pool else None
        return found.idle if found is not None and found.idle is not None else self.default

    def state_of(self, registry: Registry, s: ServerUsage) -> IdleState | None:
        key = (s.namespace, s.name)
        policy = self.policy_for(registry, s.pool)
        if policy is None or key in self.exempt or s.user in policy.exempt_users:
            return None
        return self.clock.state(key, policy)

    async def after_poll(
        self, registry: Registry, index: UsageIndex, utilization: Utilization, now: float
    ) -> list[ServerUsage]:
        """Move the clocks on with the latest measurements; warn and act. The servers asked to
        stop are returned."""
        running = [
            s
            for s in index.servers()
            if s.state == "running"
            and (s.units > 0 or utilization.of(s.namespace, s.name, now) is not None)
        ]
        keys = {(s.namespace, s.name) for s in running}
        self.clock.forget_all_but(keys)
        self.warned &= keys
        self.exempt &= keys
        self.asked.keep_only(keys)
        due: list[tuple[ServerUsage, str]] = []  # and why
        for s in running:
            key = (s.namespace, s.name)
            policy = self.policy_for(registry, s.pool)
            if policy is None:
                self.clock.since.pop(key, None)
                continue
            measured = utilization.of(s.namespace, s.name, now)
            self.clock.observe(
                key, measured.util_max if measured else None, now, policy.below_percent
            )
            state = self.clock.state(key, policy)
            if state is None or now < state.warn_at:
                self.exempt.discard(key)
                continue
            if await self._exempt(s, policy):
                self.exempt.add(key)
                continue
            if key not in self.warned:
                self.warned.add(key)
                log.warning(
                    "Server %s/%s of %s in %s: GPUs idle since %s (%s); %s in %s",
                    s.namespace,
                    s.name,
                    s.user,
                    s.pool,
                    duration_words(now - state.since) + " ago",
                    policy.words(),
                    "stopped" if policy.action == "stop" else "reported",
                    duration_words(state.due_at - now),
                )
                if self.on_warn is not None:
                    self.on_warn(s, now)
            if now >= state.due_at and policy.action == "stop":
                why = (
                    f"its GPUs were idle for {duration_words(now - state.since)} ({policy.words()})"
                )
                due.append((s, why))
        stopped = await self.asked.stop_due(due, now, self.stop, self.on_cull, log)
        self.culled += len(stopped)
        return stopped

    async def _exempt(self, s: ServerUsage, policy: IdlePolicy) -> bool:
        return await exempt_from(policy, s.user, self.user_groups)

    def row(self, registry: Registry, s: ServerUsage, now: float) -> dict[str, Any] | None:
        """A server's ``idle`` field in the API: None unless its GPUs are idle under a policy."""
        state = self.state_of(registry, s)
        return None if state is None else state.as_json(now)

    def notice(self, registry: Registry, s: ServerUsage, now: float) -> Notice | None:
        """A server's ``idle`` notice once it is warned (its notices in the API)."""
        state = self.state_of(registry, s)
        if state is None or now < state.warn_at:
            return None
        idle = f"this server's GPUs have been idle since {when_text(state.since)}"
        if state.action == STOP:
            words = f"{idle}: it stops at {when_text(state.due_at)} unless they get busy"
        else:
            words = f"{idle}: the admins are told at {when_text(state.due_at)}"
        return Notice("idle", words, state.due_at, STOP if state.action == STOP else REPORT)

    def _idle(self, registry: Registry, index: UsageIndex) -> list[tuple[ServerUsage, IdleState]]:
        """Every server idle under a policy with where it stands, the longest idle first."""
        idle = [(s, state) for s in index.servers() if (state := self.state_of(registry, s))]
        return sorted(idle, key=lambda pair: pair[1].since)

    def idle_servers(self, registry: Registry, index: UsageIndex) -> list[ServerUsage]:
        """Every server idle under a policy, the longest idle first."""
        return [s for s, _ in self._idle(registry, index)]

    def candidates(self, registry: Registry, index: UsageIndex, now: float) -> list[dict[str, Any]]:
        """``GET api/v1/idle``: every server idle under a policy, the longest idle first."""
        out = []
        for s, state in self._idle(registry, index):
            policy = self.policy_for(registry, s.pool)
            assert policy is not None  # state_of found one
            out.append(
                {
                    "namespace": s.namespace,
                    "name": s.name,
                    "user": s.user,
                    "server": s.server,
                    "pool": s.pool,
                    "gpus": s.gpus,
                    "shape": s.shape,
                    "gpu_equivalents": amount_text(s.equivalents),
                    **state.as_json(now),
                    "idle_for": now - state.since,
                    "policy": policy.words(),
                }
            )
        return out
