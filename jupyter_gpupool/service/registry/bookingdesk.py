"""Bookings created, replaced and deleted through the API and the admin page.

A new or replaced booking is checked as a pool file's would be
(:mod:`~jupyter_gpupool.core.pools.booking_requests`: 400 with the problems at their lines), must
not take a name a pool file uses (409, saying where), and must fit its pool
(:mod:`~jupyter_gpupool.core.admission.booking_fit`: 409 naming the first window where it does
not). Capacity is what ``GET api/v1/pools`` says of the pool's nodes, read the way ``gpupool
validate --nodes`` reads it (:func:`~jupyter_gpupool.core.admission.booking_fit.capacity_from_rows`
over the same rows), with the pool's guaranteed quotas and every other booking. Checks and the
durable write run under one lock, so two bookings sent at once cannot both take the last GPUs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ...core.admission.booking_fit import booking_conflicts, capacity_from_rows, pool_guarantees
from ...core.documents.yaml_reader import Document, DocumentError, load_documents
from ...core.pools.booking_requests import is_booking_document, load_bookings
from ...core.time.bookings import Booking
from .. import clock
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
        """Create or replace the bookings of ``docs``; with ``replacing`` (``PUT .../NAME``)
        there is one, and it must be named so. ``{"created": [...], "replaced": [...]}``."""
        if not docs:
            raise ApiError(400, "the request holds no booking document")
        async with self.lock:
            try:
                bookings = load_bookings(docs, self.state.registry)
            except DocumentError as e:
                raise problems_error(400, "the booking documents have problems", e) from e
            self.book.check_ready()  # 503 before a 404 or 409 from what is not read back
            if replacing is not None:
                if len(bookings) != 1 or bookings[0].name != replacing:
                    names = ", ".join(b.name for b in bookings)
                    raise ApiError(
                        400,
                        f"PUT api/v1/bookings/{replacing} takes one booking named "
                        f"{replacing}, not {names or 'none'}",
                    )
                if replacing not in self.book.stored:
                    self.find(replacing)  # 404 when there is none
            self._check_names(bookings)
            self._check_fit(bookings)
            created: list[str] = []
            replaced: list[str] = []
            for b in bookings:
                was = await self.book.put(b, who, clock.now())
                (replaced if was else created).append(b.name)
        return {"created": created, "replaced": replaced}

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

    def _check_names(self, bookings: Sequence[Booking]) -> None:
        files = {b.name: b for b in self.state.registry.bookings}
        for b in bookings:
            if b.name in files:
                raise ApiError(
                    409,
                    f"booking name {b.name!r} is taken: a pool file has it "
                    f"({files[b.name].source}); change it there, or choose another name",
                )

    def _check_fit(self, bookings: Sequence[Booking]) -> None:
        """409 for the first of ``bookings`` that does not fit with every other booking."""
        new = {b.name for b in bookings}
        others = [b for b in self.state.bookings if b.name not in new]
        registry = self.state.registry
        conflicts = booking_conflicts(
            [*others, *bookings],
            capacity_from_rows(self.state.pool_summaries()),
            pool_guarantees(registry.pool_quotas),
        )
        for c in conflicts:
            if c.booking.name in new:
                raise ApiError(409, f"booking does not fit: {c.words()}", window=c.window.words())
