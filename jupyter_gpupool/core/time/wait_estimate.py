"""When a request waiting in line will be admitted: an estimate, a range, and its basis.

Pure: the service (:mod:`jupyter_gpupool.service.admission.waits`) gathers what it knows
(:mod:`.wait_inputs`) and asks :func:`estimate`; ``benchmarks/bench_estimate.py`` replays a day
through the same function and measures its error.

**Method** (*decided*; also in ``docs/pools.md``).

1. **How long servers like them run**: the ledger's ended sessions of each kind (pool and
   shape) over ``history_days``. A kind with fewer than :data:`MIN_SESSIONS` gives **no
   estimate** (``"no estimate yet"``), never a guess: the replay leaves that pool (and shape)
   out of a request's list, and a request with no other gets none.
2. **When the running servers end**: each could end at the median of the sessions of its kind
   that ran longer than it has so far, or sooner for sure (an idle stop it was warned of, a
   runtime limit's or a booking's deadline: a notice with a deadline); one that outlived every
   such session gets :data:`OUTLIVED` more seconds, and the words say so. But of many busy
   servers the first ends well before any one's median: so the servers of a kind end
   **staggered** (:func:`~.wait_replay.staggered`): the ``j``-th of them to end ends when, by
   the chances each has ended (from those durations, or its sure end), ``j - 1/2`` have
   ended on average, given to them in the order of their own medians.
3. **The line's passes, replayed** (:mod:`.wait_replay`): one now and one at each expected end,
   each ranking those still waiting as the line ranks them (within quota first, then the
   smallest share of its guarantee, then the line's order) and letting in, in that order, each
   request at the **first** pool (and shape) of its list where
   - quota lets it in (:class:`~.wait_inputs.Terms`, counted from the servers held and those
     the replay let in): a request over its limit waits for its subject's servers to end;
   - it does not borrow where a request still waiting would be within quota
     (:data:`HOLD_BACK`: that pool and shape, as admission holds them; :data:`BY_POOL`: the
     whole pool, as the line did before);
   - the GPUs are free: whole GPUs on one node (as admission needs them), shapes by their units
     over the pool (approximate: a MIG layout may change; the words say so).
   So requests go ahead of it by quota and share, and further back when they fit and it does
   not. Each one let in runs the median of its kind and frees its GPUs then.
4. **A range**: the same, every duration at the :data:`LOW_Q` and :data:`HIGH_Q` quantiles
   of its kind's (the staggered ends at their quartiles), gives ``low`` and ``high``: "about
   20-45 min, from the last 30 days of training-pool".
5. **Re-cuts** (:class:`~.wait_inputs.Coming`): the units a MIG re-cut brings come free at
   the time it should end (one under way: its asking time plus what re-cuts take; one the
   service would ask for now: now plus that), and no sooner, so a request only a re-cut can
   serve is estimated no sooner than the re-cut's duration ("about 2 min, once gpu-node-2 is
   re-cut into 1g.10gb instances"). A shape no server of the pool ran yet is replayed there
   too: those let in get in when it comes, and give nothing back in the replay.

Left out: requests that have not arrived yet (they may go ahead by quota or share), reclaim,
the scheduler refusing a pod, budgets, bookings and the cluster-wide caps; the first
:data:`MAX_LINE` requests of a line are replayed, those further back get no estimate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .wait_inputs import (
    BY_POOL,
    BY_SHAPE,
    HIGH_Q,
    HOLD_BACK,
    LOW_Q,
    MIN_SESSIONS,
    OUTLIVED,
    UNMANAGED,
    Ask,
    Coming,
    Held,
    History,
    Key,
    Place,
    Terms,
    expected_end,
    median,
    quantile,
)
from .wait_replay import RECUT, End, replay, staggered

__all__ = [
    "BY_POOL",
    "BY_SHAPE",
    "HIGH_Q",
    "HOLD_BACK",
    "LOW_Q",
    "MAX_LINE",
    "MIN_SESSIONS",
    "NO_ESTIMATE",
    "OUTLIVED",
    "UNMANAGED",
    "Ask",
    "Coming",
    "Estimate",
    "Held",
    "History",
    "Terms",
    "estimate",
    "expected_end",
    "median",
    "minutes_text",
    "quantile",
    "staggered",
    "wait_words",
]

NO_ESTIMATE = "no estimate yet"
#: The first this many requests of a line are replayed; those further back get no estimate
#: (*decided*: a replay costs its passes times the requests still waiting, and the service
#: answers from its event loop)
MAX_LINE = 200


@dataclass(frozen=True)
class Estimate:
    """When a request should be admitted (epoch seconds; None: no estimate), between ``low``
    and ``high``, and why, in words."""

    at: float | None
    words: str = NO_ESTIMATE
    pool: str | None = None
    low: float | None = None
    high: float | None = None


def estimate(
    line: Sequence[Ask],
    held: Iterable[Held],
    free: Mapping[Place, int],
    history: History,
    now: float,
    hold_back: str = HOLD_BACK,
    coming: Sequence[Coming] = (),
) -> dict[str, Estimate]:
    """Each request of ``line`` (in its order) with its estimated admission; ``free``: the
    units free now per (pool, shape, node), reservations taken off (node None: the pool as a
    whole, as shapes are counted); ``hold_back``: what a request waiting within quota holds
    back from borrowers (:data:`BY_SHAPE`, as admission does, or :data:`BY_POOL`);
    ``coming``: the units MIG re-cuts bring, each no sooner than the re-cut should end."""
    held, first, coming = list(held), line[:MAX_LINE], list(coming)
    mid = replay(first, held, free, history, now, 0.5, hold_back, coming)
    low = replay(first, held, free, history, now, LOW_Q, hold_back, coming)
    high = replay(first, held, free, history, now, HIGH_Q, hold_back, coming)
    out: dict[str, Estimate] = {}
    for a in line:
        got = mid.get(a.id)
        if got is None:
            out[a.id] = Estimate(None)
            continue
        seen = [got.at] + [g.at for g in (low.get(a.id), high.get(a.id)) if g is not None]
        lo, hi = min(seen), max(seen)
        words = wait_words(
            got.at - now, got.key, history.days, got.decisive, lo - now, hi - now, got.quota
        )
        out[a.id] = Estimate(got.at, words, got.key[0], lo, hi)
    return out


def minutes_text(seconds: float) -> str:
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


def _span(low: float, high: float) -> str:
    """``20-45 min``, ``45 min-1 h 30 min``, ``25 min`` (both ends alike once rounded)."""
    a, b = minutes_text(low), minutes_text(high)
    if a == b:
        return a
    if "h" not in a and "h" not in b:
        return f"{a.removesuffix(' min')}-{b}"
    return f"{a}-{b}"


def wait_words(
    wait: float,
    key: Key,
    days: float,
    decisive: End | None = None,
    low: float | None = None,
    high: float | None = None,
    quota: bool = False,
) -> str:
    """``about 20-45 min, from the last 30 days of training-pool`` (waits in seconds; the range
    from ``low`` to ``high``, the wait itself when not given), and what else decided it."""
    pool, shape = key
    low = wait if low is None else low
    high = wait if high is None else high
    what = f"{pool} ({shape})" if shape else pool
    if high < 60:
        when = "any moment now"
    elif low < 60:
        when = f"within {minutes_text(high)}"
    else:
        when = f"about {_span(low, high)}"
    if decisive is not None and decisive.how == RECUT:
        # what lets it in is a re-cut's end, not the servers' history
        words = f"{when}, once {decisive.why or 'a node is re-cut'}"
    else:
        words = f"{when}, from the last {days:g} days of {what}"
    if decisive is not None and decisive.how == "sure":
        words += f" and {decisive.why or 'a known stop'} ahead"
    elif decisive is not None and decisive.how == "outlived":
        words += "; a server there has run longer than any of them"
    if quota:
        words += "; waits for its quota"
    if shape:
        words += " (shapes: approximate)"
    return words
