"""Prometheus metrics at ``metrics``, in a registry of the service's own.

Pool and quota gauges are read from the live state when Prometheus scrapes (a collector), so
nothing has to be kept in step with the usage index; admissions are counted as they happen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..core.admission import group_subject, user_subject

if TYPE_CHECKING:
    from .state import ServiceState

#: Admission results, the values of the ``result`` label.
RESULTS = ("admitted", "rejected", "forbidden", "invalid", "error")

# Admissions take well under a millisecond, or seconds when servers are reclaimed.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 60)


class StateCollector(Collector):
    """GPUs per pool, quota per subject and pool, and reservations, at scrape time."""

    def __init__(self, state: Callable[[], ServiceState]):
        self._state = state

    def describe(self) -> list[Metric]:
        return []  # collected on scrape only; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        total = GaugeMetricFamily("gpupool_pool_gpus_total", "GPUs in the pool", labels=["pool"])
        used = GaugeMetricFamily("gpupool_pool_gpus_used", "GPUs in use", labels=["pool"])
        free = GaugeMetricFamily("gpupool_pool_gpus_free", "GPUs not in use", labels=["pool"])
        reserved = GaugeMetricFamily(
            "gpupool_pool_gpus_reserved",
            "GPUs held for admitted servers whose pods have not started",
            labels=["pool"],
        )
        nodes = GaugeMetricFamily("gpupool_pool_nodes", "Nodes in the pool", labels=["pool"])
        for row in state.pool_summaries():
            name = row["name"]
            total.add_metric([name], row["gpu_total"])
            used.add_metric([name], row["gpu_used"])
            free.add_metric([name], row["gpu_free"])
            reserved.add_metric([name], row["gpu_reserved"])
            nodes.add_metric([name], row["node_count"])
        yield from (total, used, free, reserved, nodes)

        labels = ["pool", "subject"]
        guaranteed = GaugeMetricFamily(
            "gpupool_quota_guaranteed_gpus", "GPUs guaranteed to a group or user", labels=labels
        )
        limit = GaugeMetricFamily(
            "gpupool_quota_limit_gpus",
            "Hard cap of a group or user, borrowing included",
            labels=labels,
        )
        charged = GaugeMetricFamily(
            "gpupool_quota_used_gpus", "GPUs charged to a group or user", labels=labels
        )
        registry, index = state.registry, state.index
        for pool, q in registry.pool_quotas.items():
            entries = [(group_subject(g), e) for g, e in q.groups.items()]
            entries += [(user_subject(u), e) for u, e in q.users.items()]
            for subject, e in entries:
                guaranteed.add_metric([pool, subject], e.guaranteed)
                if e.limit is not None:
                    limit.add_metric([pool, subject], e.limit)
            for subject, gpus in index.usage_by_subject(pool).items():
                charged.add_metric([pool, subject], gpus)
        yield from (guaranteed, limit, charged)

        held = GaugeMetricFamily("gpupool_reservations", "Admissions waiting for their pod")
        held.add_metric([], len(state.reservations))
        yield held


class Metrics:
    """The service's metrics registry and the counters it updates."""

    def __init__(self, state: Callable[[], ServiceState]):
        self.registry = CollectorRegistry(auto_describe=False)
        self.admissions = Counter(
            "gpupool_admissions",
            "Admission requests by result",
            ["result"],
            registry=self.registry,
        )
        for result in RESULTS:
            self.admissions.labels(result)  # every series exists from the start
        self.latency = Histogram(
            "gpupool_admission_duration_seconds",
            "Time to answer an admission request",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.expired = Counter(
            "gpupool_reservations_expired",
            "Reservations dropped because their pod never appeared",
            registry=self.registry,
        )
        self.reclaimed = Counter(
            "gpupool_reclaimed_servers",
            "Over-quota servers stopped to give guaranteed GPUs back",
            registry=self.registry,
        )
        self.registry.register(StateCollector(state))
