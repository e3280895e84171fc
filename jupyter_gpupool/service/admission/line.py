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
import heapq
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from ...core.admission.decision import gpus_text
from ...core.admission.holds import Holds
from ...core.admission.queue import (
    ADMITTED,
    CANCELLED,
    EXPIRED,
    QUEUED,
    Kind,
    Pass,
    Standing,
    Waiting,
    holds_of,
    kind_of,
    never_reason,
    pools_of,
    standing,
    subject_words,
    waiting_words,
)
from ...core.admission.walk import AdmissionRequest, Decision, decide
from ...core.time.wait_estimate import Estimate
from ...core.usage.reservations import Reservation
from ...core.usage.shapes import WHOLE
from ...core.words.recut_rows import waiting_for_recut
from .. import clock
from ..loops import Loop
from .outcome import Desk, Outcome, committed
from .places import Places
from .told import PlacesTold

log = logging.getLogger(__name__)

#: Seconds between two passes when nothing kicks one (heartbeats are checked then too).
PASS_EVERY = 5.0


def first_in_line(stood: list[tuple[Waiting, Standing]]) -> Iterator[tuple[Waiting, Standing]]:
    """``stood`` first in line first, sorted only as far as it is walked (a heap)."""
    heap = [(s.key(w.seq), i) for i, (w, s) in enumerate(stood)]
    heapq.heapify(heap)
    while heap:
        yield stood[heapq.heappop(heap)[1]]


@dataclass(frozen=True)
class Ended:
    """How an entry left the line: admitted (with the desk's outcome), cancelled or expired."""

    state: str
    at: float
    message: str
    outcome: Outcome | None = None
    #: An admitted entry as it waited: back in line if its reservation expires unused
    entry: Waiting | None = None


