"""Placing a server: admission, KubeSpawner's start with the admission's pod settings, and on
an unschedulable pod the next pool; the state that remembers where a server runs, and the
progress the user reads meanwhile.

A start (:meth:`PlacingSpawner._start`, the coroutine KubeSpawner's ``start()`` wraps):

1. check the options against what the user may choose (the service's launch options);
2. ask the service for admission with the ordered pools; with ``queue``, a request no pool can
   take now waits in line: the spawner asks where it stands, with the process's other waiting
   starts (:mod:`.waiters`: one question for all), and the service holds the question open
   until its place changes or its turn comes (:data:`QUEUE_WAIT_SECONDS` at most, then it
   asks again), shows its place, and carries on with the admission when its turn comes (it
   leaves the line when the start is given up, cancelled or stopped);
3. run KubeSpawner's own start with the admission's pod settings (:meth:`load_user_options`
   resets every pool setting, lets KubeSpawner apply a profile, then applies the admission);
4. watch the pod: once scheduled, report the node; if the scheduler keeps refusing it for
   longer than the pool's wait, delete it, release the admission and ask again with the next
   pool first (wrapping around), until ``start_timeout``.

Each step is a small method; the rules are pure functions in the sibling modules. A start
holds the spawner's service client (:class:`~.service.ServiceLink`) from its first question to
its end, so that all its questions share one kept-alive connection (let go while it waits in
line with the others: their shared question has its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import html
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kubespawner import KubeSpawner
from traitlets import default

from ..core.pools.placement import placement_env
from ..core.words.shape_choice import entry_words
from .choosing import ChoosingSpawner
from .errors import SpawnRefused
from .messages import (
    Decision,
    InLine,
    admitted_choice,
    admitted_lines,
    fallback_line,
    left_line_message,
    line_lost_line,
    queue_timeout_message,
    ready_words,
    scheduled_line,
    turn_line,
    unavailable_message,
    unplaced_line,
    unschedulable_message,
    waiting_unavailable_line,
)
from .options import POOL_KEY, Catalog, SpawnOptions
from .podtraits import POOL_TRAITS, admission_overrides, pool_trait_values, with_job_type
from .progress import ProgressLog, merge_progress, with_decision
from .scheduling import Scheduling, rotate_after, scheduling
from .service import PlaceLost, ServiceUnavailable, admit, in_line, release
from .waiters import NoBatch, Waiters, waiters_for

#: How often a pending pod is looked at in the reflectors (no request is made).
WATCH_SECONDS = 0.1
#: The start gives up this long before JupyterHub's own ``start_timeout`` would cancel it, so
#: the user reads why instead of a bare timeout.
DEADLINE_MARGIN = 1.0
#: Where a server's pool is kept in the spawner's state.
STATE_KEY = "gpupool"
#: How long the service may hold a start's question about its place in line (a long poll,
#: ``?wait=``): answered at once when the place changes or the turn comes, else after this long,
#: and asked again. A question held counts as asking: the service drops a request nobody asks
#: for during its ``queue_heartbeat``. 0: the question is not held (polls, every
#: :data:`QUEUE_POLL_SECONDS`).
QUEUE_WAIT_SECONDS = 20.0
#: The least time between two questions answered at once with nothing changed: a service that
#: does not hold questions (older than long polls) is asked this often, not in a tight loop.
QUEUE_POLL_SECONDS = 1.0
#: How long a start waiting in line waits before asking again after a failed question (the
#: service restarting, a lost connection).
QUEUE_RETRY_SECONDS = 1.0
#: How long the service may fail to answer, running, before a start waiting in line gives up
#: (then as when it cannot be asked at all: fail closed, or ``fail_open``).
QUEUE_OUTAGE_SECONDS = 30.0


class Unschedulable(Exception):
    """The scheduler refused the attempt's pod for longer than the pool's wait."""

    def __init__(self, words: str):
        super().__init__(words)
        self.words = words


class OutOfTime(Exception):
    """``start_timeout`` is (nearly) over with the attempt's pod still not running."""


