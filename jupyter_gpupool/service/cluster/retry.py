"""Exponential backoff with full jitter: how the service waits before trying the API server again.

One policy for the two places that retry: the list+watch loops (:mod:`.clusterview`, which retry
forever and start again from the shortest wait once they make progress) and the single calls of
:class:`~jupyter_gpupool.service.cluster.kube.Kube` that read and write the registry's ConfigMap and node
labels (a few tries, then the error). Full jitter, a uniform wait in ``[0, min(cap, base * 2**n)]``
(the "Full Jitter" of AWS's "Exponential Backoff And Jitter"), spreads the retries of many
clients after an outage instead of having them come back in step.

The wait is computed from an injected ``rng`` and slept through an injected ``sleep``, so tests
can check the sequence without waiting for it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

#: 2**32 times any base is already past any sensible cap; bounding the exponent keeps the float
#: finite for a loop that has failed for days.
MAX_EXPONENT = 32


def backoff_delay(attempt: int, base: float, cap: float, rng: Callable[[], float]) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)] (``attempt`` counts from 0)."""
    return rng() * min(cap, base * (2 ** min(attempt, MAX_EXPONENT)))


class Backoff:
    """The waits of one retry loop: each :meth:`next_delay` is longer (up to ``cap``) until
    :meth:`reset`, which a loop calls when it made progress."""

    def __init__(
        self,
        base: float,
        cap: float,
        *,
        rng: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.base = base
        self.cap = cap
        self.attempt = 0
        self._rng = rng
        self._sleep = sleep

    def reset(self) -> None:
        self.attempt = 0

    def next_delay(self) -> float:
        """The next wait, counting one more failure."""
        delay = backoff_delay(self.attempt, self.base, self.cap, self._rng)
        self.attempt += 1
        return delay

    async def sleep(self, delay: float) -> None:
        await self._sleep(delay)
