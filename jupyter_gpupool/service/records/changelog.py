"""Who changed what: every change to pools, quotas, node labels and servers, with its author.

Each change (through the API, the CLI or the admin pages) is logged at INFO on the
``gpupool.changes`` logger, as ``CHANGE by user admin: created pool t4-pool (...)``, and the
latest are kept in memory for the admin page. The log is the record; the memory is a convenience.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import clock

log = logging.getLogger("gpupool.changes")


@dataclass(frozen=True)
class Change:
    time: float
    who: str  # "user admin", "service gpupool-spawner"
    what: str  # "created pool t4-pool"
    via: str  # "API" or "page"


class ChangeLog:
    def __init__(self, keep: int = 200):
        self._changes: deque[Change] = deque(maxlen=keep)
        #: Also told of each change: the database (``Records.change``), when there is one.
        self.sink: Callable[[float, str, str, str], None] | None = None

    def load(self, changes: Iterable[Mapping[str, Any]]) -> None:
        """Changes kept from before (the database's, newest first): the page shows them too."""
        for c in reversed(list(changes)):
            self._changes.append(Change(c["time"], c["who"], c["what"], c["via"]))

    def take_up(
        self, kept: Iterable[Mapping[str, Any]], sink: Callable[[float, str, str, str], None]
    ) -> None:
        """The database's changes (newest first) come before those made meanwhile, in memory
        only (while the database did not answer), which ``sink`` is now told of; from now on
        it is told of every change."""
        meanwhile = list(self._changes)
        self._changes.clear()
        self.load(kept)
        for change in meanwhile:
            self._changes.append(change)
            sink(change.time, change.who, change.what, change.via)
        self.sink = sink

    def record(self, kind: str, name: str, what: str, via: str = "API") -> Change:
        change = Change(clock.now(), f"{kind} {name}", what, via)
        self._changes.append(change)
        log.info("CHANGE by %s (%s): %s", change.who, via, what)
        if self.sink is not None:
            self.sink(change.time, change.who, change.what, change.via)
        return change

    @property
    def kept(self) -> bool:
        """Whether the changes are kept in the database (and those from before the service's
        last start were loaded from it), not only in memory since the start."""
        return self.sink is not None

    def latest(self, n: int = 50) -> list[Change]:
        """The ``n`` latest changes, newest first."""
        return list(reversed(self._changes))[:n]


# --- what each change says (the API and the pages word them the same) --------------------------


def _names(names: Any) -> str:
    return ", ".join(str(n) for n in names)


def applied_pools(result: Mapping[str, Any]) -> str:
    parts = []
    if result.get("created"):
        parts.append(f"created pool {_names(result['created'])}")
    if result.get("replaced"):
        parts.append(f"replaced pool {_names(result['replaced'])}")
    if result.get("labeled_nodes"):
        parts.append(f"labelled nodes {_names(result['labeled_nodes'])}")
    if result.get("unlabeled_nodes"):
        parts.append(f"took nodes {_names(result['unlabeled_nodes'])} out of their pool")
    return "; ".join(parts) or "applied pool documents (no change)"


def deleted_pool(result: Mapping[str, Any]) -> str:
    what = f"deleted pool {result.get('deleted')}"
    if result.get("unlabeled_nodes"):
        what += f"; nodes {_names(result['unlabeled_nodes'])} back in default"
    running = result.get("servers_still_running") or []
    if running:
        what += f"; {len(running)} server(s) still running there"
    return what


def labelled_node(result: Mapping[str, Any]) -> str:
    changed = result.get("changed") or {}
    if not changed:
        return f"labelled node {result.get('node')} (no change)"
    sets = ", ".join(f"{k}={v}" if v is not None else f"{k} removed" for k, v in changed.items())
    return f"labelled node {result.get('node')}: {sets}"


def replaced_quotas(names: Any) -> str:
    return f"replaced the quota documents ({_names(names) or 'none'})"


def stopped_server(user: str, server: str, pool: str | None) -> str:
    where = f" in {pool}" if pool else ""
    return f"stopped server {user}/{server}{where}"


def applied_bookings(result: Mapping[str, Any]) -> str:
    parts = []
    if result.get("created"):
        parts.append(f"created booking {_names(result['created'])}")
    if result.get("replaced"):
        parts.append(f"replaced booking {_names(result['replaced'])}")
    return "; ".join(parts) or "applied booking documents (no change)"


def deleted_booking(name: str) -> str:
    return f"deleted booking {name}"
