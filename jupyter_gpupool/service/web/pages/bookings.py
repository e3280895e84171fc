"""*Bookings* (``{prefix}bookings?week=2027-W03``): each pool's bookings in one ISO week, day by
day, with the GPUs booked against the pool's total of that shape; and the admin's forms that
add bookings from YAML (``POST {prefix}admin/bookings``, on the admin page) and delete one
(``POST {prefix}admin/bookings/NAME/delete``). Both go through the booking desk as the API does
(:mod:`...registry.bookingdesk`) and into the change log with who made them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from tornado import web

from ....core.time.bookings import Booking
from ....core.words.booking_rows import (
    booking_row,
    parse_week,
    rows_shown,
    week_view,
    week_words,
)
from ... import clock, views
from ...errors import ApiError
from ...records import changelog
from ...registry.bookingdesk import booking_documents
from .admin import AdminPage, refusal_sentence, request_lines, sentence
from .base import AdminPageHandler


def shape_totals(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Per (pool, shape id) the units the pool's nodes have (``GET api/v1/pools``' rows)."""
    out: dict[tuple[str, str], int] = {}
    for row in rows:
        for s in row.get("shapes") or ():
            out[(row["name"], s["id"])] = out.get((row["name"], s["id"]), 0) + int(s["total"])
    return out


def booking_rows(ctx: Any, bookings: Iterable[Booking], now: float) -> list[dict[str, Any]]:
    """The rows of the bookings that can be shown (those that cannot: ``api/v1/health``)."""
    rows, _ = rows_shown(
        bookings, lambda b: booking_row(b, now, views.iso, ctx.bookings.stored_meta(b.name))
    )
    return rows


class BookingsPage(AdminPageHandler):
    """``{prefix}bookings``: the week view of every pool's bookings, and the list of them."""

    nav = "bookings"
    title = "Bookings"

    async def get(self) -> None:
        try:
            monday = parse_week(self.arg("week"), clock.now())
        except ValueError as e:
            raise web.HTTPError(400, sentence(str(e))) from None
        state = self.ctx.state
        bookings = state.bookings
        week = dt.timedelta(days=7)
        self.render_page(
            "bookings.html",
            week=week_words(monday),
            monday=monday,
            sunday=monday + dt.timedelta(days=6),
            prev_week=week_words(monday - week),
            next_week=week_words(monday + week),
            pools=week_view(bookings, monday, shape_totals(state.pool_summaries())),
            bookings=booking_rows(self.ctx, bookings, clock.now()),
            stored=set(self.ctx.bookings.book.stored),
            problem=self.ctx.bookings.book.problem,
        )


class AddBookingsAction(AdminPage):
    """``POST {prefix}admin/bookings``: the booking YAML of the admin page."""

    async def post(self) -> None:
        text = self.get_body_argument("yaml", "")
        try:
            if not text.strip():
                raise ApiError(400, "Paste a booking document first.")
            docs, others = booking_documents(text)
            if others:
                raise ApiError(400, "Only kind: booking documents belong here.")
            assert self.caller is not None
            result = await self.ctx.bookings.apply(docs, self.caller.who)
        except ApiError as e:
            problems = request_lines([str(p) for p in e.extra.get("problems") or ()])
            self.show(
                {"booking": refusal_sentence(e.message), "booking_problems": problems},
                booking_yaml=text,
                status=e.status,
            )
            return
        what = changelog.applied_bookings(result)
        self.record(what)
        self.flash(sentence(what))
        self.redirect(f"{self.svc}bookings")


class DeleteBookingAction(AdminPageHandler):
    """``POST {prefix}admin/bookings/NAME/delete``: a booking made through the API or here."""

    async def post(self, name: str) -> None:
        await self.ctx.bookings.delete(name)
        self.record(changelog.deleted_booking(name))
        self.flash(f"Booking {name} deleted.")
        self.redirect(f"{self.svc}bookings#booking-{quote(name)}")
