"""Where a launched server went, in the service's words: the hub says only that it is ready,
the service knows the pool its pod runs in and whether it is over quota (may be reclaimed).

Used by ``%gpupool launch --wait`` and by the LaunchPanel once a launch is ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..session import SESSION_ERRORS, UserSession


def where_words(row: Mapping[str, Any] | None) -> str:
    """Where a server runs, from its row of the service's ``servers`` answer:
    ``in inference-pool, over quota: may be reclaimed``, ``in training-pool, within quota``,
    ``in compute-pool (CPU only)``; empty without a row or a pool."""
    if not row or not row.get("pool"):
        return ""
    where = f"in {row['pool']}"
    # ``gpus`` counts nvidia.com/gpu alone: a MIG instance's server has 0 of them and 1 unit
    if not (row.get("units") or row.get("gpus")):
        return f"{where} (CPU only)"
    if row.get("over_quota"):
        return f"{where}, over quota: may be reclaimed"
    return f"{where}, within quota"


def server_row(rows: Sequence[Mapping[str, Any]], server: str) -> Mapping[str, Any] | None:
    """The row of the user's server named ``server`` among the service's rows."""
    return next((r for r in rows if str(r.get("server") or "") == server), None)


async def ask_where(session: UserSession, server: str) -> str:
    """:func:`where_words` of ``server`` as the service counts it now; empty when the service
    cannot be asked or counts no pod of it (the launch itself went well: no error for that)."""
    try:
        rows = await session.pod_servers()
    except SESSION_ERRORS:
        return ""
    return where_words(server_row(rows, server))
