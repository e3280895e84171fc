"""Budgets: GPU-hours a user or a group may use over a rolling window, and what is left.

A quota document's ``budgets:`` list holds :class:`Budget` entries (validated by
:mod:`..pools.reading`, FILE:LINE like the rest of the document)::

    budgets:
      - {group: ml, gpu_hours: 1000, window: 30d}
      - {user: alice, gpu_hours: 100, window: 7d, pools: [a100]}

**What counts** (*decided*; also in ``docs/pools.md``). GPU-hours come from the ledger of server
sessions (:mod:`.ledger`): a session's GPU-equivalents times its time inside the window
``[now - window, now]`` (two whole GPUs count 2 per hour, a MIG 1g of an A100 1/7: seven hours
of it are one GPU-hour); a running server counts up to now. A user's budget counts every session of that user; a
group's budget counts the sessions charged to that group (the group whose quota they counted
against, as the GPU-hours report's ``by=group``). ``pools`` limits a budget to sessions in those
pools (none: all pools).

**What it does.** An admission that would start a server with GPUs is refused in a pool where a
budget of the user, or of the group it would be charged to, is spent (``spent >= gpu_hours``):
:func:`refusal` says spent / budget and when hours come back (:func:`back_at`: the first moment
the window has slid past enough old hours, if the subject's running servers stopped now).
Servers without a GPU of any shape are never refused. What a spent budget does to the running
servers it pays for (:func:`pays_for`: a server charged to a group is paid by the group's budget,
not its user's) is in :mod:`..time.budget_notices`: a warning, then a stop under ``on_exhausted: stop``.

Pure: sessions come in as mappings (the ledger's rows), ``now`` is given.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..documents.durations import window_seconds
from ..usage.labels import BOOKING_SUBJECT_PREFIX
from .ledger import session_equivalents, session_hours


def window_words(text: str) -> str:
    """``30d`` -> ``30 days``, ``1d`` -> ``day``, ``12h`` -> ``12 hours`` (after "per")."""
    n, unit = int(text[:-1]), {"h": "hour", "d": "day"}[text[-1]]
    return unit if n == 1 else f"{n} {unit}s"


@dataclass(frozen=True)
class Budget:
    """GPU-hours ``subject`` (``user:NAME`` or ``group:NAME``) may use over ``window`` (``30d``),
    in ``pools`` (empty: all pools)."""

    subject: str
    gpu_hours: float
    window: str = "30d"
    pools: tuple[str, ...] = ()
    #: What becomes of the running servers it pays for once spent: ``stop`` or ``report``
    #: (None: the service's default, ``report`` unless ``stop_over_budget`` is set)
    on_exhausted: str | None = None
    #: The share spent (%) at which their users are warned (None: the service's default)
    warn_percent: float | None = None
    source: Any = field(default=None, compare=False)  # a pools.Source: where it was written

    @property
    def kind(self) -> str:
        return self.subject.split(":", 1)[0]

    @property
    def name(self) -> str:
        return self.subject.split(":", 1)[1]

    @property
    def seconds(self) -> float:
        return window_seconds(self.window)

    def covers(self, pool: str | None) -> bool:
        return not self.pools or (pool or "") in self.pools

    def matches(self, session: Mapping[str, Any]) -> bool:
        """Whether a ledger session counts against this budget."""
        if not self.covers(session.get("pool")):
            return False
        if self.kind == "user":
            return session.get("user") == self.name
        return session.get("charged") == self.subject

    def words(self) -> str:
        """``1000 GPU-hours per 30 days in a100, h100``."""
        where = f" in {', '.join(self.pools)}" if self.pools else ""
        return f"{hours_text(self.gpu_hours)} GPU-hours per {window_words(self.window)}{where}"


def hours_text(hours: float) -> str:
    """GPU-hours as people write them: ``100``, ``12.5``, ``0.25``."""
    return f"{round(hours, 2):g}"


class BudgetSessions(Protocol):
    """What budgets read: the sessions that may count against a budget (the service's
    :class:`~jupyter_gpupool.service.records.budgetbook.BudgetBook`). It may return more than match."""

    def sessions_for(self, budget: Budget) -> Iterable[Mapping[str, Any]]: ...


def _overlap(s: Mapping[str, Any], start: float, end: float, cut: float) -> float:
    """Seconds of session ``s`` in ``[start, end]``; an open session (or one past ``cut``)
    runs until ``cut``."""
    stopped = s.get("stopped")
    s_end = min(float(stopped) if stopped is not None else cut, cut)
    return max(0.0, min(s_end, end) - max(float(s["started"]), start))


def spent(budget: Budget, sessions: Iterable[Mapping[str, Any]], now: float) -> float:
    """GPU-equivalent hours of the matching ``sessions`` inside ``[now - window, now]``."""
    start = now - budget.seconds
    return sum(
        session_hours(s, _overlap(s, start, now, now)) for s in sessions if budget.matches(s)
    )


def back_at(budget: Budget, sessions: Iterable[Mapping[str, Any]], now: float) -> float | None:
    """When a spent budget has hours again if nothing more runs after ``now``: the first time
    the window has slid past enough old hours (to the minute, rounded up). None when it is not
    spent."""
    mine = [s for s in sessions if budget.matches(s) and session_equivalents(s)]
    w = budget.seconds

    def used(t: float) -> float:
        return sum(session_hours(s, _overlap(s, t - w, t, now)) for s in mine)

    if used(now) < budget.gpu_hours:
        return None
    low, high = now, now + w  # used(now + w) is 0: everything before now has left the window
    if budget.gpu_hours <= 0:
        return None  # a budget of 0 never has hours
    while high - low > 1.0:
        mid = (low + high) / 2
        if used(mid) < budget.gpu_hours:
            high = mid
        else:
            low = mid
    return math.ceil(high / 60) * 60


def applying(
    budgets: Sequence[Budget], user: str, groups: Iterable[str], pool: str | None = None
) -> list[Budget]:
    """The budgets of ``user`` and of their ``groups`` (in ``pool``, when given)."""
    mine = {f"user:{user}", *(f"group:{g}" for g in groups)}
    return [b for b in budgets if b.subject in mine and (pool is None or b.covers(pool))]


def when_text(t: float) -> str:
    """``2026-11-25 14:05 UTC``."""
    when = datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _whose(budget: Budget) -> str:
    return "your budget" if budget.kind == "user" else f"the budget of your group {budget.name}"


def refusal(
    budgets: Sequence[Budget],
    user: str,
    charged: str,
    pool: str,
    book: BudgetSessions,
    now: float,
) -> str | None:
    """Why a server with GPUs for ``user``, charged to ``charged``, may not start in ``pool``:
    the first of their budgets there that is spent. None when none is."""
    for budget in budgets:
        if not budget.covers(pool) or budget.subject not in (f"user:{user}", charged):
            continue
        sessions = list(book.sessions_for(budget))
        used = spent(budget, sessions, now)
        if used < budget.gpu_hours:
            continue
        back = back_at(budget, sessions, now)
        running = any(budget.matches(s) and s.get("stopped") is None for s in sessions)
        if back is None:
            comes = "it has no hours to give"
        else:
            comes = f"hours come back from {when_text(back)}"
            if running:
                comes += " if the running servers it pays for stop now"
        return (
            f"{_whose(budget)} of {budget.words()} is spent "
            f"({hours_text(used)} GPU-hours used); {comes}"
        )
    return None


def budget_rows(
    budgets: Sequence[Budget], book: BudgetSessions, now: float
) -> list[dict[str, Any]]:
    """What is left of each budget, for ``GET api/v1/launch-options`` and the pages."""
    rows = []
    for budget in budgets:
        sessions = list(book.sessions_for(budget))
        used = spent(budget, sessions, now)
        rows.append(
            {
                "subject": budget.subject,
                "gpu_hours": budget.gpu_hours,
                "window": budget.window,
                "pools": list(budget.pools),
                "spent": round(used, 4),
                "remaining": round(max(0.0, budget.gpu_hours - used), 4),
                "back_at": back_at(budget, sessions, now),
            }
        )
    return rows


def over_budget(
    budgets: Sequence[Budget], book: BudgetSessions, now: float
) -> list[tuple[Budget, float]]:
    """The budgets that are spent now, with what was used."""
    out = []
    for budget in budgets:
        used = spent(budget, book.sessions_for(budget), now)
        if used >= budget.gpu_hours:
            out.append((budget, used))
    return out


def pays_for(budget: Budget, server: Any) -> bool:
    """Whether ``budget`` pays for a server (a :class:`~..usage.rows.ServerUsage` row) in its
    pools: a server charged to a group is paid by the group's budget, not its user's; one
    admitted within a booking (``booking:NAME``) by none (the booking is the admin's word for
    its window; its hours still count in its user's budget); any other server by its user's
    budget."""
    if not budget.covers(server.pool):
        return False
    charged = server.charged or ""
    if charged.startswith(BOOKING_SUBJECT_PREFIX):
        return False
    if charged.startswith("group:"):
        return bool(budget.subject == charged)
    return budget.kind == "user" and budget.name == server.user


def paid_by(spent_budgets: Iterable[Budget], servers: Iterable[Any]) -> list[Any]:
    """The running servers with a GPU of any shape that the ``spent_budgets`` pay for
    (:func:`pays_for`; ``servers``: :class:`~..usage.rows.ServerUsage` rows; a MIG device's server
    asks for no ``nvidia.com/gpu`` but has ``units``)."""
    spent = list(spent_budgets)
    return [
        s
        for s in servers
        if s.state == "running" and s.units and any(pays_for(b, s) for b in spent)
    ]