class Line:
    def __init__(
        self, desk: Desk, *, heartbeat: float = 60.0, keep: float = 900.0, max_per_user: int = 4
    ):
        self.desk = desk
        self.state = desk.state
        self.heartbeat = heartbeat
        self.keep = keep  # how long an ended entry still answers its spawner
        #: The most entries one user may have in line (0: no cap)
        self.max_per_user = max_per_user
        self.waiting: dict[str, Waiting] = {}
        #: Each user's entries in line
        self.by_user: dict[str, dict[str, Waiting]] = {}
        self.asked: dict[str, float] = {}
        self.ended: dict[str, Ended] = {}
        self.reasons: dict[str, str] = {}
        #: Where each entry stands and its place: worked out when asked after a change, for
        #: the kinds of request the change could move (a pass ranks only those that might get in)
        self.at = Places(self.state)
        self._expired_at = float("-inf")
        self.reclaiming: set[str] = set()
        #: Taken up after a restart, and not asked for since: kept in place, never admitted
        self.unconfirmed: set[str] = set()
        #: What no borrower may take: requests within quota wait for it (:mod:`~jupyter_gpupool.
        #: core.admission.holds`)
        self.promised = Holds()
        self.seq = 0
        self.dirty = True
        self._kick = asyncio.Event()
        #: Set (and replaced) whenever an entry may have moved: held questions look again
        self._moved = asyncio.Event()
        #: How many questions are held open per entry: held entries are asked for
        self.held: dict[str, int] = {}
        self.told = PlacesTold()  # when each entry's place was last answered (:mod:`.told`)
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
        version = self.at.version
        self._add(w, decision.message)
        written = self.on_enqueue(w) if self.on_enqueue is not None else None
        if written is not None:
            self.unkept[w.id] = written
        # others stand where they stood (a request in line uses no GPUs): only its own standing
        s = self.at.standing(w) or standing(w, self.state.admission_state())
        # a request within quota holds what it could use against borrowers from now
        self.promised = self.promised | holds_of([(w, s)], self.state.admission_state())
        self.places  # noqa: B018 - counted now (its 202 says its place): behind all, cheaply
        if self.at.version != version:
            self.moved()  # it went ahead of others (within quota): held questions look again
        log.info(
            "%s waits in line for %s in %s (%d waiting)",
            request.user,
            gpus_text(request.gpus),
            ", ".join(pools_of(request, self.state.admission_state())),
            len(self.waiting),
        )
        return w, written

    def full_for(self, user: str) -> list[Waiting] | None:
        """``user``'s entries in line when they hold as many as a user may (then a further
        request of theirs is not put in line), else None."""
        mine = self.by_user.get(user)
        if not self.max_per_user or mine is None or len(mine) < self.max_per_user:
            return None
        return sorted(mine.values(), key=lambda w: w.seq)

    def _add(self, w: Waiting, reason: str) -> None:
        self.waiting[w.id] = w
        self.by_user.setdefault(w.request.user, {})[w.id] = w
        self.at.add(w)
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
        self.at.changed()
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
        places = self.at.version
        may_reclaim = functools.cache(lambda pool: bool(index.over_quota_servers(pool)))
        rooms: dict[str, int] = {}

        def room(pool: str) -> int:
            if pool not in rooms:
                rooms[pool] = self._room(pool)
            return rooms[pool]

        # Only the kinds of request that list a pool with room (a node with free GPUs or free
        # units of a shape: an upper bound) or with borrowers to reclaim from are ranked: in
        # the same order as the whole line, they alone could be admitted, and their standings
        # say which of those pools are held for requests within quota. Elsewhere nothing can
        # be admitted before the next change of usage (which kicks a pass): what was held
        # stays held, in the pools some entry still waits for. A pass costs the entries that
        # might move, not every entry held.
        opens: dict[str, bool] = {}
        might: list[Kind] = []
        for kind, members in self.at.kinds.items():
            pools = pools_of(next(iter(members.values())).request, base)
            for pool in pools:
                if pool not in opens:
                    opens[pool] = room(pool) > 0 or may_reclaim(pool)
            if any(opens[q] for q in pools):
                might.append(kind)
        stood = self.at.stood(might)  # each kind stood again only if what it reads changed
        p = Pass(base, room, stood)
        p.promised |= self.promised.only({q for q, has_room in opens.items() if not has_room})
        # walked first in line first (taken from a heap: sorted only as far as walked), and
        # only while one may still get in: once no pool ranked has room, only a request within
        # quota can (by reclaiming from borrowers), and those stand ahead of all others: the
        # entries behind cannot move in this pass and are not looked at
        with_room = {q for q in opens if room(q) > 0}
        reclaimable = {q for q in opens if may_reclaim(q)}
        # a kind of request refused once in this pass is refused again (nothing it reads got
        # better since): the rest of its entries are not decided, and keep its reasons
        refused: dict[Kind, str] = {}
        for w, s in first_in_line(stood):
            if not with_room and not (s.within and reclaimable):
                break
            if w.id in self.reclaiming or w.id in self.unconfirmed:
                continue
            kind = kind_of(w.request)
            if kind in refused:
                self.reasons[w.id] = refused[kind]
                continue
            if not p.worth_deciding(w, s, may_reclaim):
                continue
            # taken up after a restart with the reservation it was admitted with before: that
            # reservation is its own, not in its way (it gets a new one now, or waits on)
            state.reservations.release(w.id)
            decision = decide(w.request, replace(state.admission_state(), promised=p.promised))
            if decision.admitted:
                self._admit(w, decision)
                pool = str(decision.pool)
                rooms.pop(pool, None)  # less room there now
                if room(pool) <= 0:
                    with_room.discard(pool)
                continue
            self.reasons[w.id] = decision.message
            if decision.reclaim is not None and s.within:
                self._reclaim(w, decision)
            else:
                refused[kind] = decision.message
        # held for within-quota requests; an admitted one's pools until the next pass
        self.promised = p.promised
        self.passes += 1
        if self.held:  # held questions look again only if a place moved (or an entry left)
            self.at.places  # noqa: B018 - counted now, under the lock
        if self.at.version != places:
            self.moved()
        self.last_pass = time.perf_counter() - started

    def _room(self, pool: str) -> int:
        """The most a request may find free on one node of ``pool`` (an upper bound): for a
        pool of whole GPUs only, its free GPUs less those reserved on the same node; else the
        index's free GPUs or units of a shape, reservations not counted."""
        index = self.state.index
        bound = index.pool_max_room(pool)
        reserved = self.state.reservations.pool_nodes(pool)
        if bound <= 0 or not reserved:
            return bound
        if any(c.shape.id != WHOLE for c in index.shape_counts(pool)):
            return bound
        return max(
            (
                index.node_free(n) - reserved.get(n, 0)
                for n in index.node_names(pool)
                if index.node_group(n) is not None
            ),
            default=0,
        )

    @property
    def places(self) -> dict[str, int]:
        """Each entry's place among the entries that share a pool with it."""
        return self.at.places

    def _admit(self, w: Waiting, decision: Decision) -> None:
        reservation = decision.reservation(clock.now() + self.desk.ttl)
        written = self.desk.reserve(reservation)
        self.dirty = True  # usage changed: the next decision passes again first
        self.at.changed()
        outcome = Outcome(201, decision, reservation, written=written)
        self._end(w.id, ADMITTED, decision.message, outcome, entry=w)
        self.admitted += 1
        self.desk.metrics.admissions.labels("admitted").inc()
        log.info(
            "%s admitted from the line to %s after %.0f s",
            w.request.user,
            decision.pool,
            clock.now() - w.since,
        )

    def expired_unused(self, gone: Iterable[Reservation]) -> None:
        """Reservations dropped at their expiry: an entry the line admitted whose pod never
        came goes back to the end of the line (so that admissions nobody uses cannot keep
        the head of the line), or leaves it when its user holds as many places as a user may.
        Back in line it waits for its spawner to ask again before it is admitted (a spawner
        that took up its admission and stopped asking leaves it, and it is dropped after
        ``heartbeat``), and its place is kept in the database as a new entry's is."""
        for r in gone:
            ended = self.ended.get(r.admission_id)
            if ended is None or ended.state != ADMITTED or ended.entry is None:
                continue
            if self.state.index.admission_state(r.admission_id) is not None:
                continue  # its pod came (pending): the admission was used
            self._back_of_line(ended.entry)

    def _back_of_line(self, w: Waiting) -> None:
        user, ttl = w.request.user, self.desk.ttl
        unused = f"admitted from the line, but no server started within {ttl:g} s"
        mine = self.full_for(user)
        if mine is not None:
            log.info("%s's unused admission %s leaves the line: %s", user, w.id, unused)
            self._end(
                w.id,
                EXPIRED,
                f"{unused}; not put back in line: {user} already waits with {len(mine)} "
                f"other requests, the most one user may (max_queued_per_user = "
                f"{self.max_per_user})",
            )
            return
        self.seq += 1
        back = Waiting(w.request, self.seq, w.since)
        self.ended.pop(w.id, None)
        self._add(back, f"{unused}: back at the end of the line")
        self.unconfirmed.add(w.id)  # admitted again only once its spawner asks again
        written = self.on_enqueue(back) if self.on_enqueue is not None else None
        if written is not None:
            self.unkept[w.id] = written
        # within quota, it holds its pools against borrowers again, as a new entry does
        base = self.state.admission_state()
        self.promised = self.promised | holds_of([(back, standing(back, base))], base)
        log.info("%s's unused admission %s goes back to the end of the line", user, w.id)
        self.moved()

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

    def _end(
        self,
        admission_id: str,
        how: str,
        message: str,
        outcome: Any = None,
        entry: Waiting | None = None,
    ) -> None:
        w = self.waiting.pop(admission_id, None)
        if w is not None:
            mine = self.by_user.get(w.request.user, {})
            mine.pop(admission_id, None)
            if not mine:
                self.by_user.pop(w.request.user, None)
            self.at.remove(w)
        self.asked.pop(admission_id, None)
        self.unconfirmed.discard(admission_id)
        self.reasons.pop(admission_id, None)
        self.unkept.pop(admission_id, None)
        self.ended[admission_id] = Ended(how, clock.now(), message, outcome, entry)
        self.moved()
        if self.on_end is not None:
            self.on_end(admission_id, how)

    def _expire(self) -> None:
        """Entries nobody asked for during ``heartbeat`` leave; ended ones are forgotten after
        ``keep`` (looked at once a second at most: a pass does not walk every entry)."""
        now = clock.now()
        if 0 <= now - self._expired_at < 1.0:
            return
        self._expired_at = now
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

    def unrecorded(self, admission_id: str, what: str = "the admission") -> None:
        """The line admitted it (or put it back in line), but its reservation (its place)
        could not be written: it ends, and its spawner is told to try again."""
        done = "in line" if what != "the admission" else "admitted"
        self._end(
            admission_id,
            EXPIRED,
            f"{done}, but {what} could not be recorded in the service's database: "
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
        s = self.at.standing(w)
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
            )
            + (f" · {recut}" if (recut := self._recut_words(w, pools)) else ""),
            "reasons": self.reasons.get(w.id, ""),
        }

    def _recut_words(self, w: Waiting, pools: list[str]) -> str | None:
        """While a MIG re-cut under way brings what ``w`` waits for (:mod:`.recutwatch`)."""
        registry = self.state.registry
        choices = w.request.choices(w.request.pools or pools)  # its own list keeps its shapes
        return waiting_for_recut(choices, registry.pools, self.state.index, self.state.mig_configs)

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
        return [w for w in self.at.ranked() if w.id in self.waiting]

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
