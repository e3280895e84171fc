"""``kind: booking`` documents into :class:`~..time.bookings.Booking` s: the rules the document's shape
(:data:`~.document_spec.BOOKING_DOCUMENT`) cannot say, each a problem at its line.

Inside a document: a window is ``once`` or ``weekly`` (one of them); it ends after it starts; a
weekly window has ``from`` and ``until`` (so it has a last day), ``from`` no later than
``until``, at least one day, and at most :data:`~..time.bookings.MAX_SPAN_DAYS` from ``from``
to ``until``; a once window has neither, lasts at most as long, and holds at all (not both ends
in one daylight-saving gap); the shape is a shape id; a booking
is for someone (``groups`` or ``users``). Between documents (:func:`check_bookings`): a booking
names a pool that exists and a shape the pool offers, and no two bookings share a name.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..documents.spec import Checker
from ..documents.yaml_reader import Document, PathElem, Problem
from ..time.bookings import (
    MAX_SPAN_DAYS,
    Booking,
    Once,
    Weekly,
    Window,
    in_gap,
    once_occurrence,
)
from ..usage.shapes import is_shape_id
from .model import Pool, Source

_SHAPE_WORDS = (
    "whole, mig-<profile> such as mig-1g.10gb, shared-<replicas>, mps-<replicas>, hami-<split>"
)


def _window(c: Checker, data: Mapping[str, Any], bounded: bool = True) -> Window | None:
    path: tuple[PathElem, ...] = ("window",)
    written = c.doc.data.get("window") if isinstance(c.doc.data, Mapping) else None
    written = written if isinstance(written, Mapping) else {}
    kinds = [k for k in ("once", "weekly") if k in written]
    if len(kinds) != 1:
        c.add(
            path,
            "a window is 'once' or 'weekly': give one of them"
            if not kinds
            else "a window is 'once' or 'weekly', not both",
        )
        return None
    if kinds == ["once"]:
        for key in ("from", "until"):
            if key in written:
                c.add((*path, key), f"'{key}' bounds a weekly window; a once window has its dates")
        once = data.get("once") or {}
        if "start" not in once or "end" not in once or "timezone" not in data:
            return None  # reported by the shape
        if once["end"] <= once["start"]:
            c.add(
                (*path, "once", "end"),
                f"the window must end after it starts ({once['start']:%Y-%m-%dT%H:%M}), not "
                f"at {once['end']:%Y-%m-%dT%H:%M}",
            )
            return None
        if bounded and once["end"] - once["start"] > dt.timedelta(days=MAX_SPAN_DAYS):
            c.add(
                (*path, "once", "end"),
                f"a window lasts at most {MAX_SPAN_DAYS} days: this one runs from "
                f"{once['start']:%Y-%m-%dT%H:%M} to {once['end']:%Y-%m-%dT%H:%M}",
            )
            return None
        window = Window(data["timezone"], once=Once(once["start"], once["end"]))
        gap = in_gap(once["start"], data["timezone"]) and in_gap(once["end"], data["timezone"])
        if gap or once_occurrence(window) is None:
            c.add(
                (*path, "once"),
                f"{once['start']:%Y-%m-%dT%H:%M} to {once['end']:%Y-%m-%dT%H:%M} is skipped by "
                f"a daylight-saving change in {data['timezone']}: those clock times never "
                "happen, so the window would never hold",
            )
            return None
        return window
    weekly = data.get("weekly") or {}
    ok = True
    for key in ("from", "until"):
        if key not in written:
            c.add(path, f"a weekly window needs '{key}' (a date, YYYY-MM-DD; inclusive)")
            ok = False
    if "from" in data and "until" in data and data["until"] < data["from"]:
        c.add(
            (*path, "until"),
            f"until ({data['until']}) is before from ({data['from']})",
        )
        ok = False
    elif (
        bounded
        and "from" in data
        and "until" in data
        and data["until"] - data["from"] > dt.timedelta(days=MAX_SPAN_DAYS)
    ):
        c.add(
            (*path, "until"),
            f"a weekly window spans at most {MAX_SPAN_DAYS} days from 'from' to 'until' "
            f"(here {data['from']} to {data['until']}): make a booking per year",
        )
        ok = False
    if "days" in weekly and not weekly["days"]:
        c.add((*path, "weekly", "days"), "a weekly window needs at least one day")
        ok = False
    if "start" in weekly and "end" in weekly and weekly["end"] <= weekly["start"]:
        c.add(
            (*path, "weekly", "end"),
            f"the window must end after it starts ({weekly['start']:%H:%M}), not at "
            f"{weekly['end']:%H:%M}: a window ends on the day it starts",
        )
        ok = False
    if not ok or not all(k in weekly for k in ("days", "start", "end")):
        return None
    if "from" not in data or "until" not in data or "timezone" not in data:
        return None
    return Window(
        data["timezone"],
        weekly=Weekly(
            days=tuple(sorted(weekly["days"])),
            start=weekly["start"],
            end=weekly["end"],
            first=data["from"],
            last=data["until"],
        ),
    )


@dataclass(frozen=True)
class Named:
    """What a booking document names, checked against the other documents even when the rest
    of it has problems (so a duplicate name is reported along with a bad window)."""

    name: str
    pool: str | None
    shape: str | None
    booking: Booking | None  # None when the document has a problem


def build_booking(c: Checker, data: Mapping[str, Any], bounded: bool = True) -> Named | None:
    """What a checked ``kind: booking`` document names, and its booking when it has no
    problem; None without a valid name. ``bounded=False`` (a booking stored before windows
    were bounded) lets a window last longer than :data:`~..time.bookings.MAX_SPAN_DAYS`."""
    meta = data.get("booking") or {}
    if "name" not in meta:
        return None
    booking = _booking(c, data, bounded)
    shape = data.get("shape", "whole")
    return Named(meta["name"], data.get("pool"), shape if is_shape_id(shape) else None, booking)


def _booking(c: Checker, data: Mapping[str, Any], bounded: bool = True) -> Booking | None:
    ok = True
    shape = data.get("shape", "whole")
    if "shape" in data and not is_shape_id(shape):
        c.add(("shape",), f"{shape!r} is not a shape id ({_SHAPE_WORDS})")
        ok = False
    groups, users = tuple(data.get("groups") or ()), tuple(data.get("users") or ())
    if not groups and not users and isinstance(c.doc.data, Mapping):
        c.add((), "a booking is for someone: give 'groups' or 'users' (or both)")
        ok = False
    window = _window(c, data.get("window") or {}, bounded) if "window" in data else None
    meta = data.get("booking") or {}
    if not ok or window is None or "name" not in meta or "pool" not in data:
        return None
    if "gpus" not in data:
        return None
    return Booking(
        name=meta["name"],
        description=meta.get("description"),
        pool=data["pool"],
        shape=shape,
        gpus=data["gpus"],
        groups=groups,
        users=users,
        window=window,
        source=Source(c.doc.file, c.doc.line_of(("booking", "name"))),
    )


def check_bookings(
    loaded: Sequence[tuple[Document, Named]],
    pools: Mapping[str, Pool],
    known_pools: set[str],
    known_words: str,
) -> tuple[tuple[Booking, ...], list[Problem]]:
    """The bookings that name a known pool, a shape it offers, and a name not taken before."""
    problems: list[Problem] = []
    out: list[Booking] = []
    names: dict[str, Source] = {}
    for doc, booking in loaded:
        if booking.name in names:
            problems.append(
                doc.problem(
                    ("booking", "name"),
                    f"duplicate booking name {booking.name!r}; already defined at "
                    f"{names[booking.name]}",
                )
            )
            continue
        names[booking.name] = Source(doc.file, doc.line_of(("booking", "name")))
        if booking.pool is not None and booking.pool not in known_pools:
            problems.append(
                doc.problem(("pool",), f"unknown pool {booking.pool!r} (pools: {known_words})")
            )
            continue
        pool = pools.get(booking.pool) if booking.pool is not None else None
        if pool is not None and booking.shape and not pool.offers_shape(booking.shape):
            offered = ", ".join(r.id for r in pool.shapes)
            problems.append(
                doc.problem(
                    ("shape",),
                    f"pool {pool.name} does not offer {booking.shape} (its shapes: {offered})",
                )
            )
            continue
        if booking.booking is not None:
            out.append(booking.booking)
    return tuple(out), problems
