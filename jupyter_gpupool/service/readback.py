"""What the service promised before, read back from its database: as it starts, or, when the
database does not answer then, as soon as it does, with no restart.

A service cannot know what it promised before it started (the reservations behind its 201s,
the places in line behind its 202s, the bookings) until its database has answered. Until then
the admission desk admits nothing (:attr:`~.admission.desk.AdmissionDesk.shut`, a 503 that says
why): an admission made meanwhile could hand out GPUs already promised, and would itself be
forgotten by the next restart. The ``records.database`` loop (:class:`ReadBack`) tries again,
waiting longer each time up to ``db_check_interval`` (the one backoff,
:class:`~.cluster.retry.Backoff`); once the database answers, what it kept is taken up (the
ledger's open sessions, the change log, the reservations, the line, the stored bookings, which
come into force) and the desk admits again. From then on the loop checks every
``db_check_interval`` that the database still answers, so that ``GET api/v1/health`` says so
when it stops (admissions are then refused by their own writes, which fail: see the desk).
"""

from __future__ import annotations

import contextlib
import logging

from . import clock
from .cluster.retry import Backoff
from .context import ServiceContext
from .loops import Loop
from .records.memory import Kept, NotAnswering, StartupRefused

log = logging.getLogger(__name__)

#: The first wait before the database is asked again (then twice as long each time, with
#: jitter, up to ``db_check_interval``); no wait is shorter than :data:`SHORTEST`.
FIRST_RETRY, SHORTEST = 0.5, 0.1


class ReadBack:
    """Reads back what the database kept, and keeps trying until it has (see the module)."""

    def __init__(self, ctx: ServiceContext, check_interval: float):
        self.ctx = ctx
        self.check_interval = check_interval
        self.backoff = Backoff(FIRST_RETRY, check_interval)
        #: Tries to read back until it has, then checks that the database still answers
        self.loop = Loop("records.database", check_interval, self.round, first=FIRST_RETRY)
        self.loop.pace = self.pace

    async def once(self) -> bool:
        """Try to read back once: True once done (or when no database is configured: nothing
        was kept, nothing is durable); False, and the desk shut, while the database does not
        answer. A database newer than this code raises :class:`StartupRefused`."""
        ctx = self.ctx
        records, desk = ctx.records, ctx.desk
        if records.db is None:
            records.follow_budgets(ctx.state.registry.budgets)  # says they are not enforced
            return True
        now = clock.now()
        try:
            kept = await records.read_back(ctx.state.index, ctx.kube.get_pod, now, now - desk.ttl)
        except NotAnswering as e:
            desk.shut = (
                f"{e}; until the service has read back what it promised before it started "
                "(reservations, places in line, bookings), it admits nothing, so that no GPU "
                "is promised twice: try again in a moment"
            )
            return False
        self._take_up(kept)
        desk.shut = ""
        return True

    def _take_up(self, kept: Kept) -> None:
        """The database read back: the ledger, the change log, the reservations and the line
        follow it from now on."""
        ctx = self.ctx
        records = ctx.records
        ledger = records.ledger
        assert ledger is not None
        ctx.changes.take_up(kept.changes, records.change)
        self._reserved(kept)
        ctx.view.on_pod = records.on_pod
        ctx.view.on_pods_reset = ledger.tick
        ctx.desk.on_reclaim = ledger.reclaiming
        if ctx.booking_watch is not None:
            ctx.booking_watch.on_stop = ledger.reclaiming_durably
        ctx.idle.on_cull = ledger.culled
        ctx.idle.on_warn = ledger.idle_warned
        ctx.runtime.on_stop = ledger.over_runtime
        ctx.budget_watch.on_stop = ledger.over_budget
        ctx.state.budgets = records.budgets
        ctx.state.on_registry = lambda registry: records.follow_budgets(registry.budgets)
        records.follow_budgets(ctx.state.registry.budgets)
        line = ctx.desk.line
        if line is not None:  # the line as it was: entries wait for their spawners to ask
            line.take_up(kept.queue)
            line.on_enqueue = records.queue_enqueued
            line.on_end = records.queue_ended

    def _reserved(self, kept: Kept) -> None:
        """The reservations kept before a restart hold their GPUs again, but those whose pods
        the index counts already; from now on every reservation is written before its answer
        and deleted when dropped."""
        ctx = self.ctx
        records, reservations, index = ctx.records, ctx.state.reservations, ctx.state.index
        seen = 0
        for r in kept.reservations:
            reservations.add(r)
            pod = index.admission_state(r.admission_id)
            if pod is not None:
                reservations.observe(r.admission_id, pod)
                seen += 1
        if kept.reservations:
            log.info(
                "%d reservations taken up from the database (%d whose pods are seen)",
                len(kept.reservations),
                seen,
            )
        reservations.on_release = records.unreserve
        ctx.desk.record = records.reserve
        for r in kept.reservations:
            if r.admission_id not in reservations:
                records.unreserve(r)  # its pod was bound: the row goes
        if ctx.desk.line is not None:
            ctx.desk.line.kick()  # standings change with the reservations

    # --- the loop --------------------------------------------------------------------------------

    async def round(self) -> None:
        """Until read back: one more try (read back late, the wait estimates' durations are
        read too). Then: whether the database still answers."""
        records = self.ctx.records
        if records.read:
            if await records.check(self.check_interval):
                self.backoff.reset()
            return
        try:
            done = await self.once()
        except StartupRefused as e:
            log.error("%s; nothing is admitted until this is resolved", e)
            self.ctx.desk.shut = f"{e}; nothing is admitted until this is resolved"
            return
        if done:
            self.backoff.reset()
            with contextlib.suppress(Exception):
                await records.durations.load()

    def pace(self) -> float:
        """The next wait: ``db_check_interval`` while the database answers, else a backoff."""
        records = self.ctx.records
        if records.read and not records.not_answering:
            return self.check_interval
        return max(SHORTEST, self.backoff.next_delay())
