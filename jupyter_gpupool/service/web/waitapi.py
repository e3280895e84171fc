"""Many places in line asked at once (``POST api/v1/admissions/wait``): one held
question per hub process for all its waiting spawners, answered as soon as any listed entry's
state or place differs from what the asker last heard, else after ``wait`` seconds (with every
entry: the heartbeat). The single question (``GET api/v1/admissions/ID?wait=S``) stays for
one entry and for spawners older than this.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

from ...core.admission.queue import QUEUED, Waiting
from ..admission.told import place_alone
from ..bodies import WaitBody, parse_json, parse_wait
from .admissionapi import MAX_WAIT, LineAnswers
from .auth import USE_SCOPE

#: The answer for an entry the line does not know (the single question's 404).
UNKNOWN = "unknown"


class AdmissionsWaitHandler(LineAnswers):
    """``POST api/v1/admissions/wait`` with ``{"ids": {ID: {"state", "position"} | null},
    "wait": S}``: ``{"admissions": {ID: row}}`` for the entries whose state or place differs
    from what was heard (``null``: heard nothing, answered at once), or for all of them after
    ``S`` seconds (at most :data:`~.admissionapi.MAX_WAIT`). Each waiting entry counts as asked
    for while the question is held. Rows are what ``GET api/v1/admissions/ID`` answers; an id
    the line does not know is ``{"id": ID, "state": "unknown"}``. A user may list only their
    own entries (any other makes the whole question a 403, as the single question would be);
    a caller with the admin scope (the spawner's token) any."""

    scopes = {"POST": USE_SCOPE}

    async def post(self) -> None:
        body = parse_wait(parse_json(self.body))
        wait = min(body.wait, MAX_WAIT)
        desk = self.ctx.desk
        for admission_id in body.heard:
            desk.check_known(admission_id)
        async with desk.lock:
            self._check_all(body)
            changed, _ = self._changed(body)
        if not changed and wait > 0:
            if not await self.held(self._hold(body, wait)):
                return
            async with desk.lock:
                changed, _ = self._changed(body)
        ids = changed or list(body.heard)  # at the timeout, all of them: the heartbeat
        for admission_id in ids:
            # admitted from the line, or put back in line: answered once that is in the database
            await desk.promised(admission_id)
        async with desk.lock:
            rows = {
                i: self._in_line(i) or {"id": i, "state": UNKNOWN, "queued": False} for i in ids
            }
            if desk.line is not None:
                queued = [i for i, row in rows.items() if row.get("state") == QUEUED]
                desk.line.told.told(queued, time.monotonic(), desk.line.waiting)
        self.write_json({"admissions": rows})

    def _check_all(self, body: WaitBody) -> None:
        """Each listed entry the caller's (else a 403), and counted as asked for."""
        line = self.ctx.desk.line
        if line is None:
            return
        for admission_id in body.heard:
            found = line.lookup(admission_id)
            if isinstance(found, Waiting):
                self._check_owner(found.request.user, admission_id)
                line.seen(admission_id)  # confirms an entry taken up after a restart
            elif found is not None:
                outcome = found.outcome
                owner = outcome.reservation.user if outcome and outcome.reservation else None
                if owner is not None:
                    self._check_owner(owner, admission_id)
                elif not self.caller.is_admin:
                    self._check_owner("", admission_id)  # whose it was is not kept

    def _changed(self, body: WaitBody) -> tuple[list[str], float]:
        """The listed entries whose state or place is not what the asker heard (under the
        desk's lock; an entry the line does not know always is), a new place only once the
        entry's place was last told ``queue_place_interval`` ago (:mod:`..admission.told`);
        and when the first new place held back may be told (infinity: none is)."""
        line = self.ctx.desk.line
        if line is None:
            return list(body.heard), math.inf
        changed, soonest, now = [], math.inf, time.monotonic()
        for admission_id, heard in body.heard.items():
            key = line.turn_key(admission_id)
            if key is None or key != heard:
                if place_alone(key, heard) and (due := line.told.due(admission_id)) > now:
                    soonest = min(soonest, due)
                    continue
                changed.append(admission_id)
        return changed, soonest

    async def _hold(self, body: WaitBody, wait: float) -> None:
        """Until a listed entry's state or place changes, or ``wait`` seconds pass; the
        entries count as asked for meanwhile (and as just asked when it ends)."""
        desk = self.ctx.desk
        line = desk.line
        if line is None:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + wait
        with contextlib.ExitStack() as holds:
            for admission_id in body.heard:
                holds.enter_context(line.hold(admission_id))
            while (left := until - loop.time()) > 0:
                move = line.next_move()  # taken before looking: no move is missed
                async with desk.lock:
                    changed, soonest = self._changed(body)
                if changed:
                    return
                # until the next move, or a new place held back may be told
                left = min(left, max(soonest - time.monotonic(), 0.0))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(move.wait(), left)
