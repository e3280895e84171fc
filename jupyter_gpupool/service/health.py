"""``GET api/v1/health``: which part of the service is stuck, at a glance.

:func:`health_report` puts together what each part says of itself (the background loops,
:class:`~.loops.Loop`; the list+watch per kind; the database writer; the utilization source) and
names every problem in a sentence. ``status`` is ``ok`` when there is none, else ``degraded``; the
answer is a 200 either way (it is an admin's report, not a probe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import views
from .loops import Loop

#: A kind of the watch not heard from for this long is stale. The API server ends each watch
#: after ``watch_timeout`` (300 s) and sends bookmarks meanwhile, so a live watch is heard from
#: well within it.
WATCH_STALE_SECONDS = 600.0
#: More writes than this queued for the database is a problem (it is not keeping up).
DATABASE_BACKLOG = 10_000


def health_report(
    loops: Iterable[Loop],
    watch: Mapping[str, Mapping[str, Any]],
    database: Mapping[str, Any],
    utilization: Mapping[str, Any],
    now: float,
    iso: Callable[[float], str],
    bookings_left_out: Mapping[str, str] | None = None,
    recuts: Sequence[Mapping[str, Any]] = (),
    recut_problems: Sequence[str] = (),
) -> dict[str, Any]:
    """``bookings_left_out``: the stored bookings that do not load (name: why), out of force;
    ``recuts``: the latest MIG re-cuts the service asked for, newest first, and
    ``recut_problems`` what is wrong with them (:mod:`.admission.recutwatch`)."""
    rows = [loop.row(now, iso) for loop in loops]
    problems: list[str] = list(recut_problems)
    for name, why in sorted((bookings_left_out or {}).items()):
        problems.append(f"stored booking {name} cannot be used and is out of force: {why}")
    for row in rows:
        name = row["name"]
        if not row["running"]:
            problems.append(f"loop {name} is not running")
        elif row["late"]:
            problems.append(
                f"loop {name} has not finished a round for over {row['interval_seconds']:g} s x 3"
            )
        if row["last_error"] and row["last_error_at"] == row["last_run"]:
            problems.append(f"loop {name} failed its last round: {row['last_error']}")
    for kind, w in watch.items():
        if not w["synced"]:
            problems.append(f"the {kind} are not listed yet")
        if w["error"]:
            problems.append(f"watching {kind} fails: {w['error']}")
        elif w["age_seconds"] is not None and w["age_seconds"] > WATCH_STALE_SECONDS:
            problems.append(
                f"nothing heard from the API server about {kind} for {w['age_seconds']:.0f} s"
            )
    if database["configured"]:
        if not database["read_back"]:
            problems.append(
                "the database is not answering, and nothing is admitted until what it kept is "
                f"read back: {database['problem']}"
            )
        elif database["problem"]:
            problems.append(f"the database: {database['problem']}")
        if database["backlog"] > DATABASE_BACKLOG:
            problems.append(f"{database['backlog']} writes wait for the database")
    if utilization["source"] != "none" and utilization["problem"]:
        problems.append(f"GPU utilization: {utilization['problem']}")
    return {
        "status": "degraded" if problems else "ok",
        "problems": problems,
        "loops": rows,
        "watch": dict(watch),
        "database": dict(database),
        "utilization": dict(utilization),
        "bookings_left_out": dict(bookings_left_out or {}),
        "recuts": [dict(r) for r in recuts],
    }


def service_health(ctx: Any, now: float) -> dict[str, Any]:
    """The service's health now (the API's answer and the health page's): what each part of
    ``ctx`` (the service context) says of itself, through :func:`health_report`."""
    last_poll = ctx.utilization.last_poll
    utilization = {
        "source": ctx.utilization.name,
        "interval_seconds": ctx.utilization.interval,
        "last_poll": views.iso(last_poll) if last_poll is not None else None,
        "last_poll_seconds_ago": None if last_poll is None else round(now - last_poll, 3),
        "problem": ctx.utilization.problem or None,
    }
    return health_report(
        ctx.loops,
        ctx.view.health(now),
        ctx.records.health(),
        utilization,
        now,
        views.iso,
        bookings_left_out=ctx.bookings.book.left_out,
        recuts=ctx.recut.rows(now, views.iso, latest=True) if ctx.recut is not None else (),
        recut_problems=ctx.recut.problems(now) if ctx.recut is not None else (),
    )
