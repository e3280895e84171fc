"""Usage history: samples averaged by the hour, and the ranges the history answers for.

Pure: the service's database stores the samples (:mod:`jupyter_gpupool.db`); these functions
only compute over rows handed to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FIGURES = ("gpu_total", "gpu_used", "gpu_over_quota", "gpu_pending")
#: ``range`` values of ``GET api/v1/usage/history``, in seconds.
RANGES = {"6h": 6 * 3600, "24h": 24 * 3600, "7d": 7 * 86400, "30d": 30 * 86400}


def hourly_averages(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Samples (``time``, ``pool`` and :data:`FIGURES`) averaged per pool and hour; each result
    is timed at the start of its hour. Sorted by time, then pool."""
    buckets: dict[tuple[float, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        hour = float(int(r["time"] // 3600) * 3600)
        buckets.setdefault((hour, str(r["pool"])), []).append(r)
    out = []
    for (hour, pool), group in sorted(buckets.items()):
        avg = {f: sum(float(g[f]) for g in group) / len(group) for f in FIGURES}
        out.append({"time": hour, "pool": pool, **avg})
    return out


def parse_range(text: str | None, default: str = "6h") -> int:
    """Seconds of a history ``range`` (6h, 24h, 7d, 30d); ValueError names the choices."""
    key = text or default
    if key not in RANGES:
        raise ValueError(f"range must be one of {', '.join(RANGES)}, not {key!r}")
    return RANGES[key]
