"""The bookings made through the API, kept in the database and in memory.

At start (or once a database that did not answer then does) the book takes up every stored
booking (:meth:`BookingBook.take_up`); from then on a booking
is created, replaced or deleted here only once the database has committed it
(:meth:`BookingBook.put`, :meth:`BookingBook.drop` await the write's future for at most
``durable_timeout`` seconds), so nothing the API answered exists in memory alone. Without a
database the book takes none (503): a booking kept only until the next restart would be a
promise the service cannot hold.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from ...core.documents.yaml_reader import DocumentError
from ...core.pools.booking_requests import booking_of_document
from ...core.pools.writing import booking_to_document
from ...core.time.bookings import Booking
from ...core.words.booking_rows import UNSHOWN, booking_row
from ...db.store import Database
from .. import clock
from ..commits import until_committed
from ..errors import ApiError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stored:
    """A booking made through the API, with who made it and last changed it, and when."""

    booking: Booking
    created_by: str
    created: float
    changed_by: str
    changed: float

    def meta(self) -> dict[str, Any]:
        return {
            "created_by": self.created_by,
            "created": self.created,
            "changed_by": self.changed_by,
            "changed": self.changed,
        }


def _rows(stored: Sequence[Stored]) -> list[dict[str, Any]]:
    """The database rows of ``stored`` bookings (:class:`~jupyter_gpupool.db.models.BookingRow`)."""
    return [
        {
            "name": s.booking.name,
            "document": json.dumps(booking_to_document(s.booking)),
            **s.meta(),
        }
        for s in stored
    ]


class BookingBook:
    """The stored bookings by name; ``on_change`` is told the new tuple after every change."""

    def __init__(self, db: Database | None, durable_timeout: float = 5.0):
        self.db = db
        self.durable_timeout = durable_timeout
        self.stored: dict[str, Stored] = {}
        #: Set when the database is open and the stored bookings were read
        self.ready = False
        self.problem = "no database is configured (c.GPUPoolService.db_url)"
        self.on_change: Callable[[tuple[Booking, ...]], None] | None = None
        #: Stored bookings that do not load (name: why), left out of force; health names them
        self.left_out: dict[str, str] = {}

    def bookings(self) -> tuple[Booking, ...]:
        return tuple(s.booking for s in self.stored.values())

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.bookings())

    def take_up(self, rows: list[dict[str, Any]]) -> None:
        """The stored bookings, as the database's rows
        (:meth:`~jupyter_gpupool.db.store.Database.bookings`), come into force. One that no
        longer loads is logged and left out of force (its row stays)."""
        now = clock.now()
        for row in rows:
            try:
                booking = booking_of_document(json.loads(row["document"]))
                # one whose windows cannot be worked out would break every list it is in
                booking_row(booking, now, str)
            except (DocumentError, *UNSHOWN) as e:
                log.error("stored booking %s does not load, left out: %s", row["name"], e)
                self.left_out[row["name"]] = str(e).strip()
                continue
            self.stored[row["name"]] = Stored(
                replace(booking, source=None),
                row["created_by"],
                row["created"],
                row["changed_by"],
                row["changed"],
            )
        self.ready = True
        self.problem = ""
        if rows:
            log.info("%d bookings taken up from the database", len(self.stored))
        self._changed()

    def unavailable(self, why: str) -> None:
        self.problem = why

    async def _durable(
        self, future: Future[None] | None, what: str, late: Callable[[], None] | None = None
    ) -> None:
        """Wait for ``future``'s commit; 503 when it fails or is late. A write that is late but
        already being committed cannot be taken back: the 503 says it may still be recorded,
        and ``late`` is called (on the loop) if it then is, so memory follows the database."""
        if future is None:  # pragma: no cover - a book that is ready has a database
            raise ApiError(503, f"cannot keep {what}: {self.problem}")
        try:
            await until_committed(future, self.durable_timeout)
        except Exception as e:  # DatabaseError, or late (TimeoutError)
            if isinstance(e, TimeoutError) and not future.cancelled():
                if future.done() and future.exception() is None:
                    return  # committed as the wait ran out
                loop = asyncio.get_running_loop()
                if late is not None:
                    future.add_done_callback(
                        lambda f: (
                            loop.call_soon_threadsafe(late)
                            if not f.cancelled() and f.exception() is None
                            else None
                        )
                    )
                log.error(
                    "%s: no commit within %g s (still being written)", what, self.durable_timeout
                )
                raise ApiError(
                    503,
                    f"{what} was not recorded within {self.durable_timeout:g} s and is still "
                    "being written to the service's database: it may yet be kept; "
                    "GET api/v1/bookings in a moment says whether it was",
                ) from None
            why = str(e) or f"no commit within {self.durable_timeout:g} s"
            log.error("%s could not be recorded: %s", what, why)
            raise ApiError(
                503,
                f"{what} could not be recorded in the service's database ({why}); nothing "
                "changed: try again in a moment",
            ) from None

    def check_ready(self) -> Database:
        """The database, once the stored bookings were read back; else 503 saying why (a
        booking the service does not know of may exist)."""
        if not self.ready or self.db is None:
            raise ApiError(503, f"bookings are kept in the service's database, and {self.problem}")
        return self.db

    async def put(self, booking: Booking, who: str, now: float) -> bool:
        """Create or replace ``booking`` once it is committed; whether it replaced one."""
        (replaced,) = await self.put_all([booking], who, now)
        return replaced

    async def put_all(self, bookings: Sequence[Booking], who: str, now: float) -> list[bool]:
        """Create or replace ``bookings`` together once they are committed, in one
        transaction: all of them are kept or none. Whether each replaced one."""
        db = self.check_ready()
        stored = []
        for booking in bookings:
            old = self.stored.get(booking.name)
            stored.append(
                Stored(
                    replace(booking, source=None),
                    old.created_by if old is not None else who,
                    old.created if old is not None else now,
                    who,
                    now,
                )
            )
        # thousands of documents take a while to write out: not on the loop
        rows = await asyncio.to_thread(_rows, stored)
        replaced = [b.name in self.stored for b in bookings]

        def keep() -> None:
            for s in stored:
                self.stored[s.booking.name] = s
            self._changed()

        what = f"booking {bookings[0].name}" if len(bookings) == 1 else f"{len(bookings)} bookings"
        await self._durable(db.bookings_put(rows), what, late=keep)
        keep()
        return replaced

    async def drop(self, name: str) -> None:
        """Delete booking ``name`` once the deletion is committed."""
        db = self.check_ready()

        def gone() -> None:
            self.stored.pop(name, None)
            self._changed()

        await self._durable(db.booking_drop(name), f"the deletion of booking {name}", late=gone)
        gone()
