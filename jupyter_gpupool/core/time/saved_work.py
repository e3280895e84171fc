"""Work saved before a stop: the user's open JupyterLab saves their documents when a
stop's deadline is near, and says what it saved (``POST api/v1/servers/saved``, through the
server's jupyter-server extension). The ledger keeps it on the server's session (``saved``, the
count; ``saved_at``; ``saved_paths``), so that the stop says ``3 notebooks saved before the
stop``, and a stop by the service with no report ``no lab open: nothing to save``.

Pure: the report checked (:func:`parse_report`) and the words (:func:`saved_words`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..accounting import ledger

#: How a session ends when the service stopped it (a user's own stop is not announced).
SERVICE_STOPS = (ledger.CULLED, ledger.RECLAIMED, ledger.LIMIT, ledger.OVER_BUDGET)
#: At most this many paths are kept per report (the count is kept whole).
MAX_PATHS = 100
#: A path longer than this is refused (no lab sends one).
MAX_PATH_LENGTH = 4096

NO_LAB = "no lab open: nothing to save"


@dataclass(frozen=True)
class SavedReport:
    """What a lab saved before a stop: ``server`` (its name, ``""`` for the default one),
    ``count`` documents, their ``paths``, for the notice of ``kind``; ``user`` when an admin
    records it for someone (None: the caller)."""

    server: str
    count: int
    paths: tuple[str, ...]
    kind: str | None = None
    user: str | None = None

    def paths_json(self) -> str:
        return json.dumps(list(self.paths[:MAX_PATHS]))


def parse_report(body: Any) -> SavedReport:
    """A ``POST api/v1/servers/saved`` body: ``{"server": "", "count": 3, "paths": [...],
    "notice": {"kind": "idle", ...}, "user": "alice"}`` (``user`` optional, ``paths`` optional,
    at most ``count``). ValueError says what is wrong."""
    if not isinstance(body, Mapping):
        raise ValueError('the body is a JSON object: {"server": NAME, "count": N, "paths": [...]}')
    unknown = sorted(set(body) - {"server", "count", "paths", "notice", "user"})
    if unknown:
        raise ValueError(f"unknown fields: {', '.join(unknown)}")
    server = body.get("server", "")
    if not isinstance(server, str):
        raise ValueError(f"server is a server's name ('' for the default one), not {server!r}")
    count = body.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 10**6:
        raise ValueError(f"count is the number of documents saved, a whole number, not {count!r}")
    paths = body.get("paths", [])
    if not isinstance(paths, list) or not all(
        isinstance(p, str) and 0 < len(p) <= MAX_PATH_LENGTH for p in paths
    ):
        raise ValueError("paths is a list of the saved documents' paths")
    if len(paths) > count:
        raise ValueError(f"{len(paths)} paths for {count} documents saved")
    notice = body.get("notice")
    if notice is not None and not isinstance(notice, Mapping):
        raise ValueError('notice is the notice the documents were saved for: {"kind": ...}')
    kind = notice.get("kind") if notice is not None else None
    user = body.get("user")
    if user is not None and (not isinstance(user, str) or not user):
        raise ValueError(f"user is a user's name, not {user!r}")
    return SavedReport(server, count, tuple(paths), str(kind) if kind else None, user)


def documents_words(count: int, paths: Sequence[str]) -> str:
    """``1 notebook``, ``3 notebooks``, ``2 documents`` (not all notebooks, or unknown)."""
    notebooks = bool(paths) and len(paths) == count and all(p.endswith(".ipynb") for p in paths)
    what = "notebook" if notebooks else "document"
    return f"{count} {what}{'' if count == 1 else 's'}"


def saved_words(session: Mapping[str, Any]) -> str:
    """What a stopped session says of the work in its lab: ``3 notebooks saved before the
    stop``, ``the lab had nothing unsaved``, ``no lab open: nothing to save`` (a stop by the
    service that no lab reported); ``""`` when there is nothing to say (a user's own stop, or a
    session still running that no lab reported)."""
    saved = session.get("saved")
    if saved is not None:
        if int(saved) == 0:
            return "the open lab had nothing unsaved"
        return f"{documents_words(int(saved), stored_paths(session))} saved before the stop"
    if session.get("stopped") is not None and session.get("ended") in SERVICE_STOPS:
        return NO_LAB
    return ""


def stored_paths(session: Mapping[str, Any]) -> list[str]:
    """The paths a session keeps (``saved_paths``, JSON), or none."""
    try:
        paths = json.loads(session.get("saved_paths") or "[]")
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


#: How a session ended, as *My GPUs* says it.
ENDED_WORDS = {
    ledger.STOPPED: "stopped (by you, an admin, or unseen)",
    ledger.CULLED: "stopped by the service: its GPUs stayed idle",
    ledger.RECLAIMED: "stopped by the service: its borrowed GPUs were reclaimed",
    ledger.LIMIT: "stopped by the service: it ran longer than its limit",
    ledger.OVER_BUDGET: "stopped by the service: its GPU-hour budget was spent",
    ledger.FAILED: "failed",
}


def stop_row(session: Mapping[str, Any]) -> dict[str, Any]:
    """A stopped session as a row of *My GPUs*' recent stops: its server, pool, when it
    stopped, how (:data:`ENDED_WORDS`) and what its lab saved (:func:`saved_words`)."""
    ended = str(session.get("ended") or "")
    return {
        "key": session.get("pod_uid"),
        "server": session.get("server") or "",
        "pool": session.get("pool"),
        "stopped": session.get("stopped"),
        "ended": ended,
        "how": ENDED_WORDS.get(ended, ended),
        "saved": session.get("saved"),
        "saved_words": saved_words(session),
        "paths": stored_paths(session),
    }
