"""The admission desk: one lock around decide + reserve, reservations, expiry and reclaim.

Decisions are made by :func:`jupyter_gpupool.core.admission.walk.decide` (pure); this module only
serializes them and carries them out:

- **Serialized.** Every decision and the reservation it makes happen under one asyncio lock, so
  two concurrent spawns never both see the same free GPUs.
- **Reserved.** An admitted request holds its GPUs until the usage index sees its pod (by the
  admission label), it is released, or ``ttl`` seconds pass; :meth:`sweep` drops expired ones.
- **Kept.** With a database, an admitted request's reservation (and a queued request's entry)
  is written durably before the answer: the desk awaits the commit outside its lock (so
  admissions share commits rather than wait in turn), for at most ``durable_timeout``
  seconds; a write that fails or is late drops the reservation (or entry) and answers 503.
  Nothing is promised that a crash could forget.
- **Reclaim.** When a request within quota only lacks room because borrowing (over-quota)
  servers hold the GPUs, the desk holds the node for the requester, asks JupyterHub to stop the
  victims (deleting the pod directly for pods the hub does not know), waits up to
  ``reclaim_wait`` seconds for their GPUs to come free, and decides again. The answer names the
  servers that were stopped.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace

from ...core.admission.queue import Waiting
from ...core.admission.walk import AdmissionRequest, Decision, ReclaimPlan, decide, user_subject
from ...core.usage.index import ServerUsage
from ...core.usage.reservations import Reservation
from ...core.words.pool_rows import pool_exists, pool_or_bare
from .. import clock
from ..cluster.hubapi import HubAPI
from ..cluster.kube import Kube, KubeError
from ..commits import until_committed
from ..errors import ApiError
from ..loops import Loop
from ..monitoring.metrics import Metrics
from ..state import ServiceState
from .line import Line
from .outcome import Outcome, committed

log = logging.getLogger(__name__)

NO_ACCESS = "you don't have access to this pool"


class _RandomIds:
    """16 hex digits from the system's random source, read 4 KiB at a time: one ``urandom``
    call per 512 ids instead of one each (that call was 6% of an admission)."""

    def __init__(self) -> None:
        self._bytes = b""
        self._at = 0

    def __call__(self) -> str:
        if self._at + 8 > len(self._bytes):
            self._bytes, self._at = secrets.token_bytes(4096), 0
        self._at += 8
        return self._bytes[self._at - 8 : self._at].hex()


#: A new admission's id: 16 hex digits, unguessable enough, and a valid label value as it is.
new_admission_id = _RandomIds()


def line_full(user: str, mine: Sequence[Waiting], cap: int) -> ApiError:
    """429: ``user`` already holds ``cap`` places in line (``mine``); the answer names them."""
    servers = ", ".join(
        f"'{w.request.server}'" if w.request.server else "the default" for w in mine
    )
    return ApiError(
        429,
        f"{user} already waits in line with {len(mine)} requests (servers {servers}), the "
        f"most one user may (max_queued_per_user = {cap}): this one was not put in line. "
        "Wait until one of them is admitted, or take one out of the line, and ask again.",
        max_queued_per_user=cap,
        places=[
            {
                "id": w.id,
                "server": w.request.server,
                "pools": list(w.request.pools),
                "gpus": w.request.gpus,
            }
            for w in mine
        ],
    )


class AdmissionDesk:
    def __init__(
        self,
        state: ServiceState,
        *,
        metrics: Metrics,
        ttl: float = 120.0,
        hub: HubAPI | None = None,
        kube: Kube | None = None,
        reclaim_wait: float = 30.0,
        durable_timeout: float = 5.0,
    ):
        self.state = state
        self.metrics = metrics
        self.ttl = ttl
        self.hub = hub
        self.kube = kube
        self.reclaim_wait = reclaim_wait
        self.durable_timeout = durable_timeout
        #: Writes a reservation durably: the future of its commit (None: not kept, no wait)
        self.record: Callable[[Reservation], Future[None] | None] | None = None
        self.lock = asyncio.Lock()
        #: Expired reservations dropped every second
        self.sweeper = Loop("admission.sweep", 1.0, self._sweep_round)
        #: Told of each server stopped to reclaim GPUs (the ledger notes how it ended).
        self.on_reclaim: Callable[[ServerUsage], None] | None = None
        #: The requests waiting in line (:mod:`.queue`); None: no queue
        self.line: Line | None = None
        #: Why nothing is admitted now (a 503 says it), empty when admissions are open: the
        #: database did not answer, and what was promised before is not read back
        #: (:mod:`..readback`)
        self.shut = ""

    # --- checks before deciding ------------------------------------------------------------------

    def check_pools(self, request: AdmissionRequest) -> None:
        """400 for a pool that does not exist; 403 when the user may use none of the pools."""
        registry, index = self.state.registry, self.state.index
        names = request.pools or registry.default_pool_order(request.groups)
        unknown = [n for n in request.pools if not pool_exists(registry, index, n)]
        if unknown:
            known = sorted(set(registry.pools) | set(index.pool_names()) | {"default"})
            raise ApiError(
                400,
                f"unknown pool {unknown[0]!r} (pools: {', '.join(known)})",
                unknown_pools=unknown,
            )
        if names and not any(
            pool_or_bare(registry, n).allows(request.user, request.groups) for n in names
        ):
            raise ApiError(
                403,
                f"{request.user} may not use any of the pools asked for ({', '.join(names)})",
                skipped=[{"pool": n, "reason": NO_ACCESS} for n in names],
            )

    def check_known(self, admission_id: str) -> None:
        """503 while the desk is shut: whether ``admission_id`` is held or in line is not known
        until what was promised before is read back (a 404 or "unknown" would tell its spawner
        that a place it was promised is lost)."""
        if self.shut:
            raise ApiError(
                503, f"where admission {admission_id} stands is not known yet: {self.shut}"
            )

    # --- deciding --------------------------------------------------------------------------------

    async def _sweep_round(self) -> None:
        self.sweep()

    def sweep(self) -> list[Reservation]:
        """Drop reservations whose pod never came."""
        gone = self.state.reservations.expire(clock.now())
        if gone:
            if self.line is not None:
                self.line.expired_unused(gone)  # admitted from the line, never used: back
                self.line.kick()  # their GPUs may let a waiting request in
            self.metrics.expired.inc(len(gone))
            log.info("%d reservation(s) expired: %s", len(gone), [r.admission_id for r in gone])
        return gone

    def reserve(self, reservation: Reservation) -> Future[None] | None:
        """Under the lock: hold ``reservation``, and start writing it (the future of its
        commit, to await outside the lock before answering)."""
        self.state.reservations.add(reservation)
        return self.record(reservation) if self.record is not None else None

    def _decide_and_reserve(
        self, request: AdmissionRequest
    ) -> tuple[Decision, Future[None] | None]:
        """Under the lock: decide, and hold the GPUs of an admitted request (with the future
        of the reservation's write). The line goes first, and pools promised to requests
        waiting within quota take no borrower."""
        self.sweep()
        state = self.state.admission_state()
        if self.line is not None and self.line.waiting:
            self.line.pass_if_due()
            state = replace(state, promised=self.line.promised)
        decision = decide(request, state)
        written = None
        if decision.admitted:
            written = self.reserve(decision.reservation(clock.now() + self.ttl))
            if self.line is not None and self.line.waiting:
                self.line.kick()  # the standings in line changed: their places are shown
        return decision, written

    async def admit(self, request: AdmissionRequest, queue: bool = False) -> Outcome:
        """Admit ``request`` (its ``admission_id`` is set here when empty); with ``queue``, a
        request no pool can take now waits in line (202) when some pool could take it later."""
        if not request.admission_id:
            request = replace(request, admission_id=new_admission_id())
        self.check_pools(request)
        if self.shut:
            raise ApiError(503, self.shut)
        async with self.lock:
            decision, written = self._decide_and_reserve(request)
            if decision.admitted:
                outcome = self._admitted(decision, written)
            elif decision.reclaim is None:
                outcome = self._refused_or_queued(decision, queue)
            else:
                plan = decision.reclaim
                hold = self.hold_for(request, plan)
        if decision.admitted or decision.reclaim is None:
            return await self.kept(outcome)
        outcome = await self._reclaim(request, decision, plan, hold)
        if outcome.status == 409 and queue:
            async with self.lock:
                outcome = self._refused_or_queued(outcome.decision, queue, outcome)
        return await self.kept(outcome)

    async def admitted_from_line(self, admission_id: str, outcome: Outcome) -> None:
        """Before a spawner hears that the line admitted it: the reservation is in the
        database. One that could not be written is dropped, the entry ends (503)."""
        if committed(outcome.written):
            return
        try:
            await self.kept(outcome)
        except ApiError:
            if self.line is not None:
                async with self.lock:
                    self.line.unrecorded(admission_id)
            raise

    async def promised(self, admission_id: str) -> None:
        """Before an answer about ``admission_id``: what it says is in the database (an
        admission from the line, its reservation; a place put back in line, its entry). One
        that could not be written ends (503)."""
        line = self.line
        found = line.lookup(admission_id) if line is not None else None
        if found is None or line is None:
            return
        if not isinstance(found, Waiting):
            if found.outcome is not None:
                await self.admitted_from_line(admission_id, found.outcome)
            return
        written = line.unkept.get(admission_id)
        if committed(written):
            return
        assert written is not None
        try:
            await until_committed(written, self.durable_timeout)
            return
        except Exception as e:  # DatabaseError, or late (TimeoutError)
            why = str(e) or f"no commit within {self.durable_timeout:g} s"
        async with self.lock:
            line.unrecorded(admission_id, "its place")
        log.error("place in line %s could not be recorded, dropped: %s", admission_id, why)
        raise ApiError(
            503,
            "the place in line could not be recorded in the service's database "
            f"({why}); nothing is kept for it: try again in a moment",
        )

    async def kept(self, outcome: Outcome) -> Outcome:
        """``outcome`` once what it promises is in the database (outside the lock: concurrent
        admissions share one commit). A write that fails or takes over ``durable_timeout``
        drops the reservation or the entry, and the answer is 503: nothing is promised that
        a crash could forget."""
        if outcome.written is None:
            return outcome
        try:
            await until_committed(outcome.written, self.durable_timeout)
            return outcome
        except Exception as e:  # DatabaseError, or late (TimeoutError)
            why = str(e) or f"no commit within {self.durable_timeout:g} s"
        aid = outcome.decision.request.admission_id
        async with self.lock:
            if outcome.status == 202 and self.line is not None:
                self.line.cancel(aid)
            else:
                self.release(aid)
        log.error("admission %s could not be recorded, dropped: %s", aid, why)
        raise ApiError(
            503,
            "the admission could not be recorded in the service's database "
            f"({why}); nothing is held for it: try again in a moment",
        )

    def _refused_or_queued(
        self, decision: Decision, queue: bool, outcome: Outcome | None = None
    ) -> Outcome:
        refused = outcome or Outcome(409, decision)
        if not queue or self.line is None:
            return refused
        never = self.line.never(decision.request)
        if never is not None:
            return replace(refused, note="\n".join(x for x in (refused.note, never) if x))
        mine = self.line.full_for(decision.request.user)
        if mine is not None:
            raise line_full(decision.request.user, mine, self.line.max_per_user)
        waiting, written = self.line.enqueue(decision.request, decision)
        place = self.line.row(waiting)
        return replace(refused, status=202, place=place, written=written)

    def _admitted(self, decision: Decision, written: Future[None] | None, **kw: object) -> Outcome:
        res = self.state.reservations.get(decision.request.admission_id)
        return Outcome(201, decision, reservation=res, written=written, **kw)  # type: ignore[arg-type]

    def release(self, admission_id: str) -> Reservation | None:
        released = self.state.reservations.release(admission_id)
        if released is not None and self.line is not None:
            self.line.kick()  # its GPUs may let a waiting request in
        return released

    # --- reclaim ---------------------------------------------------------------------------------

    def hold_for(self, request: AdmissionRequest, plan: ReclaimPlan) -> Reservation:
        """Keep the node's GPUs for the requester while the victims stop."""
        hold = Reservation(
            admission_id=f"{request.admission_id}-reclaim",
            pool=plan.pool,
            node=plan.node,
            gpus=request.gpus,
            user=request.user,
            charged=user_subject(request.user),
            over_quota=False,
            expires_at=clock.now() + self.reclaim_wait + 5,
        )
        self.state.reservations.add(hold)
        return hold

    async def reclaim_for(
        self, request: AdmissionRequest, plan: ReclaimPlan, hold: Reservation
    ) -> bool:
        """Stop the plan's victims for ``request``, wait for their GPUs, then let go of the
        node's ``hold``; whether their GPUs came free in time."""
        victims = plan.victims
        names = ", ".join(f"{v.user}/{v.server}" if v.server else v.user for v in victims)
        log.info(
            "Reclaiming %d GPUs on %s in %s for %s: stopping %s",
            plan.gpus_freed,
            plan.node,
            plan.pool,
            request.user,
            names,
        )
        try:
            await asyncio.gather(*(self._stop(v) for v in victims))
            self.metrics.reclaimed.inc(len(victims))
            return await self._wait_gone(victims, self.reclaim_wait)
        finally:
            async with self.lock:
                self.state.reservations.release(hold.admission_id)

    async def _reclaim(
        self, request: AdmissionRequest, first: Decision, plan: ReclaimPlan, hold: Reservation
    ) -> Outcome:
        victims = plan.victims
        names = ", ".join(f"{v.user}/{v.server}" if v.server else v.user for v in victims)
        freed = await self.reclaim_for(request, plan, hold)
        async with self.lock:
            decision, written = self._decide_and_reserve(replace(request, reclaim=False))
        note = (
            f"{plan.pool}: stopped {len(victims)} server{'s' if len(victims) != 1 else ''} "
            f"borrowing GPUs beyond their quota to give you your guaranteed GPUs: {names}"
        )
        if decision.admitted:
            return self._admitted(decision, written, reclaimed=victims, note=note)
        if not freed:
            note += "; their GPUs are not free yet, try again in a moment"
        return Outcome(409, decision, reclaimed=victims, note=note)

    async def _stop(self, victim: ServerUsage) -> None:
        if self.on_reclaim is not None:
            self.on_reclaim(victim)
        await self.stop_server(victim)

    async def stop_server(self, victim: ServerUsage) -> None:
        """Stop through the hub (so it knows the server is gone); delete the pod if it can't."""
        if self.hub is not None and victim.user:
            try:
                status = await self.hub.stop_server(victim.user, victim.server)
            except ApiError as e:
                log.warning("Cannot ask JupyterHub to stop %s: %s", victim.name, e.message)
                status = 0
            if status in (202, 204):
                return
        if self.kube is not None:
            try:
                await self.kube.delete_pod(victim.namespace, victim.name)
            except KubeError as e:
                log.warning("Cannot delete pod %s/%s: %s", victim.namespace, victim.name, e)

    async def _wait_gone(self, victims: Sequence[ServerUsage], timeout: float) -> bool:
        """Wait until the index no longer counts the victims' pods (True), or time out."""
        keys = {(v.namespace, v.name) for v in victims}
        pools = {v.pool for v in victims}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = [
                s
                for p in pools
                for s in self.state.index.servers(pool=p)
                if (s.namespace, s.name) in keys
            ]
            if not left:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.1)
