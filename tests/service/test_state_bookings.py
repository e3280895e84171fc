"""``ServiceState.bookings``: the pool files' bookings, then those the service keeps, merged once
per change (admission reads it on every request)."""

from __future__ import annotations

import datetime as dt

from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.time.bookings import Booking, Once, Window
from jupyter_gpupool.service.state import ServiceState


def booking(name: str) -> Booking:
    start = dt.datetime(2027, 1, 19, 10)
    window = Window("UTC", once=Once(start, start + dt.timedelta(hours=2)))
    return Booking(name=name, pool="p", window=window, gpus=1, users=("bob",))


def test_the_files_bookings_come_first_and_the_merge_is_rebuilt_only_on_a_change():
    state = ServiceState(Registry(bookings=(booking("file-1"),)))
    state.set_stored_bookings((booking("api-1"), booking("file-1")))
    first = state.bookings
    assert [b.name for b in first] == ["file-1", "api-1"], "a file's name wins"
    assert state.bookings is first, "nothing changed: the same tuple"
    state.set_stored_bookings((booking("api-1"), booking("api-2")))
    assert [b.name for b in state.bookings] == ["file-1", "api-1", "api-2"]
    state.set_registry(Registry())
    assert [b.name for b in state.bookings] == ["api-1", "api-2"]
