"""What a GPU-hour budget does while the servers it pays for run: warn, then (maybe) stop.

**The rule** (*decided*; also in ``docs/pools.md``). The running servers with GPUs a
budget pays for (:func:`~..accounting.budgets.pays_for`: a server charged to a group is paid by the group's
budget, not its user's) are warned when the budget's share spent reaches its ``warn_percent``
(default: the service's ``budget_warn_percent``, 90), with the time it runs out at the rate of
what runs now; and again when it is spent. Then, under ``on_exhausted: stop``, each is stopped
through the hub ``grace`` after that second warning was first shown to it (the ledger says
"over budget"); under ``on_exhausted: report`` (the default, so that an upgrade stops nothing
by surprise) nothing more happens: new servers are refused, running ones run on. A stop never
comes less than ``grace`` after its warning: the service keeps when it first warned each
server; after a restart the grace starts again.

Pure: the service's watch (``service.monitoring.budgetwatch``) feeds the sessions and servers
and keeps the warning times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..accounting.budgets import Budget, BudgetSessions, hours_text, pays_for, spent, when_text
from ..accounting.ledger import session_equivalents
from .idle import duration_words
from .notices import REPORT, STOP, Notice

ON_EXHAUSTED = (STOP, REPORT)


@dataclass(frozen=True)
class BudgetRules:
    """The service's defaults for budgets that do not say, and the grace before a stop."""

    warn_percent: float = 90.0
    grace_seconds: float = 900.0
    on_exhausted: str = REPORT

    def action_of(self, budget: Budget) -> str:
        return budget.on_exhausted or self.on_exhausted

    def warn_share(self, budget: Budget) -> float:
        pct = budget.warn_percent if budget.warn_percent is not None else self.warn_percent
        return pct / 100.0


@dataclass(frozen=True)
class Standing:
    """A budget at or past its warning share: ``used`` GPU-hours, ``runs_out_at`` (at the rate
    of its open sessions; None when spent or nothing runs), what happens once it is spent."""

    budget: Budget
    used: float
    runs_out_at: float | None
    action: str

    @property
    def exhausted(self) -> bool:
        return self.used >= self.budget.gpu_hours

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.budget.gpu_hours if self.budget.gpu_hours else 100.0


def standings(
    budgets: Sequence[Budget], book: BudgetSessions, rules: BudgetRules, now: float
) -> list[Standing]:
    """The budgets at or past their warning share now."""
    out = []
    for budget in budgets:
        sessions = list(book.sessions_for(budget))
        used = spent(budget, sessions, now)
        if used < rules.warn_share(budget) * budget.gpu_hours and used < budget.gpu_hours:
            continue
        rate = sum(
            float(session_equivalents(s))
            for s in sessions
            if budget.matches(s) and s.get("stopped") is None
        )
        left = budget.gpu_hours - used
        runs_out = now + left / rate * 3600.0 if left > 0 and rate > 0 else None
        out.append(Standing(budget, used, runs_out, rules.action_of(budget)))
    return out


def _whose(budget: Budget) -> str:
    return "your budget" if budget.kind == "user" else f"the budget of your group {budget.name}"


def notice(standing: Standing, warned_at: float, rules: BudgetRules) -> Notice:
    """The warning for a server ``standing``'s budget pays for; ``warned_at``: when the service
    first showed this server that the budget is spent (now, when it has not yet), for a stop:
    its deadline is ``grace`` later."""
    b = standing.budget
    whose = f"{_whose(b)} of {b.words()}"
    if not standing.exhausted:
        words = f"{whose} is {standing.percent:.0f}% spent"
        if standing.runs_out_at is not None:
            words += f"; at this rate it runs out at {when_text(standing.runs_out_at)}"
        if standing.action == STOP:
            words += (
                f", and this server is stopped {duration_words(rules.grace_seconds)} after that"
            )
        return Notice("budget", words, standing.runs_out_at, REPORT)
    words = f"{whose} is spent ({hours_text(standing.used)} GPU-hours used)"
    if standing.action != STOP:
        return Notice(
            "budget", words + "; no new server with GPUs starts until hours come back", None, REPORT
        )
    deadline = warned_at + rules.grace_seconds
    return Notice("budget", f"{words}: this server stops at {when_text(deadline)}", deadline, STOP)


def paying(standing_list: Iterable[Standing], server: Any) -> list[Standing]:
    """The standings of the budgets that pay for ``server`` (running, with GPUs)."""
    if server.state != "running" or not server.units:
        return []
    return [st for st in standing_list if pays_for(st.budget, server)]


def due(
    standing_list: Iterable[Standing],
    server: Any,
    warned_at: Mapping[str, float],
    now: float,
    rules: BudgetRules,
) -> Standing | None:
    """The spent ``stop`` budget whose grace for ``server`` is over (``warned_at``: when the
    server was first shown each budget's spent warning, by :func:`key_of`; a budget it was never
    shown is never due), or None."""
    for st in paying(standing_list, server):
        if not st.exhausted or st.action != STOP:
            continue
        at = warned_at.get(key_of(st.budget))
        if at is not None and now >= at + rules.grace_seconds:
            return st
    return None


def key_of(budget: Budget) -> str:
    """One budget among the registry's: its subject and pools."""
    return f"{budget.subject} in {','.join(budget.pools) or '*'}"
