"""The notice board: every warning about a running server, from every rule that may stop it.

Each rule registers a *provider*, ``(server, now) -> Notice | None`` (:mod:`...core.time.notices`):
the idle watch, the runtime limit and the budgets here; a booking's reclaim registers its own
with :meth:`NoticeBoard.add`. ``GET api/v1/servers`` gives each server's notices, most urgent
first (``notices``), and that first one (``notice``); My GPUs, ``%gpupool status`` and the
JupyterLab status item show it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...core.time.notices import Notice, most_urgent, ordered
from ...core.usage.index import ServerUsage

log = logging.getLogger(__name__)

Provider = Callable[[ServerUsage, float], "Notice | None"]


class NoticeBoard:
    """The providers of notices, asked in turn for each server shown."""

    def __init__(self, providers: tuple[Provider, ...] = ()) -> None:
        self.providers: list[Provider] = list(providers)

    def add(self, provider: Provider) -> None:
        """One more rule's notices (a booking's reclaim, say)."""
        self.providers.append(provider)

    def notices(self, server: ServerUsage, now: float) -> list[Notice]:
        """The server's notices, most urgent first. A provider that fails is logged and left
        out: the list of servers must still answer."""
        found: list[Notice | None] = []
        for provider in self.providers:
            try:
                found.append(provider(server, now))
            except Exception:
                log.exception("A notice provider failed for %s/%s", server.namespace, server.name)
        return ordered(found)

    def row(self, server: ServerUsage, now: float) -> dict[str, Any]:
        """A server's ``notices`` and ``notice`` fields in the API."""
        found = self.notices(server, now)
        first = most_urgent(found)
        return {
            "notices": [n.as_json() for n in found],
            "notice": first.as_json() if first is not None else None,
        }
