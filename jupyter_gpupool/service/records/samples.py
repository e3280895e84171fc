"""GPU usage over time, sampled in memory for the pools page's chart.

Every ``interval`` seconds the service records, per pool, the GPUs in use and in total, and keeps
the last ``hours``. Kubernetes is the record of usage, not this: the history starts empty when
the service starts, and is only there so that admins see the last hours at a glance.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sample:
    time: float
    used: float  # GPU-equivalents, as the pool rows count them
    total: float


class UsageHistory:
    """Per-pool series of :class:`Sample`, at most ``hours`` long."""

    def __init__(self, interval: float = 60.0, hours: float = 6.0):
        self.interval = interval
        self.hours = hours
        self.maxlen = max(2, int(hours * 3600 / interval) + 1)
        self._series: dict[str, deque[Sample]] = {}
        self._last = float("-inf")

    def due(self, now: float) -> bool:
        return now - self._last >= self.interval * 0.99

    def sample(self, now: float, pools: Iterable[Mapping[str, Any]]) -> None:
        """Record the ``gpu_used`` and ``gpu_total`` of each row of ``GET api/v1/pools``."""
        self._last = now
        seen = set()
        for row in pools:
            name = row["name"]
            seen.add(name)
            series = self._series.get(name)
            if series is None:
                series = self._series[name] = deque(maxlen=self.maxlen)
            series.append(Sample(now, float(row["gpu_used"]), float(row["gpu_total"])))
        # a pool that is gone keeps its past until it ages out
        cutoff = now - self.hours * 3600
        for name in [n for n in self._series if n not in seen]:
            series = self._series[name]
            while series and series[0].time < cutoff:
                series.popleft()
            if not series:
                del self._series[name]

    def series(self) -> dict[str, list[Sample]]:
        return {name: list(s) for name, s in self._series.items()}

    def to_json(self) -> dict[str, Any]:
        """``GET api/v1/usage/history``: ``{"interval", "hours", "pools": {name: [[t, used,
        total], ...]}}``, times in seconds since the epoch."""
        return {
            "interval": self.interval,
            "hours": self.hours,
            "pools": {
                name: [[s.time, s.used, s.total] for s in series]
                for name, series in self._series.items()
            },
        }
