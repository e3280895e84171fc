"""Where each request in line stands and its place (rules: :mod:`...core.admission.queue`),
worked out when asked after a change, and only for the requests the change could move.

A request's standing (within quota or not, its subject's share) reads the usage of its pools
(their servers, nodes and reservations), its user's and groups' totals over all pools, the
registry and the bookings in force, and nothing of the request but its kind
(:func:`~...core.admission.queue.kind_of`: user, groups, pools, GPUs...). So each kind of
request in line is stood once, and stood again only when one of those changed since (the
usage index's and the reservations' counts of changes per pool, the totals, the registry's and
the bookings' objects); the places are counted again only when a standing or the line itself
changed. A server starting in another pool moves nobody, and costs a look at each kind, not a
standing of each entry. Every :data:`FULL` seconds every kind is stood again, as bookings'
windows turn with the clock.

A request that joins behind the last one counted (most do: first come, and no standing ahead
of it changed) moves nobody: its place is counted on from where the last count ended
(:class:`~...core.admission.queue.PlaceCount`), a look at the sets of pools, not a sort and a
count of the whole line, and :attr:`Places.version` stays (no place heard before changed).
"""

from __future__ import annotations

from collections.abc import Iterator

from ...core.admission.decision import AdmissionState, group_subject, user_subject
from ...core.admission.queue import (
    Kind,
    PlaceCount,
    Standing,
    Waiting,
    kind_of,
    pools_of,
    positions,
    standing,
)
from .. import clock
from ..state import ServiceState

#: Seconds after which every kind is stood again, whatever changed.
FULL = 5.0

#: Where a request nobody has stood yet is put (after all others)
LAST = Standing(False, float("inf"))


