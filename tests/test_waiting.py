"""tests/waiting.py: what a wait returns, and what its failure says."""

import asyncio
import time

import pytest
from waiting import WaitTimeout, async_wait_for, wait_for


def countdown(n, value="done"):
    """A predicate that is falsy ``n`` times, then returns ``value``."""
    calls = []

    def predicate():
        calls.append(1)
        return value if len(calls) > n else None

    predicate.calls = calls
    return predicate


def test_returns_the_first_truthy_value():
    predicate = countdown(3, {"pod": "p"})
    assert wait_for(predicate, what="p", interval=0) == {"pod": "p"}
    assert len(predicate.calls) == 4


def test_a_timeout_fails_naming_what_how_long_and_the_last_value():
    began = time.monotonic()
    with pytest.raises(AssertionError) as e:
        wait_for(lambda: [], timeout=0.2, what="the pods to go")
    assert time.monotonic() - began >= 0.2
    assert str(e.value) == "timed out after 0.2s waiting for the pods to go; last value: []"
    assert isinstance(e.value, WaitTimeout)


def test_ignored_errors_count_as_not_yet_and_others_propagate():
    attempts = []

    def connect():
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionRefusedError("not listening yet")
        return "answer"

    assert wait_for(connect, ignore=(ConnectionError,), what="x", interval=0) == "answer"

    def refuse():
        raise ConnectionRefusedError("not listening yet")

    with pytest.raises(WaitTimeout) as e:
        wait_for(refuse, ignore=(ConnectionError,), timeout=0.05, what="the server")
    assert str(e.value) == (
        "timed out after 0.05s waiting for the server; "
        "last attempt raised ConnectionRefusedError: not listening yet"
    )
    # a broken predicate is not a timeout: it fails at once, with its own error
    began = time.monotonic()
    with pytest.raises(KeyError):
        wait_for(lambda: {}["missing"], ignore=(ConnectionError,), what="x")
    assert time.monotonic() - began < 1


async def test_async_accepts_coroutine_functions_and_lets_the_loop_run():
    ready = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, ready.set)

    async def is_ready():
        return ready.is_set() and "ready"

    assert await async_wait_for(is_ready, what="the event") == "ready"
    with pytest.raises(WaitTimeout, match=r"^timed out after 0.05s waiting for never; "):
        await async_wait_for(lambda: 0, timeout=0.05, what="never")
