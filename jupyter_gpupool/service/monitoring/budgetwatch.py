"""Budgets while servers run (rules: :mod:`...core.time.budget_notices`): every ``history_interval``
the budgets at or past their warning share are found; the running servers with GPUs they pay
for carry a ``budget`` notice (the share spent and when it runs out; then that it is spent);
under ``on_exhausted: stop`` each is stopped through JupyterHub ``budget_grace`` after it was
first warned that the budget is spent (the ledger says "over budget").

The warning times are kept in memory: after a restart a server is warned again and its grace
starts again, so a stop never comes without a warning shown ``grace`` before it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ...core.accounting.budgets import BudgetSessions, hours_text
from ...core.pools.model import Registry
from ...core.time import budget_notices as rules_
from ...core.time.budget_notices import BudgetRules, Standing
from ...core.time.notices import STOP, Notice, most_urgent
from ...core.usage.index import ServerUsage, UsageIndex
from ..stopasks import StopAsks
from .idlewatch import cannot_stop

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, pod)


class BudgetWatch:
    def __init__(
        self,
        rules: BudgetRules | None = None,
        stop: Callable[[ServerUsage], Awaitable[None]] = cannot_stop,
    ):
        self.rules = rules or BudgetRules()
        self.stop = stop
        #: Told of each server stopped over budget, before it is (the ledger says "over budget")
        self.on_stop: Callable[[ServerUsage], None] | None = None
        #: The budgets at or past their warning share, as of the last round
        self.standings: list[Standing] = []
        #: Per server, per spent budget (:func:`~...core.time.budget_notices.key_of`): when it was
        #: first warned that the budget is spent
        self.warned: dict[Key, dict[str, float]] = {}
        self.asked = StopAsks()
        self.stopped = 0

    async def round(
        self, registry: Registry, book: BudgetSessions | None, index: UsageIndex, now: float
    ) -> list[ServerUsage]:
        """Look at the budgets; warn, and stop the servers whose grace is over."""
        if book is None or not registry.budgets:
            self.standings, self.warned = [], {}
            return []
        self.standings = rules_.standings(registry.budgets, book, self.rules, now)
        running = [s for s in index.servers() if s.state == "running" and s.units]
        keys = {(s.namespace, s.name) for s in running}
        self.asked.keep_only(keys)
        warned: dict[Key, dict[str, float]] = {}
        due: list[tuple[ServerUsage, str]] = []  # and why
        for s in running:
            key = (s.namespace, s.name)
            before = self.warned.get(key, {})
            mine: dict[str, float] = {}
            for st in rules_.paying(self.standings, s):
                if not st.exhausted:
                    continue
                bkey = rules_.key_of(st.budget)
                mine[bkey] = before.get(bkey, now)
                if bkey not in before:
                    log.warning(
                        "Budget of %s (%s) is spent (%s GPU-hours used): server %s/%s of %s %s",
                        st.budget.subject,
                        st.budget.words(),
                        hours_text(st.used),
                        s.namespace,
                        s.name,
                        s.user,
                        "warned, stopped after the grace"
                        if st.action == STOP
                        else "warned (on_exhausted: report)",
                    )
            if mine:
                warned[key] = mine  # a budget with hours again is forgotten: warned anew
            found = rules_.due(self.standings, s, mine, now, self.rules)
            if found is not None:
                why = f"the budget of {found.budget.subject} ({found.budget.words()}) is spent"
                due.append((s, why))
        self.warned = warned
        stopped = await self.asked.stop_due(due, now, self.stop, self.on_stop, log)
        self.stopped += len(stopped)
        return stopped

    def notice(self, s: ServerUsage, now: float) -> Notice | None:
        """A server's ``budget`` notice: the most urgent of the budgets that pay for it."""
        warned = self.warned.get((s.namespace, s.name), {})
        return most_urgent(
            rules_.notice(st, warned.get(rules_.key_of(st.budget), now), self.rules)
            for st in rules_.paying(self.standings, s)
        )
