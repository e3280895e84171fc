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
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from ...core.documents.yaml_reader import DocumentError
from ...core.pools.booking_requests import booking_of_document
from ...core.pools.writing import booking_to_document
from ...core.time.bookings import Booking
from ...db.store import Database
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

    def bookings(self) -> tuple[Booking, ...]:
        return tuple(s.booking for s in self.stored.values())

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.bookings())

    def take_up(self, rows: list[dict[str, Any]]) -> None:
        """The stored bookings, as the database's rows (:meth:`~jupyter_gpupool.db.store.Database.bookings`),
        come into force. One that no longer loads is logged and left out of force (its row
        stays)."""
        for row in rows:
            try:
                booking = booking_of_document(json.loads(row["document"]))
            except (DocumentError, ValueError) as e:
                log.error("stored booking %s does not load, left out: %s", row["name"], e)
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

    async def _durable(self, future: Future[None] | None, what: str) -> None:
        if future is None:  # pragma: no cover - a book that is ready has a database
            raise ApiError(503, f"cannot keep {what}: {self.problem}")
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), self.durable_timeout)
        except Exception as e:  # DatabaseError, or late (TimeoutError)
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
        db = self.check_ready()
        old = self.stored.get(booking.name)
        stored = Stored(
            replace(booking, source=None),
            old.created_by if old is not None else who,
            old.created if old is not None else now,
            who,
            now,
        )
        fields = {
            "name": booking.name,
            "document": json.dumps(booking_to_document(booking)),
            **stored.meta(),
        }
        await self._durable(db.booking_put(fields), f"booking {booking.name}")
        self.stored[booking.name] = stored
        self._changed()
        return old is not None

    async def drop(self, name: str) -> None:
        """Delete booking ``name`` once the deletion is committed."""
        db = self.check_ready()
        await self._durable(db.booking_drop(name), f"the deletion of booking {name}")
        self.stored.pop(name, None)
        self._changed()
