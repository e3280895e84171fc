"""The service's health (``GET api/v1/health``) as a table: what ``gpupool get health`` prints
and the admins' health page shows, row for row.

A row per background loop, per kind of the watch, one for the database writer (when there is a
database) and one for the GPU utilization source (when one is set); each with its state, when it
was last heard from, how often it runs, its rounds and failures, and its problem. The answer's
``problems`` are its sentences (:mod:`jupyter_gpupool.service.health` writes them).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .tables import human_duration

__all__ = ["HEALTH_FIELDS", "health_rows", "problem_sentence"]

#: The columns, in order: (field, heading). The CLI prints the headings in capitals.
HEALTH_FIELDS = (
    ("part", "Part"),
    ("state", "State"),
    ("last", "Last"),
    ("every", "Every"),
    ("runs", "Runs"),
    ("failures", "Failures"),
    ("problem", "Problem"),
)


def _seconds_ago(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return f"{human_duration(value)} ago"


def _every(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return human_duration(value)


def health_rows(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The table of ``answer`` (``GET api/v1/health``'s JSON)."""
    rows = []
    for loop in answer.get("loops") or ():
        state = "late" if loop.get("late") else "running" if loop.get("running") else "stopped"
        rows.append(
            {
                "part": f"loop {loop['name']}",
                "state": state,
                "last": _seconds_ago(loop.get("last_run_seconds_ago")),
                "every": _every(loop.get("interval_seconds")),
                "runs": loop.get("runs"),
                "failures": loop.get("failures"),
                "problem": loop.get("last_error") or "",
            }
        )
    for kind, w in (answer.get("watch") or {}).items():
        rows.append(
            {
                "part": f"watch {kind}",
                "state": w.get("phase"),
                "last": _seconds_ago(w.get("age_seconds")),
                "every": "-",
                "runs": "-",
                "failures": "-",
                "problem": w.get("error") or "",
            }
        )
    db = answer.get("database") or {}
    if db.get("configured"):
        rows.append(
            {
                "part": "database",
                "state": "writing" if db.get("writing") else "not writing",
                "last": f"backlog {db.get('backlog', 0)}",
                "every": "-",
                "runs": db.get("written"),
                "failures": db.get("dropped"),
                "problem": db.get("problem") or "",
            }
        )
    util = answer.get("utilization") or {}
    if util.get("source") not in (None, "none"):
        rows.append(
            {
                "part": f"utilization {util['source']}",
                "state": "failing" if util.get("problem") else "polling",
                "last": _seconds_ago(util.get("last_poll_seconds_ago")),
                "every": _every(util.get("interval_seconds")),
                "runs": "-",
                "failures": "-",
                "problem": util.get("problem") or "",
            }
        )
    for r in answer.get("recuts") or ():
        rows.append(
            {
                "part": f"re-cut {r['node']}",
                "state": r.get("state"),
                "last": r.get("asked_at") or "-",
                "every": "-",
                "runs": "-",
                "failures": "-",
                "problem": r.get("words") if r.get("state") == "failed" else "",
            }
        )
    return rows


def problem_sentence(problem: str) -> str:
    """A problem of the answer as a sentence: its first letter a capital, a full stop at its end
    ("Loop admission.sweep is not running.")."""
    text = problem.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."
