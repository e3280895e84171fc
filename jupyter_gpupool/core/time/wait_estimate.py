"""When a request waiting in line will be admitted: an estimate, and its basis.

Pure: the service (:mod:`jupyter_gpupool.service.admission.waits`) gathers what it knows and
asks :func:`estimate`; ``benchmarks/bench_estimate.py`` replays a day through the same function
and measures its error.

**Method** (*decided*; also in ``docs/pools.md``).

1. Each server that holds GPUs in a pool ends, as expected, at the earlier of its **sure end**
   (an idle stop it was warned of, a runtime limit's or a booking's deadline: a notice with a
   deadline) and its start plus the **median duration of the sessions of its kind (pool and
   shape) that ran longer than it has run so far**, from the ledger over ``history_days``.
   A server that has outlived every such session is given :data:`OUTLIVED` more seconds, and
   the words say so.
2. The line is walked in its order (:func:`jupyter_gpupool.core.admission.queue.order`). For each request,
   in each pool (and shape) of its list, the moment its GPUs come free is found: the free ones
   first, then those of the servers ending soonest, after the requests ahead of it took theirs.
   The request takes the earliest of its pools; its own server then runs for the median
   duration of its kind and gives its GPUs back to those behind it.
3. A pool (and shape) with fewer than :data:`MIN_SESSIONS` ended sessions in the history gives
   **no estimate** (``"no estimate yet"``), never a guess; a request gets one from its other
   pools if they have one.

Whole GPUs are counted per node, as admission counts them (a request needs its GPUs on one
node); shapes by their units per pool and shape, summed over the nodes, which is approximate (a MIG layout may change, a
shared GPU's replicas are not its GPU), and the words say so. Quotas are left out: a request
that waits for its quota rather than for GPUs is estimated as if GPUs were all it needs.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "MIN_SESSIONS",
    "NO_ESTIMATE",
    "OUTLIVED",
    "Ask",
    "Estimate",
    "Held",
    "History",
    "estimate",
    "expected_end",
    "wait_words",
]

#: Fewer ended sessions of a kind than this in the history: no estimate for it (*decided*: with
#: 5 sessions the conditional median is already a session's figure, not a single outlier's).
MIN_SESSIONS = 5
#: Seconds a server that has outlived every session of its kind is still given.
OUTLIVED = 15 * 60.0
NO_ESTIMATE = "no estimate yet"

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


@dataclass(frozen=True)
class Ask:
    """A request in line: ``choices`` (pool, shape or None) in its order, ``units`` asked."""

    id: str
    choices: tuple[Key, ...]
    units: int


@dataclass(frozen=True)
class Estimate:
    """When a request should be admitted (epoch seconds; None: no estimate) and why, in words."""

    at: float | None
    words: str = NO_ESTIMATE
    pool: str | None = None


def median(values: Sequence[float]) -> float:
    """The median of sorted ``values`` (not empty)."""
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2


def expected_end(h: Held, durations: Sequence[float] | None, now: float) -> tuple[float, str]:
    """When ``h`` should end and how that is known (``history``, ``outlived``, ``sure``);
    ``(inf, "")`` when nothing is known of it."""
    end, how = float("inf"), ""
    if durations:
        age = max(0.0, now - h.started)
        longer = durations[bisect.bisect_right(durations, age) :]
        if longer:
            end, how = h.started + median(longer), "history"
        else:
            end, how = now + OUTLIVED, "outlived"
    if h.sure_end is not None and h.sure_end < end:
        end, how = max(h.sure_end, now), "sure"
    return end, how


@dataclass(order=True)
class _Free:
    at: float
    units: int = field(compare=False)
    how: str = field(compare=False, default="free")
    why: str = field(compare=False, default="")


def _when(tokens: list[_Free], units: int) -> tuple[float, _Free] | None:
    """When ``units`` come free in a timeline (sorted), and the token that decides it."""
    got = 0
    for t in tokens:
        got += t.units
        if got >= units:
            return t.at, t
    return None


def _take(tokens: list[_Free], units: int) -> None:
    while units > 0 and tokens:
        t = tokens[0]
        if t.units > units:
            t.units -= units
            return
        units -= t.units
        tokens.pop(0)


def estimate(
    line: Sequence[Ask],
    held: Iterable[Held],
    free: Mapping[Place, int],
    history: History,
    now: float,
) -> dict[str, Estimate]:
    """Each request of ``line`` (in its order) with its estimated admission; ``free``: the
    units free now per (pool, shape, node), reservations taken off (node None: the pool as a
    whole, as shapes are counted)."""
    wanted = {k for a in line for k in a.choices}
    # per (pool, shape), per node (None: not told apart), the units coming free in time order
    timelines: dict[Key, dict[str | None, list[_Free]]] = {k: {} for k in wanted}
    for (pool, shape, node), n in free.items():
        if (pool, shape) in wanted and n > 0:
            timelines[(pool, shape)].setdefault(node, []).append(_Free(now, n))
    for h in held:
        key = (h.pool, h.shape)
        if key not in timelines:
            continue
        end, how = expected_end(h, history.of(*key), now)
        if end != float("inf"):
            node = h.node if h.shape is None else None
            timelines[key].setdefault(node, []).append(_Free(end, max(h.units, 1), how, h.sure_why))
    for nodes in timelines.values():
        for tokens in nodes.values():
            tokens.sort()
    out: dict[str, Estimate] = {}
    for a in line:
        best: tuple[float, Key, str | None, _Free] | None = None
        for key in a.choices:
            if history.of(*key) is None:
                continue
            for node, tokens in timelines[key].items():
                found = _when(tokens, a.units)
                if found is not None and (best is None or found[0] < best[0]):
                    best = (found[0], key, node, found[1])
        if best is None:
            out[a.id] = Estimate(None)
            continue
        at, key, node, decisive = best
        tokens = timelines[key][node]
        _take(tokens, a.units)
        durations = history.of(*key)
        assert durations is not None
        bisect.insort(tokens, _Free(at + median(durations), a.units))
        out[a.id] = Estimate(at, wait_words(at - now, key, history.days, decisive), key[0])
    return out


def _minutes(seconds: float) -> str:
    """``7 min``, ``25 min``, ``1 h 20 min``: to the minute under 10 minutes, then to 5 minutes,
    then to 10 from an hour on, so the words (and the spawner's progress line, which follows
    them) change seldom while the estimate holds."""
    m = max(1, round(seconds / 60))
    step = 1 if m < 10 else 5 if m < 60 else 10
    m = max(1, round(m / step) * step)
    if m < 60:
        return f"{m} min"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if m else f"{h} h"


def wait_words(wait: float, key: Key, days: float, decisive: _Free | None = None) -> str:
    """``about 20 min, from the last 30 days of training-pool`` (and what else decided it)."""
    pool, shape = key
    what = f"{pool} ({shape})" if shape else pool
    when = "any moment now" if wait < 60 else f"about {_minutes(wait)}"
    words = f"{when}, from the last {days:g} days of {what}"
    if decisive is not None and decisive.how == "sure":
        words += f" and {decisive.why or 'a known stop'} ahead"
    elif decisive is not None and decisive.how == "outlived":
        words += "; a server there has run longer than any of them"
    if shape:
        words += " (shapes: approximate)"
    return words
