"""Awaiting a durable write's commit on the event loop: one wake of the loop per batch.

The database's writer (:mod:`jupyter_gpupool.db.writer`) completes the concurrent future of each
durable write of a batch in its thread once the batch has committed. Awaited through
``asyncio.wait_for(asyncio.wrap_future(f), timeout)``, each of those futures wakes the loop on its
own: a ``call_soon_threadsafe`` per future (a write to the loop's self-pipe, which also lets go of
the GIL between two futures of the same batch), then two more hops through the loop (the wrapped
future, then ``wait_for``'s waiter) before the handler runs again: about 40 us of CPU per wait,
against about 19 us here (``benchmarks/bench_commit_waits.py``).

Here the futures a batch completes wake the loop once: the first to complete schedules a drain,
the others join it; the drain completes each waiter, whose coroutine runs next. Each waiter has one
timer for its deadline. What stays as it was: a waiter that gives up (its deadline passed, or its
task was cancelled: the spawner went away) cancels the write's future, so that a write not begun
yet is skipped (:class:`~jupyter_gpupool.db.writer.Writer`); a write that failed raises its error.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from concurrent.futures import Future


class Commits:
    """The waits of one event loop for durable writes (:func:`until_committed`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # weakly: the loop is the key of this instance in ``_commits``, which a strong
        # reference back would keep alive for ever (every test's loop)
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        #: completed in the writer's thread, not yet told to their waiters
        self._done: list[Future[None]] = []
        self._draining = False
        #: each write's waiters: their futures on this loop and deadline timers
        self._waiters: dict[Future[None], list[tuple[asyncio.Future[None], asyncio.Handle]]] = {}

    async def wait(self, written: Future[None], timeout: float) -> None:
        """Until ``written`` completes (its result or error), or ``timeout`` seconds pass
        (:class:`TimeoutError`; the write is cancelled if it has not begun)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_at(loop.time() + timeout, self._late, written, waiter)
        waiters = self._waiters.get(written)
        if waiters is None:
            waiters = self._waiters[written] = []
            # called in the writer's thread when the batch commits (or here, if it is
            # cancelled or done by now)
            written.add_done_callback(self._completed)
        waiters.append((waiter, timer))
        try:
            await waiter
        except asyncio.CancelledError:
            # the awaiting task was cancelled (the spawner went away), or the write was: one
            # not begun yet is skipped
            written.cancel()
            raise
        finally:
            timer.cancel()

    def _completed(self, written: Future[None]) -> None:
        with self._lock:
            self._done.append(written)
            if self._draining:
                return  # the drain scheduled by the first of the batch takes it
            self._draining = True
        loop = self._loop()
        if loop is None:
            return  # the loop is gone: nobody waits any more
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed (the service stopped): nobody waits any more
            pass

    def _drain(self) -> None:
        with self._lock:
            done, self._done = self._done, []
            self._draining = False
        for written in done:
            for waiter, timer in self._waiters.pop(written, ()):
                timer.cancel()
                if waiter.done():
                    continue  # late (failed at its deadline) or cancelled meanwhile
                if written.cancelled():
                    waiter.cancel()
                elif (error := written.exception()) is not None:
                    waiter.set_exception(error)
                else:
                    waiter.set_result(None)

    def _late(self, written: Future[None], waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError())
            written.cancel()  # not begun yet: skipped


_commits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Commits] = (
    weakref.WeakKeyDictionary()
)


async def until_committed(written: Future[None], timeout: float) -> None:
    """Until the durable write ``written`` has committed: its error if it failed,
    :class:`TimeoutError` after ``timeout`` seconds (the write cancelled if not begun), and
    cancelled with the awaiting task (the write too, if not begun)."""
    if written.done():
        return written.result()
    loop = asyncio.get_running_loop()
    commits = _commits.get(loop)
    if commits is None:
        commits = _commits[loop] = Commits(loop)
    await commits.wait(written, timeout)
