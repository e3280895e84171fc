"""The fair queue's rules: who may wait, in what order, and what a pass may admit.

A request that asks to wait (``"queue": true``) and that no pool can take now waits in line.
Pure: the service (:mod:`jupyter_gpupool.service.admission.line`) keeps the entries, runs a pass whenever
GPUs may have come free, and carries the admissions out under the admission lock.

**Order** (*decided*; also in ``docs/pools.md``). Each pass ranks the waiting requests by

1. within quota first: a request that some pool of its list would charge within a guarantee
   or a booking in force (:func:`~.booking_charge.charge`, usage and reservations as they are
   now) comes before one that
   would only borrow;
2. fair share: among those, the subject it would be charged to that uses the smallest part of
   its guarantee in that pool first (GPUs used / GPUs guaranteed; a subject without a guarantee
   counts as guaranteed 1 GPU; a pool without quota, and a booking, count 0 for everyone);
3. first come, first served.

A pass walks the line in that order and admits every request that fits, so nothing overtakes a
request ahead of it that fits now. A request further back may be admitted when those ahead do
not fit (smaller requests fill the gaps), but **never over quota on what a request within
quota there waits for**, wherever that one stands in line: the shape it asks for, of its GPU
type, on the nodes that could take it (:mod:`.holds`); those are the waiting one's as they come
free (:class:`Pass`; the same holds for requests that do not wait, through
``AdmissionState.promised``). What it could never use (a MIG instance beside a request waiting
for whole GPUs, a node too small for it) stays free for borrowers.

A request is not queued when no pool of its list could ever take it (:func:`never_reason`):
no access, no such pool, a GPU count the pool's limits refuse, a GPU type it does not have, or
more GPUs than its largest node holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ..pools.model import Pool
from .booking_charge import charge as charge_with_bookings
from .decision import (
    AdmissionRequest,
    AdmissionState,
    Context,
    gpus_text,
)
from .holds import Hold, Holds
from .recut import could_offer
from .shape_fit import need_of, offered
from .walk import validate_gpus

__all__ = [
    "ADMITTED",
    "CANCELLED",
    "EXPIRED",
    "QUEUED",
    "Pass",
    "Standing",
    "Waiting",
    "holds_of",
    "kind_of",
    "never_reason",
    "order",
    "positions",
    "standing",
    "subject_words",
    "waiting_words",
]

QUEUED, ADMITTED, CANCELLED, EXPIRED = "queued", "admitted", "cancelled", "expired"


@dataclass(frozen=True)
class Waiting:
    """A request in line: ``request.admission_id`` is its id; ``seq`` its arrival number."""

    request: AdmissionRequest
    seq: int
    since: float

    @property
    def id(self) -> str:
        return self.request.admission_id


def pools_of(request: AdmissionRequest, state: AdmissionState) -> tuple[str, ...]:
    """The pools a request tries, in order (its own list, else the default order)."""
    names = request.pools or tuple(state.registry.default_pool_order(request.groups))
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Standing:
    """Where a waiting request stands now: within quota somewhere (``within_pools``: where),
    its subject's share there."""

    within: bool
    share: float
    subject: str | None = None
    within_pools: frozenset[str] = frozenset()
    #: The ``(pool, shape)`` choices of its list it would be within quota in (shape None:
    #: whole GPUs)
    within_choices: frozenset[tuple[str, str | None]] = frozenset()

    def key(self, seq: int) -> tuple[bool, float, int]:
        return (not self.within, self.share, seq)


def _guaranteed(state: AdmissionState, pool: str, subject: str) -> int | None:
    quota = state.registry.quota(pool)
    if quota is None:
        return None
    kind, _, name = subject.partition(":")
    if kind == "booking":
        return None  # within a booking in force: its members come first, first come first
    if kind == "group":
        entry = quota.groups.get(name)
        return entry.guaranteed if entry is not None else 0
    user_entry = quota.user_entry(name)
    return user_entry.guaranteed if user_entry is not None else 0


