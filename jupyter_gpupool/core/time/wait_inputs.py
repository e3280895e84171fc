"""What the wait estimate reads (:mod:`.wait_estimate`): the history of durations, what the
servers hold, what the requests in line ask for and how quota lets them in; and when a server
should end.

Pure, plain figures: the service (:mod:`jupyter_gpupool.service.admission.waits`) fills them in.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "BY_POOL",
    "BY_SHAPE",
    "HIGH_Q",
    "HOLD_BACK",
    "LOW_Q",
    "MIN_SESSIONS",
    "OUTLIVED",
    "UNMANAGED",
    "Ask",
    "Coming",
    "Held",
    "History",
    "Key",
    "Place",
    "Terms",
    "expected_end",
    "median",
    "quantile",
]

#: Fewer ended sessions of a kind than this in the history: no estimate for it (*decided*: with
#: 5 sessions the conditional median is already a session's figure, not a single outlier's).
MIN_SESSIONS = 5
#: Seconds a server that has outlived every session of its kind is still given.
OUTLIVED = 15 * 60.0
#: The range: every duration at these quantiles of its kind's (*decided*: the quartiles)
LOW_Q, HIGH_Q = 0.25, 0.75
#: What a request waiting within quota holds back from borrowers: its whole pool (as the line
#: did before it held by shape), or only the pool and shape it asks for
BY_POOL, BY_SHAPE = "pool", "shape"
#: As admission does it (``AdmissionState.promised``, :mod:`~..admission.holds`: the shape, in
#: that pool; the replay leaves out that a hold of whole GPUs covers only the nodes of its GPU
#: type big enough for it)
HOLD_BACK = BY_SHAPE

Key = tuple[str, "str | None"]  # (pool, shape id or None for whole GPUs)
Place = tuple[str, "str | None", "str | None"]  # (pool, shape, node or None)


@dataclass(frozen=True)
class History:
    """Ended sessions' durations (seconds, sorted) per ``(pool, shape)`` over the last ``days``."""

    durations: Mapping[Key, Sequence[float]]
    days: float

    def of(self, pool: str, shape: str | None) -> Sequence[float] | None:
        """The durations of this kind, when there are at least :data:`MIN_SESSIONS`."""
        found = self.durations.get((pool, shape), ())
        return found if len(found) >= MIN_SESSIONS else None


@dataclass(frozen=True)
class Held:
    """What a server (or a reservation) holds: ``units`` of ``shape`` (None: whole GPUs) in
    ``pool`` (on ``node``) since ``started``; ``sure_end``: when something ends it for sure (None: nothing
    known), ``sure_why`` in words (``an idle stop``)."""

    pool: str
    shape: str | None
    units: int
    started: float
    sure_end: float | None = None
    sure_why: str = ""
    #: The node it runs on (whole GPUs are counted per node: a request needs them on one)
    node: str | None = None
    #: The quota counters it counts against (:class:`Terms`), ``amount`` GPU-equivalents each
    counters: tuple[str, ...] = ()
    amount: float = 0.0


@dataclass(frozen=True)
class Coming:
    """Units that no server frees but a MIG re-cut brings: ``units`` of ``shape`` (None: whole
    GPUs, on ``node``) in ``pool`` from ``at`` on; ``why`` in words (``gpu-node-2 is re-cut
    into 1g.10gb instances``)."""

    pool: str
    shape: str | None
    units: int
    at: float
    why: str = ""
    node: str | None = None


@dataclass(frozen=True)
class Terms:
    """How quota lets a request into one pool, as plain figures the replay re-reads as its
    counters change (the service reads them off the quota rules: ``service/admission/waits``).

    Counters are names (``training-pool group:ml-research``) of GPU-equivalents used. Always:
    every ``caps`` counter stays at most its limit. Then **within quota** under the first
    ``within`` ``(counter, guaranteed)`` with room for ``amount``; else, when ``borrowing``,
    **over quota** under the first ``borrow`` ``(counter, limit, guaranteed)`` with room;
    else it waits for its quota. ``managed`` False: a pool without quota, always within (share 0).
    """

    within: tuple[tuple[str, float], ...] = ()
    borrow: tuple[tuple[str, float, float], ...] = ()
    borrowing: bool = True
    caps: tuple[tuple[str, float], ...] = ()
    amount: float = 1.0
    managed: bool = True

    def charge(self, used: Mapping[str, float]) -> tuple[tuple[str, ...], bool, float] | None:
        """``(counters charged, within quota, share)`` with the counters at ``used``, or None
        when quota lets it in nowhere now."""
        n = self.amount
        caps = tuple(c for c, _ in self.caps)
        if any(used.get(c, 0.0) + n > limit + 1e-9 for c, limit in self.caps):
            return None
        if not self.managed:
            return caps, True, 0.0
        for c, guaranteed in self.within:
            u = used.get(c, 0.0)
            if u + n <= guaranteed + 1e-9:
                return (c, *caps), True, u / max(guaranteed, 1.0)
        if not self.borrowing:
            return None
        for c, limit, guaranteed in self.borrow:
            u = used.get(c, 0.0)
            if u + n <= limit + 1e-9:
                return (c, *caps), False, u / max(guaranteed, 1.0)
        return None


#: A pool without quota: every request is within, nothing counted
UNMANAGED = Terms(managed=False)


@dataclass(frozen=True)
class Ask:
    """A request in line: ``choices`` (pool, shape or None) in its order, ``units`` asked, and
    per choice the :class:`Terms` quota lets it in by (missing: :data:`UNMANAGED`)."""

    id: str
    choices: tuple[Key, ...]
    units: int
    terms: tuple[Terms, ...] = ()


def median(values: Sequence[float]) -> float:
    """The median of sorted ``values`` (not empty)."""
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (not empty), between the two nearest; the median
    at 0.5."""
    if q == 0.5:
        return median(values)
    pos = q * (len(values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def expected_end(
    h: Held, durations: Sequence[float] | None, now: float, q: float = 0.5
) -> tuple[float, str]:
    """When ``h`` should end (at the ``q`` quantile; the median by default) and how that is
    known (``history``, ``outlived``, ``sure``); ``(inf, "")`` when nothing is known of it."""
    end, how = float("inf"), ""
    if durations:
        age = max(0.0, now - h.started)
        longer = durations[bisect.bisect_right(durations, age) :]
        if longer:
            end, how = h.started + quantile(longer, q), "history"
        else:
            end, how = now + OUTLIVED, "outlived"
    if h.sure_end is not None and h.sure_end < end:
        end, how = max(h.sure_end, now), "sure"
    return end, how
