"""Notices: what the service tells a running server's user before it acts on the server.

Every rule that may stop a running server warns first: the idle policy, a pool's or shape's
``max_runtime``, a spent GPU-hour budget, a booking whose window starts (the server borrows its
GPUs). Each warning is a :class:`Notice`: its ``kind``, the words a user reads, and the
``deadline`` (epoch seconds) at which the service acts, ``action`` saying what it does then
(``stop``, or ``report`` to the admins only). ``GET api/v1/servers`` carries each server's
notices (``notices``) and the most urgent of them (``notice``); the pages, ``%gpupool status``
and the JupyterLab status item show that one.

Pure: the rules that make notices live in their own modules; this one only orders them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: The kinds of notice, in the order the docs list them.
KINDS = ("idle", "runtime", "budget", "booking")

STOP, REPORT = "stop", "report"


@dataclass(frozen=True)
class Notice:
    """One warning about a running server: ``kind`` (one of :data:`KINDS`), ``words`` (a
    sentence, no trailing full stop needed), ``deadline`` (when the service acts, epoch seconds;
    None when it has no date), ``action`` (:data:`STOP` or :data:`REPORT`)."""

    kind: str
    words: str
    deadline: float | None = None
    action: str = STOP

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "words": self.words,
            "deadline": self.deadline,
            "action": self.action,
        }


def _urgency(n: Notice) -> tuple[int, float]:
    # a stop before a report, then the earliest deadline; no deadline last
    return (0 if n.action == STOP else 1, n.deadline if n.deadline is not None else float("inf"))


def ordered(notices: Iterable[Notice | None]) -> list[Notice]:
    """The notices (Nones dropped), most urgent first: stops before reports, then by deadline."""
    return sorted((n for n in notices if n is not None), key=_urgency)


def most_urgent(notices: Iterable[Notice | None]) -> Notice | None:
    """The notice a user should read first, or None."""
    found = ordered(notices)
    return found[0] if found else None


def notice_of(row: Any) -> Notice | None:
    """A notice from its JSON (``GET api/v1/servers``' ``notice``), or None when there is none
    or it is not one."""
    if not isinstance(row, dict) or not isinstance(row.get("words"), str):
        return None
    deadline = row.get("deadline")
    return Notice(
        str(row.get("kind") or ""),
        row["words"],
        float(deadline) if isinstance(deadline, (int, float)) else None,
        STOP if row.get("action") == STOP else REPORT,
    )


def countdown(seconds: float) -> str:
    """``4m``, ``1h05m``, ``20s``: the time left, as the status item says it."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m" if m else f"{sec}s"


def notice_line(n: Notice, now: float) -> str:
    """A notice with the time left to its deadline: ``<words> (stops in 4m)``, ``(due in 4m)``
    for a report, ``(stopping)`` once a stop is due."""
    if n.deadline is None:
        return n.words
    if n.deadline <= now:
        return f"{n.words} ({'stopping' if n.action == STOP else 'due now'})"
    verb = "stops" if n.action == STOP else "due"
    return f"{n.words} ({verb} in {countdown(n.deadline - now)})"
