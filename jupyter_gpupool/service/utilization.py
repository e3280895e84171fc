"""Polling GPU utilization (``c.GPUPoolService.utilization_source``), every
``utilization_interval`` seconds, off the admission path.

- ``dcgm``: NVIDIA's DCGM exporter pages, each ``dcgm_urls`` entry either a path on the
  Kubernetes API server, read with the service's own credentials (a service proxy such as
  ``/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:9400/proxy/metrics``, or the
  simulated cluster's ``/sim/v1/dcgm/metrics``), or a plain ``http(s)://`` URL.
- ``prometheus``: ``prometheus_url``'s query API, with :data:`~..core.utilization.DEFAULT_QUERIES`
  (or ``prometheus_query`` for the mean utilization per pod).

What was measured is kept per server pod with a short history (:class:`Utilization`); a
measurement older than three intervals is stale and shown as none. A source that fails leaves
the last measurements to go stale and says why (:attr:`Utilization.problem`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..core.utilization import (
    DEFAULT_QUERIES,
    PodKey,
    PodUtilization,
    by_pod,
    from_prometheus,
    parse_exporter,
)
from ..http import HTTPSession, NoAnswer, describe
from . import clock

log = logging.getLogger(__name__)

#: Points of history kept per server (two hours at the default 30 s).
HISTORY_POINTS = 240
#: A measurement this many intervals old is stale: not shown, never taken as idle.
STALE_AFTER = 3

Fetch = Callable[[], Awaitable[dict[PodKey, PodUtilization]]]


class SourceError(Exception):
    """A source gave nothing usable this time; the message says why."""


class DCGMSource:
    """Exporter pages, through the API server (paths) or directly (URLs)."""

    def __init__(self, urls: Sequence[str], get_kube_text: Callable[[str], Awaitable[str]]):
        self.urls = list(urls)
        self.get_kube_text = get_kube_text
        self._http: dict[str, HTTPSession] = {}

    async def _text(self, url: str) -> str:
        if url.startswith("/"):
            return await self.get_kube_text(url)
        http = self._http.get(url)
        if http is None:
            http = self._http[url] = HTTPSession(
                url, "", timeout=10, no_answer=lambda why: SourceError(f"{url}: {why}")
            )
        answer = await http.request("GET", "", accept="text/plain")
        if answer.code != 200:
            raise SourceError(f"{url}: HTTP {answer.code} {answer.reason}")
        return answer.body.decode("utf-8", "replace")

    async def fetch(self) -> dict[PodKey, PodUtilization]:
        now = clock.now()
        pages = await asyncio.gather(*(self._text(u) for u in self.urls), return_exceptions=True)
        readings, problems = [], []
        for url, page in zip(self.urls, pages, strict=True):
            if isinstance(page, BaseException):
                problems.append(f"{url}: {getattr(page, 'message', None) or describe(page)}")
                continue
            try:
                # a big page (40,000 GPUs: about a second) is read off the event loop
                readings.extend(await asyncio.to_thread(parse_exporter, page))
            except ValueError as e:
                problems.append(f"{url}: {e}")
        if problems and len(problems) == len(self.urls):
            raise SourceError("; ".join(problems))
        if problems:
            log.warning("GPU utilization: some exporters did not answer: %s", "; ".join(problems))
        return by_pod(readings, now)

    async def close(self) -> None:
        for http in self._http.values():
            await http.close()


class PrometheusSource:
    """Prometheus' ``/api/v1/query`` for the current values."""

    def __init__(self, url: str, util_query: str = ""):
        self.url = url.rstrip("/") + "/"
        self.queries = dict(DEFAULT_QUERIES)
        if util_query:
            # a site's own query for the mean: the others are left out (they may not apply)
            self.queries = {"util": util_query}
        self.http = HTTPSession(
            self.url, "", timeout=10, no_answer=lambda why: SourceError(f"{self.url}: {why}")
        )

    async def _query(self, promql: str) -> Mapping[str, Any]:
        answer = await self.http.request("GET", "api/v1/query", params={"query": promql})
        try:
            data = answer.json()
        except ValueError:
            data = None
        if answer.code != 200 or not isinstance(data, dict):
            why = data.get("error") if isinstance(data, dict) else answer.reason
            raise SourceError(f"{self.url}: {promql!r}: HTTP {answer.code} {why}")
        return data

    async def fetch(self) -> dict[PodKey, PodUtilization]:
        now = clock.now()
        names = list(self.queries)
        answers = await asyncio.gather(*(self._query(self.queries[n]) for n in names))
        try:
            return from_prometheus(dict(zip(names, answers, strict=True)), now)
        except (ValueError, KeyError, TypeError) as e:
            raise SourceError(f"{self.url}: {e}") from None

    async def close(self) -> None:
        await self.http.close()


class Utilization:
    """The latest measurement of each server pod, and its recent history."""

    def __init__(self, source: DCGMSource | PrometheusSource | None, interval: float):
        self.source = source
        self.interval = interval
        self.latest: dict[PodKey, PodUtilization] = {}
        self.history: dict[PodKey, deque[tuple[float, float]]] = {}
        self.problem = "" if source is not None else "no GPU utilization source is configured"
        self.last_poll: float | None = None
        self.polls = 0

    @property
    def name(self) -> str:
        if isinstance(self.source, DCGMSource):
            return "dcgm"
        return "prometheus" if isinstance(self.source, PrometheusSource) else "none"

    def of(self, namespace: str, pod: str, now: float | None = None) -> PodUtilization | None:
        """The pod's measurement, unless it is stale."""
        got = self.latest.get((namespace, pod))
        if got is None:
            return None
        now = clock.now() if now is None else now
        return got if now - got.at <= STALE_AFTER * self.interval else None

    async def poll(self, running: Callable[[], set[PodKey]]) -> None:
        """One measurement of every pod the source reports; ``running()``: the server pods
        that run now (measurements of others are dropped, history of gone ones too)."""
        if self.source is None:
            return
        try:
            measured = await self.source.fetch()
        except (SourceError, NoAnswer) as e:
            if str(e) != self.problem:
                log.warning("GPU utilization not measured: %s", e)
            self.problem = str(e)
            return
        self.problem = ""
        self.polls += 1
        self.last_poll = clock.now()
        alive = running()
        for key in [k for k in self.latest if k not in alive]:
            del self.latest[key]
        for key in [k for k in self.history if k not in alive]:
            del self.history[key]
        for key, value in measured.items():
            if key not in alive:
                continue
            self.latest[key] = value
            self.history.setdefault(key, deque(maxlen=HISTORY_POINTS)).append(
                (value.at, round(value.util, 1))
            )

    def as_json(self, namespace: str, pod: str) -> dict[str, Any]:
        """What the API adds to a server's row: the fields of :class:`PodUtilization` (None
        when not measured or stale) and the recent history ``[[time, percent], ...]``."""
        got = self.of(namespace, pod)
        fields: dict[str, Any] = (
            got.as_json()
            if got is not None
            else {
                "gpus_measured": None,
                "gpu_utilization": None,
                "gpu_utilization_max": None,
                "gpu_memory_used_mib": None,
                "gpu_memory_total_mib": None,
                "measured_at": None,
            }
        )
        fields["gpu_utilization_history"] = [
            list(p) for p in self.history.get((namespace, pod), ())
        ]
        return fields

    async def close(self) -> None:
        if self.source is not None:
            await self.source.close()