class Places:
    """The line's entries by kind, their standings and places (:class:`.line.Line` keeps it
    told of each entry that joins or leaves, and of each change that may move one)."""

    def __init__(self, state: ServiceState):
        self.state = state
        #: The entries in line, by kind (each kind's in the order they joined)
        self.kinds: dict[Kind, dict[str, Waiting]] = {}
        self._stood: dict[Kind, tuple[tuple[object, ...], Standing]] = {}
        self._places: dict[str, int] = {}
        self._order: list[tuple[Waiting, Standing]] = []  # as of the places
        self._counted = PlaceCount()  # as it counted the last of the order
        self._joined: list[Waiting] = []  # added since the places were counted
        self._stamp: tuple[int, int] | None = None  # the changes of usage last looked at
        self._looked = False  # every kind's marks checked since the last change
        self._count = True  # the places to count again
        self._whole: tuple[object, object] | None = None  # the registry and bookings stood by
        self._full_at = float("-inf")
        #: Counted up each time the places come out different: held questions look again
        self.version = 0

    # --- told ------------------------------------------------------------------------------------

    def add(self, w: Waiting) -> None:
        self.kinds.setdefault(kind_of(w.request), {})[w.id] = w
        self._looked = False
        self._joined.append(w)  # counted on behind the others if it stands behind them

    def remove(self, w: Waiting) -> None:
        kind = kind_of(w.request)
        members = self.kinds.get(kind)
        if members is not None:
            members.pop(w.id, None)
            if not members:
                del self.kinds[kind]
                self._stood.pop(kind, None)
        self._places.pop(w.id, None)
        self._count = True

    def changed(self) -> None:
        """Usage may have changed: the standings are looked at again when next asked."""
        self._looked = False

    # --- asked -----------------------------------------------------------------------------------

    def standing(self, w: Waiting) -> Standing | None:
        self._look()
        got = self._stood.get(kind_of(w.request))
        return got[1] if got is not None else None

    def ranked(self) -> list[Waiting]:
        """Every entry in line, first in line first."""
        self.places  # noqa: B018 - the order is kept with the places
        return [w for w, _ in self._order]

    @property
    def places(self) -> dict[str, int]:
        """Each entry's place among the entries that share a pool with it."""
        self._look()
        if self._joined and not self._count:
            self._count = not self._count_on()
        if self._count:
            self._order = self._ranked()
            self._counted = PlaceCount()
            places = positions(self._order, self.state.admission_state(), self._counted)
            if places != self._places:
                self.version += 1
            self._places = places
            self._count = False
            self._joined.clear()
        return self._places

    def _count_on(self) -> bool:
        """The entries that joined since the count, placed behind the others if they all stand
        behind the last one counted (nobody else's place changes); False when one does not."""
        joined = sorted(
            ((self._stood[kind_of(w.request)][1], w) for w in self._joined),
            key=lambda e: e[0].key(e[1].seq),
        )
        self._joined.clear()
        if self._order:
            w, s = self._order[-1]
            if joined[0][0].key(joined[0][1].seq) <= s.key(w.seq):
                return False
        base = self.state.admission_state()
        for s, w in joined:
            self._order.append((w, s))
            self._places[w.id] = self._counted.add(w.request, base)
        return True

    # --- inside ----------------------------------------------------------------------------------

    def _entries(self) -> Iterator[tuple[tuple[bool, float, int], Waiting, Standing]]:
        for kind, members in self.kinds.items():
            got = self._stood.get(kind)
            s = got[1] if got is not None else LAST
            for w in members.values():
                yield s.key(w.seq), w, s

    def _ranked(self) -> list[tuple[Waiting, Standing]]:
        return [(w, s) for _, w, s in sorted(self._entries(), key=lambda e: e[0])]

    def _marks(self, w: Waiting, base: AdmissionState) -> tuple[object, ...]:
        """What ``w``'s standing reads, as counts and amounts: the same marks, the same
        standing. For whole GPUs in pools no booking names: what its user and groups use and
        hold there, and their totals (capacity plays no part); else every change of its pools
        (a shape's free units, bookings' members)."""
        req, index, held = w.request, self.state.index, self.state.reservations
        pools = pools_of(req, base)
        user = req.user
        marks: list[object] = [
            pools,
            index.user_used_total(user),
            held.user_reserved_total(user),
            *(
                (index.subject_used_total(s), held.subject_reserved_total(s))
                for s in map(group_subject, req.groups)
            ),
        ]
        booked = base.bookings is not None and not base.bookings.pools.isdisjoint(pools)
        if req.shapes or booked:
            marks.append(tuple(index.pool_changes.get(p, 0) for p in pools))
            marks.append(tuple(held.pool_changes.get(p, 0) for p in pools))
            return tuple(marks)
        subjects = (user_subject(user), *map(group_subject, req.groups))
        for p in pools:
            marks.append((index.user_used(p, user), held.user_reserved(p, user)))
            marks.extend((index.subject_used(p, s), held.subject_reserved(p, s)) for s in subjects)
        return tuple(marks)

    def stood(self, kinds: list[Kind]) -> list[tuple[Waiting, Standing]]:
        """The entries of ``kinds`` with their standings now, in no order (for a pass: those
        that might get in, walked first in line first only as far as needed)."""
        self._look()
        return [(w, self._stood[k][1]) for k in kinds for w in self.kinds[k].values()]

    def _look(self) -> None:
        """Stand again each kind whose marks changed (every kind, every FULL seconds or when
        the registry or the bookings changed)."""
        if self._looked:
            return
        base = self.state.admission_state()
        now = clock.now()  # the service's clock, by which bookings' windows turn
        whole = (base.registry, base.bookings)
        full = (
            abs(now - self._full_at) >= FULL
            or self._whole is None
            or any(a is not b for a, b in zip(whole, self._whole, strict=True))
        )
        if full:
            if self._whole is not None and any(
                a is not b for a, b in zip(whole, self._whole, strict=True)
            ):
                self._count = True  # the pools a request lists may read otherwise now
            self._full_at, self._whole = now, whole
        stamp = (self.state.index.changes, self.state.reservations.changes)
        same = not full and stamp == self._stamp  # no usage changed: only new kinds to stand
        self._stamp = stamp
        # a standing stands for its kind: the first entry of the kind is asked
        for kind, members in self.kinds.items():
            was = self._stood.get(kind)
            if same and was is not None:
                continue
            w = next(iter(members.values()))
            marks = self._marks(w, base)
            if was is not None and not full and was[0] == marks:
                continue
            s = standing(w, base)
            # a kind stood for the first time has only entries that joined since the count
            if was is not None and was[1] != s:
                self._count = True
            self._stood[kind] = (marks, s)
        self._looked = True