class PlacingSpawner(ChoosingSpawner):
    """Starts a server in the first pool that admits it and can schedule it; reads the
    settings :class:`~jupyter_gpupool.spawner.GPUPoolSpawner` declares."""

    # --- life cycle ------------------------------------------------------------------------------

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # What is configured, to start every server from (profiles and pools change traits).
        self._configured = self._snapshot()
        self._base: dict[str, Any] = self._configured
        self._admission: dict[str, Any] | None = None
        self._in_line: str | None = None  # the id of this start's request while it waits
        self._placement: dict[str, Any] = {}
        self._progress = ProgressLog()

    def _snapshot(self) -> dict[str, Any]:
        return {name: copy.deepcopy(getattr(self, name)) for name in POOL_TRAITS}

    def _set_traits(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            setattr(self, name, copy.deepcopy(value))

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        if self._placement:
            state[STATE_KEY] = dict(self._placement)
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        placement = state.get(STATE_KEY) or {}
        if placement:
            self._placement = dict(placement)
            self._show_pool(placement.get("pool"))

    def clear_state(self) -> None:
        super().clear_state()
        self._placement = {}
        # Before a new start: JupyterHub's group overrides and user-options hooks come next.
        self._set_traits(self._configured)

    def _show_pool(self, pool: str | None) -> None:
        """Put the pool where JupyterHub's admin page and REST API show a server's options
        (in memory only: the options saved for the next start stay as the user gave them)."""
        if pool:
            options: dict[str, Any] = dict(getattr(self, "user_options", None) or {})
            self.user_options = {**options, POOL_KEY: pool}

    async def stop(self, now: bool = False) -> None:
        # Stopped while waiting in line: leave it at once. (JupyterHub cancels a pending start,
        # which leaves the line itself, and calls stop() only when poll() says the server runs;
        # this is for other callers.)
        if self._in_line is not None:
            await self._leave_line(self._in_line)
        await super().stop(now=now)
        if self._admission is not None:
            await self._release(self._admission)
            self._admission = None

    # --- the service -----------------------------------------------------------------------------

    async def _admit(
        self, pools: list[tuple[str, str | None]], options: SpawnOptions
    ) -> dict[str, Any]:
        return await admit(
            self._service,
            user=self.user.name,
            groups=self._groups(),
            pools=pools,
            options=options,
            server=self.name or "",
        )

    async def _release(self, admission: Mapping[str, Any]) -> None:
        await release(self._service, admission, self.log)

    async def _leave_line(self, admission_id: str) -> None:
        self._in_line = None
        await release(self._service, {"id": admission_id}, self.log)

    # --- start -----------------------------------------------------------------------------------

    async def load_user_options(self) -> None:
        """Called by KubeSpawner's start for every attempt: every pool setting starts again
        from this start's base, a profile applies its overrides, then the admission its own."""
        self._set_traits(self._base)
        await super().load_user_options()
        if self._admission is not None:
            overrides = admission_overrides(self._admission)
            overrides["env"] = [
                *(overrides.get("env") or ()),
                *placement_env(self._admission, self.notebook_service_url),
            ]
            self._set_traits(pool_trait_values(self._snapshot(), overrides))
        # with or without an admission (fail_open): gpuctl lists the pod as a notebook
        self._set_traits({"extra_labels": with_job_type(self._snapshot()["extra_labels"])})

    def start(self) -> asyncio.Future[str]:
        self._progress = ProgressLog()  # before progress() can be asked for this start's steps
        return super().start()

    async def _start(self) -> str:
        """Check the options, then place the server in the first pool that takes it."""
        self._base = self._snapshot()  # configured + JupyterHub's group and option hooks
        self._admission = None
        async with self._service.client():  # one client for the whole start
            try:
                catalog = await self._catalog()
            except ServiceUnavailable as e:
                return await self._start_without_service(str(e))
            options = self._check(self.user_options, catalog)
            self.log.info("Starting %s with %s", self._log_name, options.describe())
            return await self._place(options, catalog)

    async def _start_without_service(self, error: str) -> str:
        if not self.fail_open:
            raise SpawnRefused(503, unavailable_message(error))
        self.log.warning(
            "gpupool service unavailable (%s); starting %s without it", error, self._log_name
        )
        self._progress.add(
            f"the GPU pool service is not answering ({error}); starting without pool "
            "placement or GPUs (fail_open)"
        )
        return str(await super()._start())

    async def _place(self, options: SpawnOptions, catalog: Catalog) -> str:
        """Admission, attempt, and on an unschedulable pod the next pool, until the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(self.start_timeout - DEADLINE_MARGIN, 1.0)
        order = options.choices() or [(p, None) for p in catalog.default_pools]
        refusals: list[str] = []
        unplaced: list[str] = []  # the same, as the decision on the progress page says them
        while True:
            try:
                admission = await self._admit(order, options)
                if admission.get("queued"):
                    admission = await self._wait_in_line(admission, deadline)
            except ServiceUnavailable as e:
                return await self._start_without_service(str(e))
            except PlaceLost:
                self._progress.add(line_lost_line())
                continue
            self._admission = admission
            pool = str(admission["pool"])
            taken = admitted_choice(admission)
            self._progress.decide(Decision.of(admission, unplaced), admitted_lines(admission))
            try:
                url = await self._attempt(admission, deadline)
            except Unschedulable as e:
                refusals.append(f"{pool}: {e.words}")
                unplaced.append(unplaced_line(pool, e.words))
                await self._abandon(admission)
                order = rotate_after(order, taken)
                self._progress.decide(None)
                self._progress.add(
                    fallback_line(entry_words(*taken), entry_words(*order[0]), e.words)
                )
                continue
            except OutOfTime as e:
                if str(e):
                    refusals.append(f"{pool}: {e}")
                await self._abandon(admission)
                raise SpawnRefused(503, unschedulable_message(self.start_timeout, refusals)) from e
            self._admission = None  # the pod exists: the service counts it now
            self._placed(admission, options)
            return url

    async def _wait_in_line(self, entry: Mapping[str, Any], deadline: float) -> dict[str, Any]:
        """Wait in line until the service admits the request (its admission, as an immediate
        one), showing each new place; leave the line when the wait ends otherwise (given up
        at the deadline, refused, cancelled: JupyterHub cancels a start that is stopped).

        :class:`SpawnRefused` at the deadline (with the last place and reasons) or when the
        request leaves the line without its spawner (an admin cancelled it, the service
        dropped it); :class:`ServiceUnavailable` when the service has failed to answer for
        :data:`QUEUE_OUTAGE_SECONDS` running (a failure shorter than that is asked again);
        :class:`PlaceLost` when the service no longer knows the request."""
        loop = asyncio.get_running_loop()
        admission_id = str(entry["id"])
        self._in_line = admission_id
        since = loop.time()
        row: Mapping[str, Any] = entry
        shown: str | None = None
        failing_since: float | None = None
        waiters = self._waiters()
        try:
            while True:
                standing = InLine.of(row)
                if standing.message != shown:  # a new place: one line, never the same twice
                    shown = standing.message
                    self._progress.decide(standing, [standing.message])
                now = loop.time()
                if now >= deadline:
                    waited = now - since
                    self.log.info(
                        "%s gives up after %.0f s in line (%s)", self._log_name, waited, shown
                    )
                    raise SpawnRefused(503, queue_timeout_message(self.start_timeout, waited, row))
                try:
                    answer = await self._next_in_line(
                        waiters, row, wait=min(QUEUE_WAIT_SECONDS, deadline - now)
                    )
                except ServiceUnavailable as e:
                    failed = loop.time()
                    if failing_since is None:
                        failing_since = failed
                        self.log.warning("%s waits in line; %s", self._log_name, e)
                        self._progress.add(waiting_unavailable_line(str(e)))
                    if failed - failing_since >= QUEUE_OUTAGE_SECONDS:
                        raise
                    await asyncio.sleep(min(QUEUE_RETRY_SECONDS, max(0.0, deadline - failed)))
                    continue
                except PlaceLost:
                    self._in_line = None  # nothing left to leave
                    raise
                failing_since = None
                if answer is None:
                    continue  # nothing new within its wait (asked with the others)
                state = answer.get("state")
                if state == "queued":
                    same = InLine.of(answer) == standing
                    row = answer
                    rest = QUEUE_POLL_SECONDS - (loop.time() - now)
                    if same and rest > 0:  # answered at once, nothing new: not held (old service)
                        await asyncio.sleep(min(rest, max(0.0, deadline - loop.time())))
                    continue
                self._in_line = None  # it left the line: admitted (its GPUs are held), or not
                if state == "admitted":
                    self._progress.decide(None, [turn_line(loop.time() - since)])
                    return answer
                raise SpawnRefused(
                    409, left_line_message(str(state), str(answer.get("message") or ""))
                )
        finally:
            waiters.leave(admission_id)
            if self._in_line == admission_id:  # given up, failed or cancelled while in line
                await self._leave_line(admission_id)
            if isinstance(self._progress.decision, InLine):
                self._progress.decision = None  # no longer in line

    def _waiters(self) -> Waiters:
        """This process's waiting starts against this service (one question for all)."""
        return waiters_for(
            self.service_url,
            self.service_token,
            self._new_client,
            wait=lambda: QUEUE_WAIT_SECONDS,
            retry=lambda: QUEUE_RETRY_SECONDS,
            least=lambda: QUEUE_POLL_SECONDS,
        )

    async def _next_in_line(
        self, waiters: Waiters, row: Mapping[str, Any], wait: float
    ) -> dict[str, Any] | None:
        """The entry's new row (``row``: the last one heard), None if nothing new came within
        ``wait`` seconds: asked with the process's other waiting starts, else alone (a service
        without the batch question)."""
        admission_id = str(row["id"])
        if waiters.batch:
            if not waiters.waits(admission_id):
                waiters.join(admission_id, row)
                await self._service.let_go()  # no connection of its own while it waits
            try:
                # not held (wait 0: polls): the next answer comes a poll later
                return await waiters.answer(admission_id, wait or QUEUE_POLL_SECONDS)
            except NoBatch:
                waiters.leave(admission_id)
                self.log.info("%s: the service has no batch question; asks alone", self._log_name)
        return await in_line(self._service, admission_id, wait=wait)

    def _schedule_wait(self, pool: str) -> float:
        return self.pool_schedule_timeouts.get(pool, self.pool_schedule_timeout)

    def _scheduling(self) -> Scheduling:
        pods = self.pod_reflector.pods if self.pod_reflector else {}
        pod = pods.get(f"{self.namespace}/{self.pod_name}")
        events = self.event_reflector.events if self.event_reflector else []
        return scheduling(pod, events)

    async def _attempt(self, admission: Mapping[str, Any], deadline: float) -> str:
        """KubeSpawner's start with this admission's settings, watched for refusal."""
        loop = asyncio.get_running_loop()
        wait = self._schedule_wait(str(admission["pool"]))
        task = asyncio.ensure_future(super()._start())
        refused_since: float | None = None
        announced = False
        try:
            while True:
                finished, _ = await asyncio.wait({task}, timeout=WATCH_SECONDS)
                state = self._scheduling()
                if state.scheduled and not announced:
                    announced = True
                    self._progress.add(scheduled_line(str(state.node), admission))
                if task in finished:
                    return str(task.result())
                now = loop.time()
                if not state.unschedulable:
                    refused_since = None
                elif refused_since is None:
                    refused_since = now
                elif now - refused_since >= wait:
                    raise Unschedulable(state.message)
                if now >= deadline:
                    raise OutOfTime(state.message)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _abandon(self, admission: Mapping[str, Any]) -> None:
        """Delete the attempt's pod and give its GPUs back."""
        await KubeSpawner.stop(self, now=True)
        await self._release(admission)
        self._admission = None

    def _placed(self, admission: Mapping[str, Any], options: SpawnOptions) -> None:
        """Remember where the server runs (state survives a hub restart) and show it."""
        state = self._scheduling()
        self._placement = {
            "pool": admission.get("pool"),
            "platform": admission.get("platform"),
            "gpu_type": admission.get("gpu_type"),
            "gpus": admission.get("gpus"),
            "over_quota": bool(admission.get("over_quota")),
            "charged": admission.get("charged"),
            "admission": admission.get("id"),
            "node": state.node or admission.get("node"),
            "user_options": options.to_user_options(),
        }
        if "shape" in admission:  # a service that knows shapes
            self._placement["shape"] = admission.get("shape")
            self._placement["shape_text"] = admission.get("shape_text")
        self._show_pool(str(admission.get("pool")))

    # --- progress --------------------------------------------------------------------------------

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        """gpupool's steps (admitted, skipped, scheduled, falling back) among the pod's events,
        each step after the admission shown with the pool decision."""
        log = self._progress
        pod_events = super().progress()

        async def decided() -> AsyncIterator[dict[str, Any]]:
            async for event in pod_events:
                yield with_decision(event, log.decision)

        def done() -> bool:
            future = self._start_future
            return future is None or future.done()

        async for event in merge_progress(log, decided(), done):
            yield event

    @default("progress_ready_hook")
    def _progress_ready_hook_default(self) -> Any:
        return _ready_event

    def ready_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """JupyterHub's "Server ready at URL" with where the server runs, and the rest of the
        pool decision (pools skipped and why) when this hub made it."""
        if not self._placement.get("pool"):
            return event
        where = ready_words(self._placement)
        decision = self._progress.decision
        others = decision.others if decision is not None else ()
        ready = str(event.get("message") or "Server ready")
        html_message = event.get("html_message") or html.escape(ready)
        return {
            **event,
            "message": "; ".join([f"{ready} {where}", *others]),
            "html_message": f"{html_message} {html.escape(where)}"
            + "".join(f"<br>{html.escape(line)}" for line in others),
        }


def _ready_event(spawner: PlacingSpawner, event: dict[str, Any]) -> dict[str, Any]:
    """``progress_ready_hook``: the ready message says where the server runs."""
    return spawner.ready_event(event)
