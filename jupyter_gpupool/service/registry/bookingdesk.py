"""Bookings created, replaced and deleted through the API and the admin page.

A new or replaced booking is checked as a pool file's would be
(:mod:`~jupyter_gpupool.core.pools.booking_requests`: 400 with the problems at their lines), must
not take a name a pool file uses (409, saying where), and must fit its pool
(:mod:`~jupyter_gpupool.core.admission.booking_fit`: 409 naming the first window where it does
not). Capacity is what ``GET api/v1/pools`` says of the pool's nodes, read the way ``gpupool
validate --nodes`` reads it (:func:`~jupyter_gpupool.core.admission.booking_fit.capacity_from_rows`
over the same rows), with the pool's guaranteed quotas and every other booking; in a pool whose
file has ``recut``, with what its nodes could be re-cut into
(:mod:`~jupyter_gpupool.core.admission.booking_layout`, the layouts read by
:func:`..admission.recutlayouts.pool_layouts`). Checks and the durable write run under one
lock, so two bookings sent at once cannot both take the last GPUs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.admission.booking_fit import booking_conflicts, capacity_from_rows, pool_guarantees
from ...core.admission.booking_layout import PoolLayout
from ...core.documents.yaml_reader import Document, DocumentError, load_documents
from ...core.pools.booking_requests import is_booking_document, load_bookings
from ...core.pools.model import Registry
from ...core.time.bookings import Booking, all_occurrences, occurrences
from .. import clock
from ..admission.recutlayouts import pool_layouts
from ..errors import ApiError
from ..records.bookingbook import BookingBook
from ..state import ServiceState
from .changes import problems_error

REQUEST = "<request>"


def booking_documents(body: str) -> tuple[list[Document], bool]:
    """The ``kind: booking`` documents of a body, and whether it has other documents too
    (syntax errors: 400 with the problems)."""
    try:
        docs = load_documents(body, REQUEST)
    except DocumentError as e:
        raise problems_error(400, "the request body does not parse", e) from e
    bookings = [d for d in docs if is_booking_document(d)]
    return bookings, len(bookings) < len(docs)


def booking_documents_of(body: str) -> tuple[list[Document], bool]:
    """As :func:`booking_documents`, but a body that does not parse has none (its problems
    are reported by whoever reads the rest of it)."""
    try:
        return booking_documents(body)
    except ApiError:
        return [], True


class BookingDesk:
    """Where bookings change: checks, fit, the book's durable write."""

    def __init__(self, state: ServiceState, book: BookingBook):
        self.state = state
        self.book = book
        self.lock = asyncio.Lock()

    def stored_meta(self, name: str) -> dict[str, Any] | None:
        stored = self.book.stored.get(name)
        return stored.meta() if stored is not None else None

    def find(self, name: str) -> Booking:
        for b in self.state.bookings:
            if b.name == name:
                return b
        raise ApiError(404, f"no booking named {name!r}")

    async def apply(
        self, docs: Sequence[Document], who: str, replacing: str | None = None
    ) -> dict[str, list[str]]:
        """Create or replace the bookings of ``docs``, all of them or none; with ``replacing``
        (``PUT .../NAME``) there is one, and it must be named so. ``{"created": [...],
        "replaced": [...]}``. The checks run in a thread, on what the service holds when they
        begin (the lock keeps it so), so that admissions go on meanwhile."""
        if not docs:
            raise ApiError(400, "the request holds no booking document")
        async with self.lock:
            self.book.check_ready()  # 503 before a 404 or 409 from what is not read back
            registry = self.state.registry
            held = self.state.bookings
            rows = self.state.pool_summaries()
            layouts = pool_layouts(self.state)
            bookings = await asyncio.to_thread(
                self._checked, docs, registry, held, rows, replacing, layouts
            )
            replaced = await self.book.put_all(bookings, who, clock.now())
        return {
            "created": [b.name for b, was in zip(bookings, replaced, strict=True) if not was],
            "replaced": [b.name for b, was in zip(bookings, replaced, strict=True) if was],
        }

    def _checked(
        self,
        docs: Sequence[Document],
        registry: Registry,
        held: Sequence[Booking],
        rows: Sequence[Mapping[str, Any]],
        replacing: str | None,
        layouts: Mapping[str, PoolLayout] | None = None,
    ) -> list[Booking]:
        """The bookings of ``docs`` once every check passed (ApiError for the first that
        fails). Pure but for reading what it is given: run in a thread."""
        try:
            bookings = load_bookings(docs, registry)
        except DocumentError as e:
            raise problems_error(400, "the booking documents have problems", e) from e
        if replacing is not None:
            if len(bookings) != 1 or bookings[0].name != replacing:
                names = ", ".join(b.name for b in bookings)
                raise ApiError(
                    400,
                    f"PUT api/v1/bookings/{replacing} takes one booking named "
                    f"{replacing}, not {names or 'none'}",
                )
            if replacing not in self.book.stored and all(b.name != replacing for b in held):
                raise ApiError(404, f"no booking named {replacing!r}")
        _check_names(bookings, registry)
        _check_fit(bookings, held, registry, rows, layouts)
        return bookings

    async def delete(self, name: str) -> Booking:
        async with self.lock:
            self.book.check_ready()  # 503 before a 404 from what is not read back
            if name not in self.book.stored:
                booking = self.find(name)  # 404 when there is none
                raise ApiError(
                    409,
                    f"booking {name} is written in a pool file ({booking.source}); delete it there",
                )
            booking = self.book.stored[name].booking
            await self.book.drop(name)
        return booking


def _check_names(bookings: Sequence[Booking], registry: Registry) -> None:
    files = {b.name: b for b in registry.bookings}
    for b in bookings:
        if b.name in files:
            raise ApiError(
                409,
                f"booking name {b.name!r} is taken: a pool file has it "
                f"({files[b.name].source}); change it there, or choose another name",
            )


def _span(bookings: Sequence[Booking]) -> dict[str, tuple[float, float]]:
    """Per pool, from the first start to the last end of ``bookings``' windows."""
    out: dict[str, tuple[float, float]] = {}
    for b in bookings:
        windows = all_occurrences(b)
        if not windows:
            continue
        a, z = out.get(b.pool, (windows[0].start, windows[-1].end))
        out[b.pool] = (min(a, windows[0].start), max(z, windows[-1].end))
    return out


def _check_fit(
    bookings: Sequence[Booking],
    held: Sequence[Booking],
    registry: Registry,
    rows: Sequence[Mapping[str, Any]],
    layouts: Mapping[str, PoolLayout] | None = None,
) -> None:
    """409 for the first of ``bookings`` that does not fit with every other booking. Only the
    others in the same pools whose windows come within the new ones' span are read: the rest
    cannot be in force with them."""
    new = {b.name for b in bookings}
    span = _span(bookings)
    others = []
    for b in held:
        if b.name in new or b.pool not in span:
            continue
        a, z = span[b.pool]
        if occurrences(b, a, z):
            others.append(b)
    conflicts = booking_conflicts(
        [*others, *bookings],
        capacity_from_rows(rows),
        pool_guarantees(registry.pool_quotas),
        layouts,
    )
    for c in conflicts:
        if c.booking.name in new:
            raise ApiError(409, f"booking does not fit: {c.words()}", window=c.window.words())