def standing(w: Waiting, state: AdmissionState) -> Standing:
    """Whether ``w`` would be within quota in one of its pools now, and its subject's share of
    its guarantee there (the best of its pools: within before over, then the smallest share)."""
    req = w.request
    ctx = Context(req, state)
    best: Standing | None = None
    within: set[str] = set()
    choices: set[tuple[str, str | None]] = set()
    pools = req.pools or tuple(state.registry.default_pool_order(req.groups))
    for name, shape_id in req.choices(pools):
        pool = state.registry.pool(name) or Pool(name)
        if not pool.allows(req.user, req.groups):
            continue
        counts = offered(ctx, name, shape_id, req.gpu_type) if shape_id and req.gpus else []
        ctx.need = need_of(counts, req.gpus) if counts else req.gpus
        charge = charge_with_bookings(pool, shape_id, ctx)
        if isinstance(charge, str):
            continue
        subject, over = charge
        guaranteed = _guaranteed(state, name, subject)
        share = 0.0 if guaranteed is None else float(ctx.used(name, subject)) / max(guaranteed, 1)
        here = Standing(not over, share, subject)
        if not over:
            within.add(name)
            choices.add((name, shape_id))
        if best is None or (not here.within, here.share) < (not best.within, best.share):
            best = here
    if best is None:
        return Standing(False, float("inf"))
    return replace(best, within_pools=frozenset(within), within_choices=frozenset(choices))


#: What a request waits for, apart from who sent it and when: requests of one kind stand
#: alike and are decided alike (:func:`kind_of`)
Kind = tuple[object, ...]


def kind_of(request: AdmissionRequest) -> Kind:
    """Its user, groups, pools and shapes, GPUs, GPU type and reclaim: what :func:`standing`
    and a decision read of a request (not its id, server or arrival)."""
    r = request
    return (r.user, r.groups, r.pools, r.shapes, r.gpus, r.gpu_type, r.reclaim)


def order(entries: Iterable[Waiting], state: AdmissionState) -> list[tuple[Waiting, Standing]]:
    """The line as it stands now, first in line first (each kind of request stood once)."""
    stood: dict[Kind, Standing] = {}
    ranked = []
    for w in entries:
        kind = kind_of(w.request)
        s = stood.get(kind)
        if s is None:
            s = stood[kind] = standing(w, state)
        ranked.append((w, s))
    ranked.sort(key=lambda pair: pair[1].key(pair[0].seq))
    return ranked


class PlaceCount:
    """Places counted first in line first (1 = next), among the requests that share a pool:
    :func:`positions` counts a whole line with one; the line goes on counting with it as
    requests join behind the last one counted (their places, and nobody else's, are new).

    Counted per set of pools listed so far (a line lists few), so that a request of several
    pools costs those sets, not the requests ahead of it."""

    def __init__(self) -> None:
        self.ahead: dict[frozenset[str], int] = {}  # a set of pools -> the requests so far
        self.meets: dict[frozenset[str], list[frozenset[str]]] = {}  # those sharing a pool
        self.sets: dict[tuple[tuple[str, ...], tuple[str, ...]], frozenset[str]] = {}

    def add(self, request: AdmissionRequest, state: AdmissionState) -> int:
        """The place of ``request``, behind every request counted so far."""
        listed = (request.pools, request.groups)  # what pools_of reads of a request
        mine = self.sets.get(listed)
        if mine is None:
            mine = self.sets[listed] = frozenset(pools_of(request, state))
        ahead, meets = self.ahead, self.meets
        if mine not in ahead:  # a new set: it meets those that share a pool, and they it
            ahead[mine] = 0
            meets[mine] = [other for other in ahead if other & mine]
            for other in meets[mine]:
                if other != mine:
                    meets[other].append(mine)
        place = 1 + sum(ahead[other] for other in meets[mine])
        ahead[mine] += 1
        return place


def positions(
    ranked: Sequence[tuple[Waiting, Standing]],
    state: AdmissionState,
    count: PlaceCount | None = None,
) -> dict[str, int]:
    """Each request's place in line (1 = next) among the requests that share a pool with it
    (``count``: a :class:`PlaceCount` to count with, left as it counted the last)."""
    count = PlaceCount() if count is None else count
    return {w.id: count.add(w.request, state) for w, _ in ranked}


