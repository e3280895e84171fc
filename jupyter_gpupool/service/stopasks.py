"""The servers the service asked the hub to stop, so that each is asked once, and again only
if it still runs a minute later. The watches that stop running servers share it: the idle
policy's, the runtime limit's, the budgets' and the bookings'."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable

from ..core.usage.rows import ServerUsage

log = logging.getLogger(__name__)

#: A server asked to stop is asked again if it still runs this much later.
ASK_AGAIN = 60.0

Key = tuple[str, str]


def key_of(server: ServerUsage) -> Key:
    return (server.namespace, server.name)


class StopAsks:
    def __init__(self, again: float = ASK_AGAIN):
        self.again = again
        #: (namespace, name) -> when it was last asked to stop
        self.asked: dict[Key, float] = {}

    def keep_only(self, keys: Collection[Key]) -> None:
        """Forget the servers that are gone (not in ``keys``)."""
        self.asked = {k: t for k, t in self.asked.items() if k in keys}

    def forget_before(self, t: float) -> None:
        """Forget what was asked before ``t``."""
        self.asked = {k: at for k, at in self.asked.items() if at >= t}

    def due(self, server: ServerUsage, now: float) -> bool:
        """Whether to ask for ``server`` now (never asked, or asked ``again`` seconds ago and
        still running); remembered as asked when it is."""
        key = key_of(server)
        if now - self.asked.get(key, float("-inf")) < self.again:
            return False
        self.asked[key] = now
        return True

    async def stop_due(
        self,
        due: Iterable[tuple[ServerUsage, str]],
        now: float,
        stop: Callable[[ServerUsage], Awaitable[None]],
        told: Callable[[ServerUsage], None] | None = None,
        logger: logging.Logger = log,
    ) -> list[ServerUsage]:
        """Stop each server of ``due`` (with why, for the log) that is :meth:`due` to be asked:
        ``told`` first (the ledger notes how its session ends), then ``stop`` (through the
        hub); the servers asked, in order."""
        stopped = []
        for s, why in due:
            if not self.due(s, now):
                continue
            logger.warning("Stopping server %s/%s of %s: %s", s.namespace, s.name, s.user, why)
            if told is not None:
                told(s)
            await stop(s)
            stopped.append(s)
        return stopped
