"""The service's background loops, each named and owned by the component that runs it.

A :class:`Loop` calls its work every ``interval`` seconds (sooner when its ``wake`` event is set),
logs under ``gpupool.loops.<name>``, and keeps what an admin needs to see whether it is stuck: how
often it ran, when it last finished, how long that took, and its last error. The components
make their own loops (the admission desk its sweep, the line its passes, the utilization poller
its polls…); the application starts and stops them all and ``GET api/v1/health`` lists them
(:func:`loop_rows`).

As JupyterHub keeps its periodic callbacks by name (``JupyterHub._periodic_callbacks``), and
jupyter_server's kernel culler belongs to the kernel manager whose kernels it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from . import clock

#: A loop that has not finished a round for this many intervals (and 5 s more) is ``late``.
LATE_AFTER = 3


class Loop:
    """``work`` every ``interval`` seconds, first after ``first`` seconds (default: one
    interval). With ``wake``, a set event starts the next round at once; clearing it is the
    work's business (the line clears its kick when it has passed)."""

    def __init__(
        self,
        name: str,
        interval: float,
        work: Callable[[], Awaitable[Any]],
        *,
        wake: asyncio.Event | None = None,
        first: float | None = None,
    ):
        self.name = name
        self.interval = interval
        self.work = work
        self.wake = wake
        self.first = interval if first is None else first
        #: The wait before the next round when it varies (a loop that backs off), asked after
        #: each round; None: ``interval``
        self.pace: Callable[[], float] | None = None
        self.log = logging.getLogger(f"gpupool.loops.{name}")
        self.runs = 0
        self.failures = 0
        self.started_at: float | None = None  # the loop itself
        self.last_start: float | None = None  # its last round
        self.last_end: float | None = None
        self.last_seconds: float | None = None
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    # --- running ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self.started_at = clock.now()
            self._task = asyncio.create_task(self.run(), name=f"gpupool-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def run(self) -> None:
        """Round after round until cancelled; a round that fails is logged and counted, and the
        loop goes on."""
        wait = self.first
        while True:
            await self._wait(wait)
            await self.run_once()
            wait = self.pace() if self.pace is not None else self.interval

    async def _wait(self, seconds: float) -> None:
        if self.wake is None:
            await asyncio.sleep(seconds)
            return
        # asyncio.timeout, not wait_for: a cancel that meets a wake is never swallowed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.wake.wait()

    async def run_once(self) -> None:
        self.last_start = clock.now()
        began = time.perf_counter()
        try:
            await self.work()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.failures += 1
            self.last_error = f"{type(e).__name__}: {e}"
            self.last_error_at = clock.now()
            self.log.exception("%s failed", self.name)
        finally:
            self.last_seconds = time.perf_counter() - began
            self.last_end = clock.now()
            self.runs += 1

    # --- what /health shows ----------------------------------------------------------------------

    def late(self, now: float) -> bool:
        """Not finished a round for over ``LATE_AFTER`` intervals (and 5 s) since it last
        finished one, or since it started."""
        since = self.last_end if self.last_end is not None else self.started_at
        if since is None:
            return False
        return now - since > LATE_AFTER * max(self.interval, self.first) + 5

    def row(self, now: float, iso: Callable[[float], str]) -> dict[str, Any]:
        def when(t: float | None) -> str | None:
            return iso(t) if t is not None else None

        return {
            "name": self.name,
            "interval_seconds": self.interval,
            "running": self.running,
            "late": self.running and self.late(now),
            "runs": self.runs,
            "failures": self.failures,
            "last_run": when(self.last_end),
            "last_run_seconds_ago": None
            if self.last_end is None
            else round(now - self.last_end, 3),
            "last_duration_ms": (
                None if self.last_seconds is None else round(1000 * self.last_seconds, 3)
            ),
            "last_error": self.last_error,
            "last_error_at": when(self.last_error_at),
        }


def loop_rows(
    loops: Iterable[Loop], now: float, iso: Callable[[float], str]
) -> list[dict[str, Any]]:
    return [loop.row(now, iso) for loop in loops]
