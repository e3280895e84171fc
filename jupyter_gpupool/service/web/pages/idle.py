"""The admins' idle page (``{prefix}idle``): the servers whose GPUs are idle under a policy
now, each pool's idle policy, and from the ledger the servers warned in the last days."""

from __future__ import annotations

from typing import Any

from ....core.time.idle import IdlePolicy
from ....core.words.pool_rows import pool_names
from ... import clock
from ...errors import ApiError
from .admin import sentence
from .base import AdminPageHandler
from .parts import server_table

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
