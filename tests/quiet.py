"""Stretches of tests that hold wall-clock time to a bound run while no other test of the run runs.

In a parallel run (pytest-xdist, ``scripts/test.sh``) the tests on the other workers share the
machine's cores: a single-user server that starts in 4 s alone takes 15 s beside three other
tests starting theirs. Most tests wait for the event they need and don't mind; a few hold
wall-clock time to a bound because the bound is the behaviour under test (the queue's issue:
"bob's server is ready within 10 s of alice's stop"; the demo stops within its grace period), or
compare two timings taken one after the other (the benchmarks' ratios). Those measure in a quiet
run::

    from quiet import quiet, quiet_async

    with quiet():                  # waits until the tests running on the other workers end;
        ...                        # no test starts anywhere until the block ends
    async with quiet_async():      # the same, the event loop running while it waits
        ...

or, for a whole test's call, ``@pytest.mark.quiet``. Outside xdist (``-n 0``) they do nothing.

How: every test holds the run's lock file shared for the whole of its setup, call and teardown
(``hold_shared``, from tests/conftest.py); a quiet stretch holds it exclusively. flock gives a
waiting exclusive lock no precedence over new shared ones, so a second file is a gate: a test
passes it to take its shared lock, and a quiet stretch holds it while it waits and runs, so that
the tests that end are not replaced by new ones meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO

__all__ = ["hold_shared", "quiet", "quiet_async", "release_shared", "use_directory"]

_files: tuple[IO[str], IO[str]] | None = None  # (gate, lock), once this worker is in a run


def use_directory(directory: Path) -> None:
    """Take part in the run whose workers share ``directory`` (the run's temporary root)."""
    global _files
    _files = (open(directory / "quiet.gate", "a"), open(directory / "quiet.lock", "a"))  # noqa: SIM115 - held for the whole session


def hold_shared() -> None:
    """Before a test: its shared hold, once no quiet stretch runs or waits."""
    if _files is None:
        return
    gate, lock = _files
    fcntl.flock(gate, fcntl.LOCK_EX)
    fcntl.flock(lock, fcntl.LOCK_SH)
    fcntl.flock(gate, fcntl.LOCK_UN)


def release_shared() -> None:
    """After a test."""
    if _files is not None:
        fcntl.flock(_files[1], fcntl.LOCK_UN)


def _begin() -> None:
    if _files is None:
        return
    gate, lock = _files
    # this test's own shared hold goes first: a quiet stretch on another worker may be waiting
    # for it, holding the gate that this one waits for next
    fcntl.flock(lock, fcntl.LOCK_UN)
    fcntl.flock(gate, fcntl.LOCK_EX)
    fcntl.flock(lock, fcntl.LOCK_EX)


def _end() -> None:
    if _files is None:
        return
    gate, lock = _files
    fcntl.flock(lock, fcntl.LOCK_SH)  # back to the test's shared hold, for its teardown
    fcntl.flock(gate, fcntl.LOCK_UN)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No other test of the run runs inside: see the module's docstring."""
    _begin()
    try:
        yield
    finally:
        _end()


@contextlib.asynccontextmanager
async def quiet_async() -> AsyncIterator[None]:
    """:func:`quiet` for a test on an event loop, which keeps running while it waits."""
    await asyncio.to_thread(_begin)
    try:
        yield
    finally:
        _end()
