"""The starts of one hub process waiting in line, asked about together.

Each waiting start joins the process's :class:`Waiters` (one per event loop and service) with
its admission id and reads its answers from its own box. One task holds ONE question for all of
them (``POST api/v1/admissions/wait``, :meth:`~jupyter_gpupool.client.GPUPoolClient.
admissions_wait`) over its own connection, with what each start last heard, and puts each
changed entry's row in its start's box; it asks again at once when a start joins (the question
held did not list it). So a hundred waiting starts hold one connection to the service, not a
hundred.

What a failure means stays per start: a question that fails puts :class:`ServiceUnavailable` in
every box (each start keeps its own rule for how long it waits through an outage); an entry the
service does not know (``"state": "unknown"``) puts :class:`PlaceLost` in its box only. A
service without the batch question (older: 404 or 405) puts :class:`NoBatch` in every box and
the starts ask one place at a time (``GET api/v1/admissions/ID?wait=``) for
:data:`NO_BATCH_SECONDS`, then try the batch again (the service may have been upgraded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ..client import GPUPoolClient, GPUPoolError
from .service import PlaceLost, ServiceUnavailable

__all__ = ["NoBatch", "Waiters", "waiters_for"]

log = logging.getLogger(__name__)

#: How long the starts ask one place at a time after the service said it has no batch question.
NO_BATCH_SECONDS = 600.0


class NoBatch(Exception):
    """The service has no ``POST api/v1/admissions/wait``: ask one place at a time."""


def heard_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a start has heard of its entry: the key the service compares (state, position)."""
    return {"state": row.get("state"), "position": row.get("position")}


Box = asyncio.Queue[dict[str, Any] | BaseException]


class Waiters:
    """The waiting starts of one process against one service, and the one question held for
    all of them. ``make`` builds the question's own client (one connection); ``wait``,
    ``retry`` and ``least`` are read when each question is asked (seconds: how long the
    service may hold it, the pause after a failed one, the least time between two questions
    that brought nothing new)."""

    def __init__(
        self,
        make: Callable[[], GPUPoolClient],
        *,
        wait: Callable[[], float],
        retry: Callable[[], float],
        least: Callable[[], float],
    ):
        self._make = make
        self._wait, self._retry, self._least = wait, retry, least
        self._boxes: dict[str, Box] = {}
        #: what each start still in line last heard (a start whose entry left is not asked for)
        self._heard: dict[str, dict[str, Any]] = {}
        self._asked: frozenset[str] = frozenset()
        self._question: asyncio.Future[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._no_batch_until = 0.0
        #: questions asked (held or not), for the curious and the tests
        self.questions = 0

    @property
    def batch(self) -> bool:
        """Whether the service is asked about all the places at once (else one at a time)."""
        return asyncio.get_running_loop().time() >= self._no_batch_until

    def waits(self, admission_id: str) -> bool:
        return admission_id in self._boxes

    def join(self, admission_id: str, row: Mapping[str, Any]) -> None:
        """A start waits in line with ``row`` (what it heard last): ask for it too."""
        self._boxes[admission_id] = asyncio.Queue()
        self._heard[admission_id] = heard_of(row)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        elif admission_id not in self._asked and self._question is not None:
            self._question.cancel()  # the question held does not list it: ask again now

    def leave(self, admission_id: str) -> None:
        """The start waits no more (admitted, given up, cancelled). The question held is not
        asked again for that: the entry's leaving the line answers it anyway."""
        self._boxes.pop(admission_id, None)
        self._heard.pop(admission_id, None)

    async def answer(self, admission_id: str, timeout: float) -> dict[str, Any] | None:
        """The start's next row (its entry changed, or the heartbeat), None if none came within
        ``timeout`` seconds; raises what the question's failure means for it."""
        box = self._boxes[admission_id]
        try:
            item = await asyncio.wait_for(box.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        client = self._make()
        try:
            while self._heard and self.batch:
                heard = dict(self._heard)
                self._asked = frozenset(heard)
                asked_at = loop.time()
                self.questions += 1
                self._question = asyncio.ensure_future(
                    client.admissions_wait(heard, wait=self._wait())
                )
                await asyncio.wait([self._question])
                question, self._question = self._question, None
                if question.cancelled():
                    continue  # a start joined: ask again with it
                try:
                    rows = question.result()
                except GPUPoolError as e:
                    if e.status in (404, 405):  # a service older than the batch question
                        self._no_batch_until = loop.time() + NO_BATCH_SECONDS
                        self._tell_all(NoBatch(e.message))
                        return
                    self._tell_all(ServiceUnavailable(e.message))
                    await asyncio.sleep(self._retry())
                    continue
                except Exception as e:  # an answer not as the API says: as a failed question
                    log.warning("the question about places in line failed: %r", e)
                    self._tell_all(ServiceUnavailable(f"an answer not understood: {e!r}"))
                    await asyncio.sleep(self._retry())
                    continue
                told = self._tell(rows)
                rest = self._least() - (loop.time() - asked_at)
                if not told and rest > 0:  # answered at once with nothing new: no tight loop
                    await asyncio.sleep(rest)
        finally:
            self._task = None  # at once: a start that joins from now on starts the next one
            if self._question is not None:
                self._question.cancel()
            with contextlib.suppress(Exception):
                await client.close()

    def _tell(self, rows: Mapping[str, Mapping[str, Any]]) -> int:
        """Each changed entry's row to its start; how many were told."""
        told = 0
        for admission_id, row in rows.items():
            heard = self._heard.get(admission_id)
            if heard is None:
                continue  # its start no longer waits (or was told it left the line)
            box = self._boxes[admission_id]
            state = row.get("state")
            if state == "unknown":
                del self._heard[admission_id]
                box.put_nowait(PlaceLost(f"the service no longer knows {admission_id}"))
            elif heard_of(row) != heard:
                if state != "queued":
                    del self._heard[admission_id]  # left the line: nothing more to ask
                else:
                    self._heard[admission_id] = heard_of(row)
                box.put_nowait(dict(row))
            else:
                continue  # the heartbeat: the start keeps its own time
            told += 1
        return told

    def _tell_all(self, failure: Exception) -> None:
        for admission_id in self._heard:
            self._boxes[admission_id].put_nowait(failure)


#: One :class:`Waiters` per event loop and service (address and token).
_WAITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Waiters]] = (
    weakref.WeakKeyDictionary()
)


def waiters_for(
    url: str, token: str, make: Callable[[], GPUPoolClient], **timing: Callable[[], float]
) -> Waiters:
    """The waiting starts of this process (event loop) against the service at ``url``."""
    per_loop = _WAITERS.setdefault(asyncio.get_running_loop(), {})
    found = per_loop.get((url, token))
    if found is None:
        found = per_loop[(url, token)] = Waiters(make, **timing)
    return found