def never_reason(
    request: AdmissionRequest, state: AdmissionState, largest_node: Callable[[str], int]
) -> str | None:
    """Why no pool of the request's list could ever take it (then it is not queued), or None.

    ``largest_node(pool)``: the most GPUs one node of the pool holds (0 without nodes)."""
    reasons = []
    pools = request.pools or tuple(state.registry.default_pool_order(request.groups))
    for name, shape_id in request.choices(pools):
        pool = state.registry.pool(name)
        if pool is None:
            if not state.usage.has_pool(name):
                reasons.append(f"{name}: there is no such pool")
                continue
            pool = Pool(name)
        if not pool.allows(request.user, request.groups):
            reasons.append(f"{name}: you don't have access to this pool")
            continue
        if shape_id is not None and request.gpus:
            # a shape: one unit, of a shape the pool's nodes offer (and its file lets in)
            ids = {c.shape.id for c in state.usage.shape_counts(name)}
            if request.gpus != 1:
                reasons.append(f"{name}: a server gets one {shape_id}")
            elif not pool.offers_shape(shape_id) or (
                shape_id not in ids
                and not (
                    pool.recut is not None
                    and could_offer(
                        pool.recut, state.mig_configs, state.usage.node_labels, shape_id
                    )
                )
            ):
                reasons.append(f"{name}: this pool has no {shape_id}")
            else:
                return None
            continue
        if problem := validate_gpus(pool, request.gpus):
            reasons.append(f"{name}: {problem}")
            continue
        if request.gpu_type and pool.platforms and pool.platform_for(request.gpu_type) is None:
            reasons.append(f"{name}: this pool has no GPU type {request.gpu_type}")
            continue
        most = largest_node(name)
        if request.gpus > most:
            reasons.append(
                f"{name}: its largest node has {gpus_text(most)}, fewer than the "
                f"{gpus_text(request.gpus)} asked for"
            )
            continue
        return None
    return "\n".join(reasons) or "no pool to try"


class Pass:
    """One walk down the line, and what requests waiting within quota hold back from
    borrowers (:attr:`promised`, for :attr:`AdmissionState.promised <.decision.AdmissionState>`).

    Built from :func:`order`'s ranking: what a waiting request within quota could use
    (:func:`holds_of`) takes no borrower during the pass, whether that request stands ahead or
    behind (it is decided within quota there, which ``promised`` never blocks). For each
    ``(waiting, standing)``: :meth:`worth_deciding` first (a cheap upper bound: a pool of its
    list has a node with enough free GPUs, or it may reclaim there); if so, decide it with
    ``promised``."""

    def __init__(
        self,
        state: AdmissionState,
        max_free: Callable[[str], int],
        ranked: Iterable[tuple[Waiting, Standing]] = (),
    ):
        self.state = state
        #: Per pool, the most free GPUs on one node, reservations not counted (an upper bound)
        self.max_free = max_free
        self.promised: Holds = state.promised | holds_of(ranked, state)

    def worth_deciding(self, w: Waiting, s: Standing, may_reclaim: Callable[[str], bool]) -> bool:
        pools = pools_of(w.request, self.state)
        if any(self.max_free(p) >= w.request.gpus for p in pools):
            return True
        return s.within and any(may_reclaim(p) for p in pools)


def holds_of(ranked: Iterable[tuple[Waiting, Standing]], state: AdmissionState) -> Holds:
    """What the waiting requests (of GPUs) would be within quota for, held against borrowers
    (:mod:`.holds`): in each pool and shape of their lists where they would be within quota,
    the shape, of the GPU type they would get there, and for whole GPUs the GPUs they ask."""
    out: set[Hold] = set()
    for w, s in ranked:
        req = w.request
        if not req.gpus:
            continue
        for pool_name, shape_id in s.within_choices:
            if shape_id is not None:
                out.add(Hold(pool_name, shape_id, req.gpu_type))
                continue
            out.add(Hold(pool_name, None, _whole_type(req, state, pool_name), req.gpus))
    return Holds.of(out)


def _whole_type(req: AdmissionRequest, state: AdmissionState, pool_name: str) -> str | None:
    """The GPU type a request of whole GPUs gets in a pool, as the walk resolves it: the
    type it asks for (its platform's, where the pool has platforms), else the pool's default
    platform's; None: any."""
    pool = state.registry.pool(pool_name)
    if pool is None:
        return req.gpu_type
    if req.gpu_type:
        platform = pool.platform_for(req.gpu_type) if pool.platforms else None
        return platform.gpu_type if platform is not None else req.gpu_type
    if pool.default_platform:
        return pool.platforms[pool.default_platform].gpu_type
    return None


def waiting_words(
    gpus: int, position: int | None, pools: Sequence[str], estimate: str | None = None
) -> str:
    """``waiting for 4 GPUs: position 2 in line for training-pool, inference-pool`` (the
    service's words for a request in line; the spawner's when the service gave none), with
    its wait estimate's words when given: ``… · about 20 min, from the last 30 days of
    training-pool`` (:mod:`..time.wait_estimate`)."""
    where = f" for {', '.join(pools)}" if pools else ""
    place = f": position {position}" if position is not None else ""
    when = f" · {estimate}" if estimate else ""
    return f"waiting for {gpus_text(gpus)}{place} in line{where}{when}"


def subject_words(subject: str | None) -> str:
    """``group ml-research``, ``user alice``."""
    if not subject:
        return ""
    kind, _, name = subject.partition(":")
    return f"{kind} {name}"
