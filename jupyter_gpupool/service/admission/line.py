"""The fair queue at work (rules: :mod:`..core.admission.queue`): requests that asked to wait, and the
passes that admit them.

- A request with ``"queue": true`` that no pool can take now is put in line (``202``) unless no
  pool could ever take it (then the ``409`` says why). Its spawner asks
  ``GET api/v1/admissions/{id}`` while it waits; an entry nobody asked for during ``heartbeat``
  seconds has lost its spawn (the hub restarted, the user went away) and is dropped, never
  admitted.
- A pass runs whenever the cluster view changes (a pod ended, a node came back), when a
  reservation is released, and every few seconds; each runs under the admission desk's lock, so
  passes and immediate admissions are serialized. Admitted entries hold their GPUs as any
  admission does (a reservation with the desk's ``ttl``) until their spawner picks them up.
- A waiting request within quota whose GPUs are held by borrowers gets them back as an
  immediate one does: the desk stops the borrowers (reclaim) and the next pass admits it.
- Entries are kept in the database when there is one (:attr:`on_enqueue` / :attr:`on_end`),
  and taken up at start (:meth:`take_up`), so the line survives a restart; an entry's insert
  is durable, and its 202 waits for it (the desk awaits the future :meth:`enqueue` returns). An entry taken up
  keeps its place but is not admitted until its spawner asks for it again (its spawn may be
  gone with a hub restart); one nobody asks for within ``heartbeat`` is dropped, never admitted.
- A spawner may hold its question open (``GET api/v1/admissions/{id}?wait=S``, a long poll):
  :meth:`changed` tells the held questions that something happened that may have moved an entry
  (a pass ran, an entry joined or left the line); each looks at its own entry again
  (:meth:`turn_key`) and answers when its state or place differs. One event is shared by every
  held question (no thread, no task of the line's per waiter), and an entry whose question is
  held (:meth:`hold`) counts as asked for all the while.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from ...core.admission.decision import gpus_text
from ...core.admission.queue import (
    ADMITTED,
    CANCELLED,
    EXPIRED,
    QUEUED,
    Pass,
    Standing,
    Waiting,
    never_reason,
    order,
    pools_of,
    positions,
    promised_pools,
    standing,
    subject_words,
    waiting_words,
)
from ...core.admission.walk import AdmissionRequest, Decision, decide
from ...core.time.wait_estimate import Estimate
from .. import clock
from ..loops import Loop
from .outcome import Desk, Outcome, committed

log = logging.getLogger(__name__)

#: Seconds between two passes when nothing kicks one (heartbeats are checked then too).
PASS_EVERY = 5.0


@dataclass(frozen=True)
class Ended:
    """How an entry left the line: admitted (with the desk's outcome), cancelled or expired."""

    state: str
    at: float
    message: str
    outcome: Outcome | None = None


class Line:
    def __init__(self, desk: Desk, *, heartbeat: float = 60.0, keep: float = 900.0):
        self.desk = desk
        self.state = desk.state
        self.heartbeat = heartbeat
        self.keep = keep  # how long an ended entry still answers its spawner
        self.waiting: dict[str, Waiting] = {}
        self.asked: dict[str, float] = {}
        self.ended: dict[str, Ended] = {}
        self.reasons: dict[str, str] = {}
        # where each entry stands and its place: computed when asked for after a change of
        # usage (a pass ranks only the entries that might get in)
        self._standings: dict[str, Standing] = {}
        self._places: dict[str, int] = {}
        self._standings_stale = True
        self._places_stale = True
        self.reclaiming: set[str] = set()
        #: Taken up after a restart, and not asked for since: kept in place, never admitted
        self.unconfirmed: set[str] = set()
        #: Pools no borrower may take: a request within quota waits for them
        self.promised: frozenset[str] = frozenset()
        self.seq = 0
        self.dirty = True
        self._kick = asyncio.Event()
        #: Set (and replaced) whenever an entry may have moved: held questions look again
        self._moved = asyncio.Event()
        #: How many questions are held open per entry: held entries are asked for
        self.held: dict[str, int] = {}
        #: Its passes: on each kick, and every PASS_EVERY seconds
        self.loop = Loop("admission.line", PASS_EVERY, self._round, wake=self._kick)
        #: Told of each request put in line, and of each that left it (the database's copy)
        #: (``on_enqueue`` returns the future of a durable insert, or None)
        self.on_enqueue: Callable[[Waiting], Future[None] | None] | None = None
        self.on_end: Callable[[str, str], None] | None = None
        #: Entries whose insert is not committed yet: in line, but not shown in the line's
        #: listings (a place shown is a place kept; their spawner has not heard of it either)
        self.unkept: dict[str, Future[None]] = {}
        #: Each entry's wait estimate (:class:`.waits.WaitEstimates`; None: no estimates)
        self.estimates: Callable[[], Mapping[str, Estimate]] | None = None
        #: Seconds the last pass took, passes run, requests admitted from the line
        self.last_pass = 0.0
        self.passes = 0
        self.admitted = 0

    # --- the desk's side -------------------------------------------------------------------------

    def never(self, request: AdmissionRequest) -> str | None:
        index = self.state.index
        return never_reason(request, self.state.admission_state(), index.largest_node_gpus)

    def enqueue(
        self, request: AdmissionRequest, decision: Decision
    ) -> tuple[Waiting, Future[None] | None]:
        """Put ``request`` (not admitted now: ``decision`` says why) in line; under the lock.
        With it, the future of its durable insert (None without a database)."""
        self.seq += 1
        w = Waiting(request, self.seq, clock.now())
        self._add(w, decision.message)
        written = self.on_enqueue(w) if self.on_enqueue is not None else None
        if written is not None:
            self.unkept[w.id] = written
        # others stand where they stood (a request in line uses no GPUs): only its own standing
        s = standing(w, self.state.admission_state())
        if not self._standings_stale:
            self._standings[w.id] = s
        self._places_stale = True
        # a request within quota holds its pools against borrowers from now
        self.promised = self.promised | promised_pools([(w, s)])
        self.moved()  # a request within quota may go ahead of others
        log.info(
            "%s waits in line for %s in %s (position %d)",
            request.user,
            gpus_text(request.gpus),
            ", ".join(pools_of(request, self.state.admission_state())),
            self.places.get(w.id, 0),
        )
        return w, written

    def _add(self, w: Waiting, reason: str) -> None:
        self.waiting[w.id] = w
        self.asked[w.id] = clock.now()
        self.reasons[w.id] = reason
        self.seq = max(self.seq, w.seq)

    def take_up(self, entries: Iterable[Waiting]) -> None:
        """At start: the entries the database kept. Their spawners have ``heartbeat`` seconds
        to ask again, else the entries are dropped."""
        n = 0
        for w in entries:
            self._add(w, "waiting in line (taken up after a restart of the gpupool service)")
            self.unconfirmed.add(w.id)
            n += 1
        if n:
            log.info("%d requests taken up in line; they wait for their spawners to ask", n)
        self.kick()

    def kick(self) -> None:
        """Something changed that may let a request in: a pass runs soon."""
        self.dirty = True
        self._standings_stale = True
        self._kick.set()

    def pass_if_due(self) -> None:
        """Under the lock, before an immediate decision: the line first, if anything changed."""
        if self.dirty and self.waiting:
            self.run_pass()

    # --- passes ----------------------------------------------------------------------------------

    def run_pass(self) -> None:
        """Walk the line in order and admit what fits (under the desk's lock)."""
        started = time.perf_counter()
        self.dirty = False
        self._kick.clear()
        self.desk.sweep()
        self._expire()
        state, index = self.state, self.state.index
        base = state.admission_state()
        may_reclaim = functools.cache(lambda pool: bool(index.over_quota_servers(pool)))
        max_free = functools.cache(index.pool_max_room)
        # Only the entries that list a pool with room (a node with free GPUs or free units of a
        # shape, reservations not counted: an upper bound) or with borrowers to reclaim from are
        # ranked: in the same
        # order as the whole line, they alone could be admitted, and their standings say
        # which of those pools are held for requests within quota. Elsewhere nothing can be
        # admitted before the next change of usage (which kicks a pass): what was held stays
        # held, in the pools some entry still waits for.
        room: dict[str, bool] = {}
        might: list[Waiting] = []
        for w in self.waiting.values():
            pools = pools_of(w.request, base)
            for pool in pools:
                if pool not in room:
                    room[pool] = max_free(pool) > 0 or may_reclaim(pool)
            if any(room[q] for q in pools):
                might.append(w)
        ranked = order(might, base)
        p = Pass(base, max_free, ranked)
        p.promised |= frozenset(q for q in self.promised if room.get(q) is False)
        for w, s in ranked:
            if (
                w.id in self.reclaiming
                or w.id in self.unconfirmed
                or not p.worth_deciding(w, s, may_reclaim)
            ):
                continue
            # taken up after a restart with the reservation it was admitted with before: that
            # reservation is its own, not in its way (it gets a new one now, or waits on)
            state.reservations.release(w.id)
            decision = decide(w.request, replace(state.admission_state(), promised=p.promised))
            if decision.admitted:
                self._admit(w, decision)
                continue
            self.reasons[w.id] = decision.message
            if decision.reclaim is not None and s.within:
                self._reclaim(w, decision)
        # held for within-quota requests; an admitted one's pools until the next pass
        self.promised = p.promised
        self.passes += 1
        self.moved()
        self.last_pass = time.perf_counter() - started

    @property
    def standings(self) -> dict[str, Standing]:
        """Where each entry stands now (within quota, share)."""
        if self._standings_stale:
            base = self.state.admission_state()
            self._standings = {w.id: s for w, s in order(self.waiting.values(), base)}
            self._standings_stale = False
            self._places_stale = True
        return self._standings

    @property
    def places(self) -> dict[str, int]:
        """Each entry's place among the entries that share a pool with it."""
        standings = self.standings
        if self._places_stale:
            last = Standing(False, float("inf"))
            ranked = sorted(
                ((w, standings.get(w.id, last)) for w in self.waiting.values()),
                key=lambda pair: pair[1].key(pair[0].seq),
            )
            self._places = positions(ranked, self.state.admission_state())
            self._places_stale = False
        return self._places

    def _admit(self, w: Waiting, decision: Decision) -> None:
        reservation = decision.reservation(clock.now() + self.desk.ttl)
        written = self.desk.reserve(reservation)
        self.dirty = True  # usage changed: the next decision passes again first
        self._standings_stale = True
        outcome = Outcome(201, decision, reservation, written=written)
        self._end(w.id, ADMITTED, decision.message, outcome)
        self.admitted += 1
        self.desk.metrics.admissions.labels("admitted").inc()
        log.info(
            "%s admitted from the line to %s after %.0f s",
            w.request.user,
            decision.pool,
            clock.now() - w.since,
        )

    def _reclaim(self, w: Waiting, decision: Decision) -> None:
        assert decision.reclaim is not None
        self.reclaiming.add(w.id)
        hold = self.desk.hold_for(w.request, decision.reclaim)

        async def reclaim() -> None:
            try:
                await self.desk.reclaim_for(w.request, decision.reclaim, hold)  # type: ignore[arg-type]
            finally:
                self.reclaiming.discard(w.id)
                self.kick()

        asyncio.get_running_loop().create_task(reclaim())

    def _end(self, admission_id: str, how: str, message: str, outcome: Any = None) -> None:
        self.waiting.pop(admission_id, None)
        self._standings.pop(admission_id, None)
        self._places_stale = True
        self.asked.pop(admission_id, None)
        self.unconfirmed.discard(admission_id)
        self.reasons.pop(admission_id, None)
        self.unkept.pop(admission_id, None)
        self.ended[admission_id] = Ended(how, clock.now(), message, outcome)
        self.moved()
        if self.on_end is not None:
            self.on_end(admission_id, how)

    def _expire(self) -> None:
        now = clock.now()
        for aid in self.held:  # a question held open is asking all the while
            if aid in self.asked:
                self.asked[aid] = now
        for aid in [a for a, t in self.asked.items() if now - t > self.heartbeat]:
            w = self.waiting[aid]
            log.info("%s's request %s left the line: its spawn is gone", w.request.user, aid)
            self._end(
                aid,
                EXPIRED,
                f"dropped from the line: nobody asked for it for {self.heartbeat:g} s "
                "(the spawn is gone)",
            )
        for aid in [a for a, e in self.ended.items() if now - e.at > self.keep]:
            del self.ended[aid]

    # --- what the API asks -----------------------------------------------------------------------

    def cancel(self, admission_id: str) -> bool:
        if admission_id not in self.waiting:
            return False
        self._end(admission_id, CANCELLED, "cancelled")
        self.kick()  # those behind move up
        return True

    def unrecorded(self, admission_id: str) -> None:
        """The line admitted it, but its reservation could not be written (the desk dropped
        it): it ends, and its spawner is told to try again."""
        self._end(
            admission_id,
            EXPIRED,
            "admitted, but the admission could not be recorded in the service's database: "
            "try again in a moment",
        )

    def seen(self, admission_id: str) -> None:
        """Its spawner asked: it is still wanted."""
        if admission_id in self.asked:
            self.asked[admission_id] = clock.now()
        if admission_id in self.unconfirmed:
            self.unconfirmed.discard(admission_id)  # its spawn is alive: it may be admitted
            self.kick()

    # --- held questions (long polls) -------------------------------------------------------------

    def moved(self) -> None:
        """Entries may have moved (left the line, or changed places): held questions look."""
        self._moved.set()
        self._moved = asyncio.Event()

    def next_move(self) -> asyncio.Event:
        """The event set at the next :meth:`moved` (take it before looking, so that a move
        between the look and the wait is not missed)."""
        return self._moved

    def turn_key(self, admission_id: str) -> tuple[str, int | None] | None:
        """What a held question waits to see change: the entry's state and place (under the
        desk's lock); None for an entry the line does not know."""
        found = self.lookup(admission_id)
        if found is None:
            return None
        if isinstance(found, Waiting):
            return (QUEUED, self.places.get(admission_id))
        return (found.state, None)

    @contextlib.contextmanager
    def hold(self, admission_id: str) -> Iterator[None]:
        """While a question about ``admission_id`` is held open: the entry counts as asked for
        (and when it ends, as just asked)."""
        self.held[admission_id] = self.held.get(admission_id, 0) + 1
        try:
            yield
        finally:
            left = self.held.pop(admission_id) - 1
            if left:
                self.held[admission_id] = left
            self.seen(admission_id)

    def row(self, w: Waiting) -> dict[str, Any]:
        """An entry as the API shows it."""
        s = self.standings.get(w.id)
        pools = list(pools_of(w.request, self.state.admission_state()))
        place = self.places.get(w.id)
        guess = self.estimates().get(w.id) if self.estimates is not None else None
        return {
            "id": w.id,
            "state": QUEUED,
            "queued": True,
            "user": w.request.user,
            "server": w.request.server,
            "gpus": w.request.gpus,
            "gpu_type": w.request.gpu_type,
            "pools": pools,
            # the pools with the shape asked of each (None: whole GPUs), for shaped requests
            "entries": [{"pool": p, "shape": sh} for p, sh in w.request.choices()]
            if w.request.shapes
            else None,
            "position": place,
            "within_quota": bool(s and s.within),
            "subject": subject_words(s.subject) if s else "",
            "waiting_since": w.since,
            "reclaiming": w.id in self.reclaiming,
            # when it should be admitted (epoch seconds; None: no estimate) and on what basis
            "estimate": guess.at if guess is not None else None,
            "estimate_words": guess.words if guess is not None else None,
            # with the estimate's words, or "no estimate yet" when there is no history for one
            "message": waiting_words(
                w.request.gpus, place, pools, guess.words if guess is not None else None
            ),
            "reasons": self.reasons.get(w.id, ""),
        }

    def lookup(self, admission_id: str) -> Waiting | Ended | None:
        return self.waiting.get(admission_id) or self.ended.get(admission_id)

    def kept(self, w: Waiting) -> bool:
        """Whether ``w``'s place is in the database (or there is none): shown in listings."""
        if not committed(self.unkept.get(w.id)):
            return False  # not yet, or a failed insert: the desk is about to end the entry
        self.unkept.pop(w.id, None)
        return True

    def rows(self, user: str | None = None) -> list[dict[str, Any]]:
        """The line in order (``user``'s entries only when given), entries kept only."""
        return [
            self.row(w)
            for w in self.ranked()
            if (user is None or w.request.user == user) and self.kept(w)
        ]

    def ranked(self) -> list[Waiting]:
        """Every entry in line, first in line first."""
        last = Standing(False, float("inf"))
        standings = self.standings
        return sorted(self.waiting.values(), key=lambda w: standings.get(w.id, last).key(w.seq))

    def lengths(self) -> dict[str, int]:
        """Per pool, the requests waiting for it."""
        out: dict[str, int] = {}
        base = self.state.admission_state()
        for w in list(self.waiting.values()):
            if not self.kept(w):
                continue
            for p in pools_of(w.request, base):
                out[p] = out.get(p, 0) + 1
        return out

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        """The service's task (:attr:`loop`): a pass on each kick, and every
        :data:`PASS_EVERY` seconds."""
        await self.loop.run()

    async def _round(self) -> None:
        if not self.waiting and not self.ended:
            self._kick.clear()
            self.dirty = False
            return
        async with self.desk.lock:
            self.run_pass()
