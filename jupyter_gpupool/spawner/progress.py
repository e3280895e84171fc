"""Progress messages: gpupool's own steps interleaved with KubeSpawner's pod events.

The start loop appends to a :class:`ProgressLog` (admitted, skipped, scheduled, falling
back...); ``progress()`` yields those as they come, merged with what KubeSpawner's own
``progress()`` yields (the pod's Kubernetes events), until the start is over.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

#: How often new messages of our own are looked for while KubeSpawner's generator sleeps.
POLL_SECONDS = 0.1


class ProgressLog:
    """The messages of one start, in order (several progress pages may read them)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, message: str, **extra: Any) -> None:
        self.events.append({"message": message, **extra})

    @property
    def messages(self) -> list[str]:
        return [e["message"] for e in self.events]


async def merge_progress(
    log: ProgressLog,
    other: AsyncIterator[dict[str, Any]],
    done: Callable[[], bool],
    poll: float = POLL_SECONDS,
) -> AsyncIterator[dict[str, Any]]:
    """Yield ``log``'s events as they are added and ``other``'s as they come, until ``other``
    is exhausted and ``done()``; then whatever ``log`` still holds."""
    sent = 0
    pending: asyncio.Future[dict[str, Any]] | None = asyncio.ensure_future(anext(other))
    try:
        while True:
            while sent < len(log.events):
                yield log.events[sent]
                sent += 1
            if pending is None:
                if done():
                    break
                await asyncio.sleep(poll)
                continue
            finished, _ = await asyncio.wait({pending}, timeout=poll)
            if pending in finished:
                try:
                    item = pending.result()
                except StopAsyncIteration:
                    pending = None
                    continue
                yield item
                pending = asyncio.ensure_future(anext(other))
        while sent < len(log.events):
            yield log.events[sent]
            sent += 1
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
