"""Prometheus metrics at ``metrics``, in a registry of the service's own.

Pool and quota gauges are read from the live state when Prometheus scrapes (a collector), so
nothing has to be kept in step with the usage index; admissions are counted as they happen.
With a GPU utilization source (:attr:`Metrics.utilization`), each pool's GPUs actually busy
and the GPUs measured go next to the GPUs in use, so used can be graphed against allocated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ...core.admission.walk import group_subject, user_subject
from ...core.usage.utilization import busy_gpus, measured_gpus
from .. import clock

if TYPE_CHECKING:
    from ..state import ServiceState
    from .polling import Utilization

#: Admission results, the values of the ``result`` label.
RESULTS = ("admitted", "queued", "rejected", "forbidden", "invalid", "error")

# Admissions take well under a millisecond, or seconds when servers are reclaimed.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 60)


class StateCollector(Collector):
    """GPUs per pool (and what they do), quota per subject and pool, and reservations, at
    scrape time."""

    def __init__(
        self,
        state: Callable[[], ServiceState],
        utilization: Callable[[], Utilization | None] = lambda: None,
    ):
        self._state = state
        self._utilization = utilization

    def describe(self) -> list[Metric]:
        return []  # collected on scrape only; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        total = GaugeMetricFamily(
            "gpupool_pool_gpus_total", "GPUs in the pool (GPU-equivalents)", labels=["pool"]
        )
        used = GaugeMetricFamily(
            "gpupool_pool_gpus_used", "GPUs in use (GPU-equivalents)", labels=["pool"]
        )
        free = GaugeMetricFamily(
            "gpupool_pool_gpus_free", "GPUs not in use (GPU-equivalents)", labels=["pool"]
        )
        reserved = GaugeMetricFamily(
            "gpupool_pool_gpus_reserved",
            "Whole GPUs held for admitted servers whose pods have not started",
            labels=["pool"],
        )
        nodes = GaugeMetricFamily("gpupool_pool_nodes", "Nodes in the pool", labels=["pool"])
        rows = state.pool_summaries()
        for row in rows:
            name = row["name"]
            total.add_metric([name], row["gpu_total"])
            used.add_metric([name], row["gpu_used"])
            free.add_metric([name], row["gpu_free"])
            reserved.add_metric([name], row["gpu_reserved"])
            nodes.add_metric([name], row["node_count"])
        yield from (total, used, free, reserved, nodes)
        yield from self._busy(state, [row["name"] for row in rows])

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
                charged.add_metric([pool, subject], float(gpus))
        yield from (guaranteed, limit, charged)

        held = GaugeMetricFamily("gpupool_reservations", "Admissions waiting for their pod")
        held.add_metric([], len(state.reservations))
        yield held

    def _busy(self, state: ServiceState, pools: list[str]) -> Iterator[Metric]:
        """Per pool, the GPUs of running servers with a fresh utilization measurement, and of
        those the GPUs actually busy (GPUs x utilization / 100; left out where none is measured:
        not measured is not idle). Nothing without a utilization source."""
        utilization = self._utilization()
        if utilization is None or utilization.source is None:
            return
        measure = functools.partial(utilization.of, now=clock.now())
        busy = GaugeMetricFamily(
            "gpupool_pool_gpus_busy",
            "GPUs actually busy: the sum of GPUs x utilization / 100 of the measured servers",
            labels=["pool"],
        )
        measured = GaugeMetricFamily(
            "gpupool_pool_gpus_measured",
            "GPUs of running servers with a fresh utilization measurement",
            labels=["pool"],
        )
        for pool in pools:
            servers = state.index.servers(pool)
            measured.add_metric([pool], measured_gpus(servers, measure))
            value = busy_gpus(servers, measure)
            if value is not None:
                busy.add_metric([pool], round(value, 3))
        yield from (busy, measured)


class Metrics:
    """The service's metrics registry and the counters it updates."""

    def __init__(self, state: Callable[[], ServiceState]):
        #: The service's GPU utilization, for the busy and measured gauges (None: left out).
        self.utilization: Utilization | None = None
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
        self.registry.register(StateCollector(state, lambda: self.utilization))
