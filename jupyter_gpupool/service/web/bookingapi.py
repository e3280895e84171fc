"""``api/v1/bookings``: bookings listed (admins all, a user those they are in), read, created,
replaced and deleted (admins). The checks and the durable write are the booking
desk's (:mod:`..registry.bookingdesk`); the rows are :mod:`core.words.booking_rows`'."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from ...core.time.bookings import Booking
from ...core.words.booking_rows import (
    booking_row,
    is_member,
    parse_week,
    rows_shown,
    week_words,
)
from .. import clock, views
from ..bodies import text_body
from ..errors import ApiError
from ..records import changelog
from ..registry.bookingdesk import booking_documents
from .auth import ADMIN_SCOPE, USE_SCOPE
from .base import APIHandler

log = logging.getLogger(__name__)


class BookingsBase(APIHandler):
    scopes = {"GET": USE_SCOPE, "POST": ADMIN_SCOPE, "PUT": ADMIN_SCOPE, "DELETE": ADMIN_SCOPE}

    async def visible(self) -> list[Booking]:
        """Every booking for an admin, else those the caller is in (by name or hub group)."""
        user, groups = await self.view_of()
        bookings = self.ctx.state.bookings
        if user is None:
            return list(bookings)
        return [b for b in bookings if is_member(b, user, groups)]

    def row(self, b: Booking, now: float, week: dt.date | None = None) -> dict[str, Any]:
        return booking_row(b, now, views.iso, self.ctx.bookings.stored_meta(b.name), week)

    def week(self) -> dt.date:
        try:
            return parse_week(self.get_argument("week", None), clock.now())
        except ValueError as e:
            raise ApiError(400, str(e), field="week") from None


class BookingsHandler(BookingsBase):
    """``GET api/v1/bookings?pool=&week=``; ``POST api/v1/bookings`` (YAML or JSON)."""

    async def get(self) -> None:
        now, week = clock.now(), self.week()
        pool = self.get_argument("pool", None)
        rows, unshown = rows_shown(
            (b for b in await self.visible() if pool is None or b.pool == pool),
            lambda b: self.row(b, now, week),
        )
        for name, why in unshown:
            log.error("booking %s cannot be shown, left out of the list: %s", name, why)
        sunday = week + dt.timedelta(days=6)
        self.write_json(
            {
                "week": week_words(week),
                "week_from": week.isoformat(),
                "week_until": sunday.isoformat(),
                "bookings": rows,
                "unshown": [{"name": n, "problem": why} for n, why in unshown],
            }
        )

    async def post(self) -> None:
        # a body of thousands of documents takes a while to read: not on the loop
        docs, others = await asyncio.to_thread(booking_documents, text_body(self.body))
        if others:
            raise ApiError(
                400,
                "only kind: booking documents belong here; send pools with POST api/v1/pools",
            )
        result = await self.ctx.bookings.apply(docs, self.caller.who)
        self.record(changelog.applied_bookings(result))
        now = clock.now()
        names = [*result["created"], *result["replaced"]]
        by_name = {b.name: b for b in self.ctx.state.bookings}
        # a row per booking of the body: for thousands, not on the loop
        rows = await asyncio.to_thread(lambda: [self.row(by_name[n], now) for n in names])
        self.write_json(
            {**result, "bookings": rows},
            status=201 if result["created"] else 200,
        )


class BookingHandler(BookingsBase):
    """``GET``, ``PUT``, ``DELETE api/v1/bookings/NAME``."""

    async def get(self, name: str) -> None:
        for b in await self.visible():
            if b.name == name:
                self.write_json(self.row(b, clock.now(), self.week()))
                return
        raise ApiError(404, f"no booking named {name!r}")

    async def put(self, name: str) -> None:
        docs, others = await asyncio.to_thread(booking_documents, text_body(self.body))
        if others:
            raise ApiError(400, "only a kind: booking document belongs here")
        result = await self.ctx.bookings.apply(docs, self.caller.who, replacing=name)
        self.record(changelog.applied_bookings(result))
        self.write_json(
            {**result, "booking": self.row(self.ctx.bookings.find(name), clock.now())},
            status=201 if result["created"] else 200,
        )

    async def delete(self, name: str) -> None:
        await self.ctx.bookings.delete(name)
        self.record(changelog.deleted_booking(name))
        self.write_json({"deleted": name})
