"""The sessions budgets count, in memory, so that admissions never wait for the database.

:class:`BudgetBook` holds the ledger's sessions of the subjects that have a budget (rules:
:mod:`..core.accounting.budgets`): the closed ones still inside the longest window, read from the database
when the budgets change, and the open ones, which the ledger reports as they open and close. An
admission reads it under the desk's lock without any I/O.

When the database cannot be read the book keeps what it has and :attr:`BudgetBook.problem`
says why; budgets then count what the service saw itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ...core.accounting.budgets import Budget

log = logging.getLogger(__name__)

Session = Mapping[str, Any]
#: Reads sessions from the database: (since, users, charged subjects) -> rows.
ReadSessions = Callable[[float, Sequence[str], Sequence[str]], list[dict[str, Any]]]


def _wanted(budgets: Iterable[Budget]) -> tuple[frozenset[str], frozenset[str], float]:
    users = frozenset(b.name for b in budgets if b.kind == "user")
    charged = frozenset(b.subject for b in budgets if b.kind == "group")
    window = max((b.seconds for b in budgets), default=0.0)
    return users, charged, window


class BudgetBook:
    """Sessions by user and by charged subject, for :func:`~..core.accounting.budgets.refusal`."""

    def __init__(self, read: ReadSessions | None, now: Callable[[], float]):
        self.read = read
        self.now = now
        self.users: frozenset[str] = frozenset()
        self.charged: frozenset[str] = frozenset()
        self.window = 0.0
        self._by_user: dict[str, dict[str, Session]] = {}
        self._by_charged: dict[str, dict[str, Session]] = {}
        self._loading: asyncio.Task[None] | None = None
        self.problem = ""

    # --- what budgets read ----------------------------------------------------------------------

    def sessions_for(self, budget: Budget) -> Iterable[Session]:
        index = self._by_user if budget.kind == "user" else self._by_charged
        key = budget.name if budget.kind == "user" else budget.subject
        return list(index.get(key, {}).values())

    # --- following the ledger -------------------------------------------------------------------

    def _add(self, s: Session) -> None:
        uid = str(s["pod_uid"])
        if s.get("user") in self.users:
            self._by_user.setdefault(str(s["user"]), {})[uid] = s
        if s.get("charged") in self.charged:
            self._by_charged.setdefault(str(s["charged"]), {})[uid] = s

    def opened(self, session: Session) -> None:
        self._add(dict(session))

    def closed(self, session: Session, stopped: float) -> None:
        self._add({**session, "stopped": stopped})

    def forget_old(self) -> None:
        """Drop closed sessions that left the longest window."""
        start = self.now() - self.window
        for index in (self._by_user, self._by_charged):
            for key in list(index):
                rows = index[key]
                for uid in [u for u, s in rows.items() if _ended_before(s, start)]:
                    del rows[uid]
                if not rows:
                    del index[key]

    # --- the budgets in force -------------------------------------------------------------------

    def follow(self, budgets: Sequence[Budget], open_sessions: Iterable[Session]) -> None:
        """Budgets changed (or the service started): when they need sessions the book does not
        hold (a new subject, a longer window), read them from the database in the background.
        ``open_sessions``: the ledger's, which are always right."""
        users, charged, window = _wanted(budgets)
        if (users, charged) == (self.users, self.charged) and window <= self.window:
            return
        grown = not (users <= self.users and charged <= self.charged and window <= self.window)
        self.users, self.charged, self.window = users, charged, window
        kept = [
            s for idx in (self._by_user, self._by_charged) for d in idx.values() for s in d.values()
        ]
        self._by_user, self._by_charged = {}, {}
        for s in [*kept, *open_sessions]:
            self._add(s)
        if grown and self.read is not None and (users or charged):
            if self._loading is not None and not self._loading.done():
                self._loading.cancel()
            self._loading = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        assert self.read is not None
        users, charged, since = sorted(self.users), sorted(self.charged), self.now() - self.window
        try:
            rows = await asyncio.to_thread(self.read, since, users, charged)
        except Exception as e:
            self.problem = f"cannot read the sessions budgets count: {e}"
            log.error("%s; budgets count only what the service saw since it started", self.problem)
            return
        self.problem = ""
        for row in rows:
            # open sessions come from the ledger, which knows which still run
            if row.get("stopped") is not None:
                self._add(row)
        log.info(
            "Budgets: %d sessions read for %d budget subjects", len(rows), len(users) + len(charged)
        )

    async def loaded(self) -> None:
        """Wait for a background read (tests, and the start of the service)."""
        if self._loading is not None:
            await asyncio.shield(self._loading)


def _ended_before(s: Session, start: float) -> bool:
    stopped = s.get("stopped")
    return stopped is not None and float(stopped) < start
