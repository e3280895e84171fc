"""Wait for a condition instead of sleeping and hoping it happened.

A test that sleeps and then asserts is either slow (the sleep is long enough on a loaded machine)
or flaky (it is not). These helpers poll a predicate until it returns something truthy and fail
with a message that says what was awaited, for how long, and what the predicate last returned::

    from waiting import wait_for, async_wait_for

    pod = wait_for(lambda: cluster.get_pod("p"), what="pod p to exist", timeout=10)
    await async_wait_for(lambda: view.synced, what="the view to sync")
    await async_wait_for(fetch_status, what="status 200")   # a coroutine function works too

Both return the first truthy value. ``ignore`` names exceptions that count as "not yet" (for
example ``ConnectionError`` while a server starts); the last one is quoted in the failure. Any other
exception from the predicate propagates at once: a broken predicate should not look like a timeout.

To show that something did *not* happen, wait for a positive signal that comes after it would have
happened (a later event, an answer to a later request) rather than sleeping.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["WaitTimeout", "async_wait_for", "wait_for"]

T = TypeVar("T")

_NOTHING = object()


class WaitTimeout(AssertionError):
    """The awaited condition did not hold before the deadline (a test failure, not an error)."""


def _message(what: str, timeout: float, last: object, error: BaseException | None) -> str:
    text = f"timed out after {timeout:g}s waiting for {what}"
    if error is not None:
        text += f"; last attempt raised {type(error).__name__}: {error}"
    elif last is not _NOTHING:
        text += f"; last value: {last!r}"
    return text


def wait_for(
    predicate: Callable[[], T],
    *,
    what: str,
    timeout: float = 10.0,
    interval: float = 0.02,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns a truthy value and return that value.

    Raises :class:`WaitTimeout` (an ``AssertionError``) after ``timeout`` seconds, naming ``what``.
    The predicate is always called at least once, and once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    error: BaseException | None = None
    while True:
        expired = time.monotonic() >= deadline
        try:
            value = predicate()
        except ignore as e:
            error, last = e, _NOTHING
        else:
            if value:
                return value
            error, last = None, value
        if expired:
            raise WaitTimeout(_message(what, timeout, last, error))
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


async def async_wait_for(
    predicate: Callable[[], T | Awaitable[T]],
    *,
    what: str,
    timeout: float = 10.0,
    interval: float = 0.02,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """:func:`wait_for` for the event loop: the predicate may be sync or return an awaitable.

    Sleeping with ``asyncio.sleep`` between polls lets the tasks under test run.
    """
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    error: BaseException | None = None
    while True:
        expired = time.monotonic() >= deadline
        try:
            value: Any = predicate()
            if inspect.isawaitable(value):
                value = await value
        except ignore as e:
            error, last = e, _NOTHING
        else:
            if value:
                return value  # type: ignore[no-any-return]
            error, last = None, value
        if expired:
            raise WaitTimeout(_message(what, timeout, last, error))
        await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
