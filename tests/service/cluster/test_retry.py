"""The one backoff policy (``service/cluster/retry.py``) and the two loops that use it.

The reference is AWS's "Exponential Backoff And Jitter" (Marc Brooker, 2015), "Full Jitter":
``sleep = random_between(0, min(cap, base * 2 ** attempt))``. The watches' loop is checked in
cluster/test_watch.py (``test_backs_off_on_errors_and_recovers``); the single calls of ``Kube``
(the registry's ConfigMap, node labels) here.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import aiohttp
import pytest

from jupyter_gpupool.service.cluster.kube import Kube, KubeError
from jupyter_gpupool.service.cluster.retry import Backoff, backoff_delay


def full_jitter(attempt: int, base: float, cap: float, r: float) -> float:
    """The published formula, written out independently of the module under test."""
    return r * min(cap, base * 2**attempt)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_delays_are_full_jitter_capped(seed: int):
    draws = random.Random(seed)
    values = [draws.random() for _ in range(12)]
    rng = iter(values).__next__
    got = [backoff_delay(n, 0.5, 30, rng) for n in range(12)]
    assert got == [full_jitter(n, 0.5, 30, r) for n, r in enumerate(values)]


def test_the_bounds_of_a_wait():
    assert backoff_delay(3, 0.5, 30, lambda: 0.5) == 2.0
    assert backoff_delay(100, 0.5, 30, lambda: 1.0) == 30  # capped, and no float overflow
    assert backoff_delay(10**6, 0.5, 30, lambda: 1.0) == 30
    assert backoff_delay(0, 0.5, 30, lambda: 0.0) == 0.0


async def test_a_backoff_grows_until_reset_and_sleeps_what_it_says():
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    backoff = Backoff(0.5, 4.0, rng=lambda: 1.0, sleep=sleep)
    delays = [backoff.next_delay() for _ in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.reset()
    assert backoff.next_delay() == 0.5
    await backoff.sleep(0.5)
    assert slept == [0.5]


# --- Kube.call: a few tries on the server's failures, then the error -----------------------------


class Answer:
    """What kubernetes_asyncio hands back with ``_preload_content=False``."""

    def __init__(self, status: int, body: dict[str, Any]):
        self.status = status
        self._body = json.dumps(body).encode()

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        pass


def flaky(outcomes: list[Any]):
    """An API function that answers (or raises) each of ``outcomes`` in turn."""
    calls: list[dict[str, Any]] = []

    async def read_configmap(**kwargs: Any) -> Answer:
        calls.append(kwargs)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return read_configmap, calls


def kube(slept: list[float], rng: Any = lambda: 1.0) -> Kube:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return Kube(api=None, rng=rng, sleep=sleep)  # type: ignore[arg-type]


async def test_server_errors_are_retried_with_the_same_backoff():
    slept: list[float] = []
    fn, calls = flaky(
        [
            Answer(503, {"message": "etcd is slow"}),
            Answer(429, {"message": "too many requests"}),
            aiohttp.ClientConnectionError("reset"),
            Answer(200, {"data": {"a.yaml": "x"}}),
        ]
    )
    assert await kube(slept).call(fn) == {"data": {"a.yaml": "x"}}
    assert len(calls) == 4
    assert slept == [0.1, 0.2, 0.4]  # base 0.1, doubling: the upper bounds of full jitter


async def test_the_waits_are_jittered_from_the_injected_rng():
    slept: list[float] = []
    draws = iter([0.25, 0.5, 0.75])
    fn, _ = flaky([Answer(500, {}), Answer(500, {}), Answer(500, {}), Answer(200, {})])
    await kube(slept, rng=draws.__next__).call(fn)
    assert slept == [0.25 * 0.1, 0.5 * 0.2, 0.75 * 0.4]


async def test_six_failures_give_the_last_error_after_at_most_3_1_seconds():
    slept: list[float] = []
    fn, calls = flaky([Answer(502, {"message": "bad gateway"})] * 6)
    with pytest.raises(KubeError) as e:
        await kube(slept).call(fn)
    assert (e.value.status, len(calls)) == (502, 6)
    assert slept == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert sum(slept) == pytest.approx(3.1)


async def test_an_unreachable_server_is_a_kube_error_with_status_0():
    slept: list[float] = []
    fn, calls = flaky([asyncio.TimeoutError()] * 6)
    with pytest.raises(KubeError) as e:
        await kube(slept).call(fn)
    assert e.value.status == 0 and "cannot reach the API server" in e.value.message
    assert len(calls) == 6


@pytest.mark.parametrize("status", [400, 403, 404, 409, 422])
async def test_our_mistakes_are_not_retried(status: int):
    slept: list[float] = []
    fn, calls = flaky([Answer(status, {"message": "no"})])
    with pytest.raises(KubeError) as e:
        await kube(slept).call(fn)
    assert (e.value.status, len(calls), slept) == (status, 1, [])
