"""The line's passes replayed forward with a moved clock: who of a line gets in when, as the
servers that hold GPUs end (rules: :mod:`.wait_estimate`, its method's step 2).

Pure. One replay sets every duration at one quantile (:func:`replay`): the median for the
estimate, the quartiles for its range. The running
servers' ends are :func:`staggered`. A request's standing (within quota, its share) is worked
out again only when a quota counter it reads has changed, so that a long line costs its
changes, not its length times the ends.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .wait_inputs import (
    BY_POOL,
    HIGH_Q,
    LOW_Q,
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
    quantile,
)

__all__ = ["RECUT", "End", "Got", "replay", "staggered"]

#: How an :class:`End` is known when it is a re-cut's units coming, not a server ending
RECUT = "recut"


@dataclass(order=True)
class End:
    """A server's expected end: its units come free (on ``node``: whole GPUs), its quota
    counters go down; ``how`` it is known (``history``, ``sure``, ``outlived``; :data:`RECUT`:
    the units a re-cut brings) and why."""

    at: float
    seq: int
    key: Key = field(compare=False)
    node: str | None = field(compare=False)
    units: int = field(compare=False)
    counters: tuple[str, ...] = field(compare=False)
    amount: float = field(compare=False)
    how: str = field(compare=False, default="history")
    why: str = field(compare=False, default="")


@dataclass
class Got:
    """When a request gets in, where, the end that let it in (None: free now), and whether it
    waited for its quota (it had GPUs free in a pool quota kept it out of)."""

    at: float
    key: Key
    decisive: End | None
    quota: bool


_Entry = tuple[int, Ask, list[tuple[Key, Terms]]]
_Standing = tuple[tuple[bool, float], frozenset[object]]


class _Replay:
    def __init__(self, history: History, now: float, q: float, hold_back: str):
        self.history, self.now, self.q, self.hold_back = history, now, q, hold_back
        self.free: dict[Key, dict[str | None, int]] = {}
        self.used: dict[str, float] = {}
        self.ends: list[End] = []
        self.seq = 0
        self.got: dict[str, Got] = {}
        self.quota_waits: set[int] = set()  # kinds that had GPUs free quota kept them from
        #: per counter, the entries whose standing reads it; the counters changed since
        self.reads: dict[str, list[int]] = {}
        self.changed: set[str] = set()
        self.standing: dict[int, _Standing] = {}
        #: what the requests still waiting within quota hold back from borrowers, how many each
        self.held_back: dict[object, int] = {}
        #: per entry, its kind: entries of one kind (choices, terms, units) stand alike and are
        #: let in alike (a pass tries one kind once while nothing changed)
        self.kind: dict[int, int] = {}

    def duration(self, key: Key) -> float | None:
        """How long a server the replay admits runs: the median of its kind, or the range's
        quantile (the mean, the rate a pool gives GPUs back at in the long run, was measured
        and is later at every load: ``docs/pools.md``); None for a kind without history (one
        a re-cut brings: the replay never gives its units back)."""
        durations = self.history.of(*key)
        return None if durations is None else quantile(durations, self.q)

    def held_by(self, key: Key) -> object:
        """What a request within quota for ``key`` holds back from borrowers."""
        return key[0] if self.hold_back == BY_POOL else key

    def count(self, counters: Sequence[str], amount: float) -> None:
        for c in counters:
            self.used[c] = self.used.get(c, 0.0) + amount
            self.changed.add(c)

    def stand(self, entry: _Entry, known: dict[int, _Standing] | None = None) -> None:
        """Work out again where ``entry`` stands: within quota first, its smallest share, and
        what it holds back (``known``: the standings of its kind worked out already)."""
        i, a, choices = entry
        found = known.get(self.kind[i]) if known is not None else None
        if found is None:
            best = (True, math.inf)
            holds = set()
            for key, terms in choices:
                c = terms.charge(self.used)
                if c is None:
                    continue
                if c[1] and a.units:
                    holds.add(self.held_by(key))
                best = min(best, (not c[1], c[2]))
            found = (best, frozenset(holds))
            if known is not None:
                known[self.kind[i]] = found
        old = self.standing.get(i)
        for h in old[1] if old is not None else ():
            self.held_back[h] -= 1
        for h in found[1]:
            self.held_back[h] = self.held_back.get(h, 0) + 1
        self.standing[i] = found

    def run(self, line: Sequence[_Entry]) -> dict[str, Got]:
        by_index = {e[0]: e for e in line}
        kinds: dict[object, int] = {}
        for e in line:
            self.kind[e[0]] = kinds.setdefault((tuple(e[2]), e[1].units), len(kinds))
            for _, terms in e[2]:
                for c in {*(c for c, _ in terms.within), *(c for c, *_ in terms.borrow)} | {
                    c for c, _ in terms.caps
                }:
                    self.reads.setdefault(c, []).append(e[0])
            self.stand(e)
        waiting = list(line)
        at, decisive = self.now, None
        while waiting:
            again = {i for c in self.changed for i in self.reads.get(c, ())}
            self.changed.clear()
            known: dict[int, _Standing] = {}
            for i in again:
                if i in self.standing:
                    self.stand(by_index[i], known)
            waiting = self.pass_at(waiting, at, decisive)
            if not self.ends or not waiting:
                break
            decisive = heapq.heappop(self.ends)
            self.give_back(decisive)
            at = decisive.at
            while self.ends and self.ends[0].at <= at:
                self.give_back(heapq.heappop(self.ends))
        return self.got

    def give_back(self, e: End) -> None:
        nodes = self.free.get(e.key)
        if nodes is not None:
            nodes[e.node] = nodes.get(e.node, 0) + e.units
        self.count(e.counters, -e.amount)

    def pass_at(self, waiting: list[_Entry], at: float, by: End | None) -> list[_Entry]:
        """One pass at ``at``: who gets in (kept in :attr:`got`); those still waiting."""
        room = {k: max(nodes.values(), default=0) for k, nodes in self.free.items()}
        if not any(v > 0 for v in room.values()):
            return waiting
        waiting.sort(key=lambda e: (self.standing[e[0]][0], e[0]))
        left = []
        tried: set[int] = set()  # kinds that did not get in since the last admission
        for n, entry in enumerate(waiting):
            i, a, choices = entry
            if not any(v > 0 for v in room.values()):
                left.extend(waiting[n:])  # nothing free any more: the rest wait
                break
            if self.kind[i] in tried:
                left.append(entry)
            elif any(room.get(k, 0) >= a.units for k, _ in choices) and self.take(
                entry, room, at, by
            ):
                tried.clear()  # less room, a request less holding back: try each kind again
            else:
                tried.add(self.kind[i])
                left.append(entry)
        left.sort(key=lambda e: e[0])
        return left

    def take(self, entry: _Entry, room: dict[Key, int], at: float, by: End | None) -> bool:
        """Admit ``entry`` in the first of its pools (and shapes) that lets it in, if any."""
        i, a, choices = entry
        holds = self.standing[i][1]
        for key, terms in choices:
            if room.get(key, 0) < a.units:
                continue
            c = terms.charge(self.used)
            if c is None:
                self.quota_waits.add(self.kind[i])
                continue
            counters, within, _ = c
            h = self.held_by(key)
            if not within and self.held_back.get(h, 0) - (h in holds) > 0:
                continue  # held back for another request, still waiting within quota
            nodes = self.free[key]
            node = next(n for n, free in nodes.items() if free >= a.units)
            nodes[node] -= a.units
            room[key] = max(nodes.values())
            self.count(counters, terms.amount)
            self.seq += 1
            runs = self.duration(key)
            if runs is not None:
                self.push(End(at + runs, self.seq, key, node, a.units, counters, terms.amount))
            self.got[a.id] = Got(at, key, by, self.kind[i] in self.quota_waits)
            for held in holds:  # in: it holds nothing back any more
                self.held_back[held] -= 1
            del self.standing[i]
            return True
        return False

    def push(self, end: End) -> None:
        heapq.heappush(self.ends, end)


#: The most durations of a kind the staggered ends read (evenly spaced quantiles of them)
STAGGER_POINTS = 200
#: The normal distribution's quartile, in standard deviations
_Z = 0.6745


def _thin(durations: Sequence[float]) -> Sequence[float]:
    n = len(durations)
    if n <= STAGGER_POINTS:
        return durations
    return [durations[round(i * (n - 1) / (STAGGER_POINTS - 1))] for i in range(STAGGER_POINTS)]


def staggered(
    held: Sequence[Held], durations: Sequence[float], now: float
) -> list[tuple[float, float, float]]:
    """When the servers ``held`` of one kind end, as a whole: the ``j``-th of them to end at
    the median of the ``j``-th end (and at its quartiles, low and high), from the chance each
    has ended by then (its duration among those of its kind longer than it has run, or its
    sure end); given to the servers in the order of their own :func:`expected_end`.

    (Each at its own median end, the first of thirty busy servers would be expected to end
    when the earliest median does; one of thirty ends much sooner.)"""
    durations = _thin(durations)
    points: list[tuple[float, int, float]] = []  # (seconds from now, server, chance added)
    for i, h in enumerate(held):
        age = max(0.0, now - h.started)
        longer = durations[bisect.bisect_right(durations, age) :]
        sure = None if h.sure_end is None else max(0.0, h.sure_end - now)
        if not longer:
            sure = OUTLIVED if sure is None else min(sure, OUTLIVED)
        got = 0.0
        for d in longer:
            t = h.started + d - now
            if sure is not None and t >= sure:
                break
            points.append((max(t, 0.0), i, 1 / len(longer)))
            got += 1 / len(longer)
        if sure is not None:
            points.append((sure, i, 1.0 - got))
    points.sort()
    chance = [0.0] * len(held)
    mean = var = 0.0
    n = len(held)
    mid: list[float] = []
    low: list[float] = []
    high: list[float] = []
    for t, i, p in points:
        f = chance[i]
        chance[i] = min(1.0, f + p)
        mean += chance[i] - f
        var += chance[i] * (1 - chance[i]) - f * (1 - f)
        sd = math.sqrt(max(var, 0.0))
        while len(mid) < n and mean >= len(mid) + 0.5 - 1e-9:
            mid.append(now + t)
        while len(low) < n and mean + _Z * sd >= len(low) + 0.5 - 1e-9:
            low.append(now + t)
        while len(high) < n and mean - _Z * sd >= len(high) + 0.5 - 1e-9:
            high.append(now + t)
    last = now + (points[-1][0] if points else 0.0)
    for ends in (mid, low, high):
        ends.extend([last] * (n - len(ends)))
    return list(zip(mid, low, high, strict=True))


def replay(
    line: Sequence[Ask],
    held: Sequence[Held],
    free: Mapping[Place, int],
    history: History,
    now: float,
    q: float,
    hold_back: str,
    coming: Sequence[Coming] = (),
) -> dict[str, Got]:
    """Who of ``line`` (in its order) gets in when, every duration at the ``q`` quantile;
    ``coming``: units re-cuts bring, each at its time (a kind without history is replayed
    where one brings it: those it lets in get in then, and give nothing back)."""
    r = _Replay(history, now, q, hold_back)
    brought = {(c.pool, c.shape) for c in coming}
    asks = []
    for i, a in enumerate(line):
        terms = list(a.terms) + [UNMANAGED] * (len(a.choices) - len(a.terms))
        choices = [
            (k, t) for k, t in zip(a.choices, terms, strict=False) if k in brought or history.of(*k)
        ]
        if choices:
            asks.append((i, a, choices))
            for k, _ in choices:
                r.free.setdefault(k, {})
    for (pool, shape, node), n in free.items():
        nodes = r.free.get((pool, shape))
        if nodes is not None and n > 0:
            nodes[node] = nodes.get(node, 0) + n
    kinds: dict[Key, list[tuple[float, str, Held]]] = {}
    for h in held:
        amount = h.amount or float(h.units)
        for c in h.counters:
            r.used[c] = r.used.get(c, 0.0) + amount
        durations = history.of(h.pool, h.shape)
        end, how = expected_end(h, durations, now)
        if end != float("inf"):
            kinds.setdefault((h.pool, h.shape), []).append((end, how, h))
    which = {0.5: 0, LOW_Q: 1, HIGH_Q: 2}[q]
    for key, found in kinds.items():
        found.sort(key=lambda e: e[0])
        durations = history.of(*key)
        if durations is None:  # no history, only sure ends
            ends = [(end, end, end) for end, _, _ in found]
        else:
            ends = staggered([h for _, _, h in found], durations, now)
        for (_, how, h), at in zip(found, ends, strict=True):
            r.seq += 1
            node = h.node if h.shape is None else None
            units, amount = max(h.units, 1), h.amount or float(h.units)
            r.push(End(at[which], r.seq, key, node, units, h.counters, amount, how, h.sure_why))
    for come in coming:
        key = (come.pool, come.shape)
        if key in r.free and come.units > 0:
            r.seq += 1
            node = come.node if come.shape is None else None
            when = max(come.at, now)
            r.push(End(when, r.seq, key, node, come.units, (), 0.0, RECUT, come.why))
    return r.run(asks)
