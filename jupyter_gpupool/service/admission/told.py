"""How often the line tells a waiting entry's new place (``POST api/v1/admissions/wait``).

When the first entry in line is admitted, every place behind it moves up one: with a thousand
entries held by the hub's batch questions and the line moving every fraction of a second, each
move would re-answer every entry. A new place is news worth at most one answer per entry every
``every`` seconds (``c.GPUPoolService.queue_place_interval``); a change of state (admitted,
back in line, cancelled, unknown) is always answered at once, and so is an entry whose place
was never told. The rule is :func:`place_alone`; :class:`PlacesTold` keeps when each entry's
place was last told.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable

from ...core.admission.queue import QUEUED

Heard = tuple[str, "int | None"] | None


def place_alone(now: tuple[str, int | None] | None, heard: Heard) -> bool:
    """Whether what differs between what the asker ``heard`` and the entry ``now`` is its
    place alone (both in line, at different places)."""
    return now is not None and heard is not None and now[0] == heard[0] == QUEUED


class PlacesTold:
    def __init__(self, every: float = 1.0):
        #: Seconds between two answers about one entry's place alone (0: every move)
        self.every = every
        self._at: dict[str, float] = {}

    def due(self, admission_id: str) -> float:
        """When a new place of the entry may be told (the past: now)."""
        return self._at.get(admission_id, -math.inf) + self.every

    def told(self, ids: Iterable[str], at: float, waiting: Collection[str]) -> None:
        """The places of ``ids`` were answered ``at``; entries no longer ``waiting`` are
        forgotten now and then."""
        for admission_id in ids:
            self._at[admission_id] = at
        if len(self._at) > 2 * len(waiting) + 100:
            self._at = {i: t for i, t in self._at.items() if i in waiting}
