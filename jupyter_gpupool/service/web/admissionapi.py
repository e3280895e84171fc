"""The admission API: ``api/v1/admissions`` (admit, or wait in line), one admission or place in
line (``api/v1/admissions/ID``, held open with ``?wait=S`` until the place changes), and the line
itself (``api/v1/queue``). Thin handlers over the admission desk and the line
(:mod:`jupyter_gpupool.service.admission`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from ...core.admission.queue import Waiting
from ...core.admission.walk import AdmissionRequest, Decision
from ...core.usage.amounts import amount_text
from ...core.words.shape_rows import admitted_line, admitted_text
from .. import views
from ..admission.outcome import Outcome
from ..bodies import parse_admission, parse_json
from ..errors import ApiError
from .auth import ADMIN_SCOPE, USE_SCOPE
from .base import APIHandler

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    pass

#: The longest a question about a place in line is held open (``?wait=``): below the
#: spawner's request timeout and any proxy's idle timeout in front of the service.
MAX_WAIT = 30.0


# --- admissions ----------------------------------------------------------------------------------


def shape_keys(d: Decision) -> dict[str, Any]:
    """What an admitted server got, by shape (``shape`` None: no GPU)."""
    n = d.request.gpus
    shape = d.shape.id if d.shape is not None else ("whole" if n else None)
    return {
        "shape": shape,
        "shape_text": admitted_text(d.shape, n, d.gpu_type),
        "resource": d.resource if n else None,
        "gpu_equivalents": amount_text(d.equivalents),
        "gpu_equivalents_float": float(d.equivalents),
    }


def admitted_body(outcome: Outcome) -> dict[str, Any]:
    d, res = outcome.decision, outcome.reservation
    assert res is not None
    return {
        "id": res.admission_id,
        "pool": d.pool,
        "platform": d.platform,
        "gpu_type": d.gpu_type,
        "node": d.node,
        "over_quota": d.over_quota,
        "charged": d.charged,
        "skipped": views.skipped(d),
        "expires_at": views.iso(res.expires_at),
        "user": d.request.user,
        "groups": list(d.request.groups),
        "server": d.request.server,
        "gpus": d.request.gpus,
        **shape_keys(d),
        "nodes_fit": d.nodes_fit,
        "overrides": d.overrides,
        "reclaimed": [views.victim_row(v) for v in outcome.reclaimed],
        "message": admitted_message(outcome),
    }


def admitted_message(outcome: Outcome) -> str:
    """The outcome's message, its admitted line saying what a server of a shape other than
    whole GPUs has in every surface's words (``MIG 1g.10gb of an A100-80G``, not the decision's
    ``1 A100-80G GPU``)."""
    d = outcome.decision
    if d.shape is None or d.pool is None:
        return outcome.message
    has = admitted_text(d.shape, d.request.gpus, d.gpu_type)
    lines = [*d.reasons, admitted_line(d.pool, has, d.over_quota), outcome.note]
    return "\n".join(x for x in lines if x)


class AdmissionsHandler(APIHandler):
    scopes = {"GET": USE_SCOPE, "POST": USE_SCOPE}

    async def get(self) -> None:
        user = None if self.caller.is_admin else self.caller.name
        held = [r for r in self.ctx.state.reservations if user is None or r.user == user]
        self.write_json({"admissions": [views.reservation_row(r) for r in held]})

    async def post(self) -> None:
        metrics = self.ctx.metrics
        started = time.perf_counter()
        try:
            request, queue = await self._request()
            outcome = await self.ctx.desk.admit(request, queue=queue)
        except ApiError as e:
            result = {400: "invalid", 403: "forbidden", 429: "rejected"}.get(e.status, "error")
            metrics.admissions.labels(result).inc()
            if e.status != 429:
                raise
            # a place in line refused (the user holds the most): an answer, as a 409 is
            log.info("not put in line (429): %s", e.message)
            self.write_json(e.body(), status=429)
            return
        finally:
            metrics.latency.observe(time.perf_counter() - started)
        if outcome.status == 201:
            metrics.admissions.labels("admitted").inc()
            self.write_json(admitted_body(outcome), status=201)
            return
        if outcome.status == 202 and outcome.place is not None:
            metrics.admissions.labels("queued").inc()
            self.write_json(outcome.place, status=202)
            return
        metrics.admissions.labels("rejected").inc()
        # A refusal is an answer, not a failure of the service: written as one, without the
        # warning and traceback handling tornado gives a raised error (a spawn storm against a
        # full cluster refuses thousands).
        refusal = ApiError(
            outcome.status,
            outcome.message,
            skipped=views.skipped(outcome.decision),
            reclaimed=[views.victim_row(v) for v in outcome.reclaimed],
        )
        log.info("admission refused (%d): %s", outcome.status, outcome.message)
        self.write_json(refusal.body(), status=outcome.status)

    async def _request(self) -> tuple[AdmissionRequest, bool]:
        """The request, and whether it may wait in line."""
        body = parse_admission(parse_json(self.body), max_gpus=self.ctx.max_gpus)
        caller = self.caller
        user = body.user
        if user is None:
            if not caller.is_user:
                raise ApiError(400, "say which user the admission is for (user)")
            user = caller.name
        elif not (caller.is_user and user == caller.name) and not caller.is_admin:
            raise ApiError(
                403, f"only callers with {ADMIN_SCOPE} may ask admissions for other users"
            )
        if body.groups is not None:
            if not caller.is_admin:
                raise ApiError(403, f"only callers with {ADMIN_SCOPE} may give a user's groups")
            groups = body.groups
        elif caller.is_user and user == caller.name:
            groups = await self.caller_groups()
        else:
            groups = await self.ctx.user_groups(user)
        request = AdmissionRequest(
            user=user,
            groups=groups,
            pools=body.pools,
            shapes=body.shapes,
            gpus=body.gpus,
            gpu_type=body.gpu_type,
            server=body.server,
            reclaim=body.reclaim,
        )
        return request, body.queue


class LineAnswers(APIHandler):
    """What the questions about places in line share (one entry, ``GET api/v1/admissions/ID``,
    or many, ``POST api/v1/admissions/wait``): an entry's answer, whose it is, and letting a
    held question go when its asker does."""

    _holding: asyncio.Future[None] | None = None
    _gone = False

    async def held(self, hold: Any) -> bool:
        """Await ``hold`` (a coroutine); False when the asker went away meanwhile."""
        self._holding = asyncio.ensure_future(hold)
        try:
            await self._holding
        except asyncio.CancelledError:
            if not self._gone:
                raise
            return False  # nobody to answer
        finally:
            self._holding = None
        return True

    def on_connection_close(self) -> None:
        # the spawner went away (cancelled, or its connection was lost): stop holding
        self._gone = True
        if self._holding is not None:
            self._holding.cancel()

    def _in_line(self, admission_id: str) -> dict[str, Any] | None:
        line = self.ctx.desk.line
        found = line.lookup(admission_id) if line is not None else None
        if line is None or found is None:
            return None
        if isinstance(found, Waiting):
            self._check_owner(found.request.user, admission_id)
            line.seen(admission_id)
            return line.row(found)
        outcome = found.outcome
        if outcome is not None and outcome.reservation is not None:
            self._check_owner(outcome.reservation.user, admission_id)
            return {**admitted_body(outcome), "state": found.state, "queued": False}
        if not self.caller.is_admin:  # whose it was is not kept: admins only
            raise ApiError(403, f"admission {admission_id} is not yours")
        return {"id": admission_id, "state": found.state, "queued": False, "message": found.message}

    def _check_owner(self, user: str, admission_id: str) -> None:
        if not self.caller.is_admin and user != self.caller.name:
            raise ApiError(403, f"admission {admission_id} is not yours")


class AdmissionHandler(LineAnswers):
    """``GET``: a request waiting in line (its place; asking keeps it in line), how it left the
    line (admitted, with the placement; cancelled; expired), or a held admission. With
    ``?wait=S`` (at most :data:`MAX_WAIT`), a request waiting in line is answered when its state
    or place changes, or after ``S`` seconds, whichever comes first: the spawner learns its turn
    when it comes, without asking again and again. ``DELETE``: leave the line, or release the
    held GPUs."""

    scopes = {"GET": USE_SCOPE, "DELETE": USE_SCOPE}

    def _wait(self) -> float:
        text = self.get_query_argument("wait", "")
        if not text:
            return 0.0
        try:
            wait = float(text)
        except ValueError:
            raise ApiError(400, f"wait must be a number of seconds, not {text!r}") from None
        if not wait >= 0:  # also NaN
            raise ApiError(400, f"wait must be a number of seconds, not {text!r}")
        return min(wait, MAX_WAIT)

    async def _hold(self, admission_id: str, wait: float) -> None:
        """Until the entry's state or place changes, or ``wait`` seconds pass (under the lock
        only to look). The entry counts as asked for meanwhile."""
        desk = self.ctx.desk
        line = desk.line
        if line is None:
            return
        async with desk.lock:
            found = line.lookup(admission_id)
            if not isinstance(found, Waiting):
                return  # already left the line (or never in it): answered at once
            self._check_owner(found.request.user, admission_id)
            line.seen(admission_id)  # confirms an entry taken up after a restart
            first = line.turn_key(admission_id)
        loop = asyncio.get_running_loop()
        until = loop.time() + wait
        with line.hold(admission_id):
            while (left := until - loop.time()) > 0:
                move = line.next_move()
                async with desk.lock:
                    if line.turn_key(admission_id) != first:
                        return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(move.wait(), left)

    def _own(self, admission_id: str) -> Any:
        res = self.ctx.state.reservations.get(admission_id)
        if res is None:
            raise ApiError(
                404, f"no admission {admission_id!r} is held (released, expired or started)"
            )
        if not self.caller.is_admin and res.user != self.caller.name:
            raise ApiError(403, f"admission {admission_id} is not yours")
        return res

    async def get(self, admission_id: str) -> None:
        wait = self._wait()
        self.ctx.desk.check_known(admission_id)
        if wait > 0 and not await self.held(self._hold(admission_id, wait)):
            return
        desk = self.ctx.desk
        # admitted from the line, or put back in line: answered once that is in the database
        await desk.promised(admission_id)
        async with desk.lock:
            in_line = self._in_line(admission_id)
        if in_line is not None:
            self.write_json(in_line)
            return
        self.write_json(views.reservation_row(self._own(admission_id)))

    async def delete(self, admission_id: str) -> None:
        self.ctx.desk.check_known(admission_id)
        line = self.ctx.desk.line
        found = line.lookup(admission_id) if line is not None else None
        if line is not None and isinstance(found, Waiting):
            self._check_owner(found.request.user, admission_id)
            async with self.ctx.desk.lock:
                line.cancel(admission_id)
            self.write_json({"cancelled": admission_id, "id": admission_id, "state": "cancelled"})
            return
        res = self._own(admission_id)
        self.ctx.desk.release(res.admission_id)
        self.write_json({"released": res.admission_id, **views.reservation_row(res)})


class QueueHandler(APIHandler):
    """``GET api/v1/queue``: the requests waiting in line, first in line first, with their
    place per pool (admins: all; users: their own), and per pool how many wait."""

    scopes = {"GET": USE_SCOPE}

    async def get(self) -> None:
        line = self.ctx.desk.line
        if line is None:
            self.write_json({"queue": [], "pools": {}})
            return
        user = None if self.caller.is_admin else self.caller.name
        self.write_json({"queue": line.rows(user), "pools": line.lengths()})
