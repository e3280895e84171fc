"""Polling GPU utilization (``c.GPUPoolService.utilization_source``), every
``utilization_interval`` seconds, off the admission path.

- ``dcgm``: NVIDIA's DCGM exporter pages, each ``dcgm_urls`` entry either a path on the
  Kubernetes API server, read with the service's own credentials (a service proxy such as
  ``/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:9400/proxy/metrics``, or the
  simulated cluster's ``/sim/v1/dcgm/metrics``), or a plain ``http(s)://`` URL; and, with
  ``dcgm_pod_selector``, every running exporter pod it matches (listed again at each poll, in
  ``dcgm_namespace``), read through the API server's pod proxy
  (``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/metrics``).
- ``prometheus``: ``prometheus_url``'s query API, with :data:`~..core.usage.utilization.DEFAULT_QUERIES`
  (or ``prometheus_query`` for the mean utilization per pod).

Which field is read for which shape (whole GPU, MIG instance, shared GPU) is
:mod:`~..core.usage.utilization`'s rule.

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

from ...core.usage.utilization import (
    DEFAULT_QUERIES,
    GPUReading,
    PodKey,
    PodUtilization,
    by_pod,
    from_prometheus,
    parse_exporter,
)
from ...http import HTTPSession, NoAnswer, describe
from .. import clock
from ..cluster.kube import KubeError
from ..loops import Loop

log = logging.getLogger(__name__)

#: Points of history kept per server (two hours at the default 30 s).
HISTORY_POINTS = 240
#: A measurement this many intervals old is stale: not shown, never taken as idle.
STALE_AFTER = 3

Fetch = Callable[[], Awaitable[dict[PodKey, PodUtilization]]]
#: ``list_pods(namespace, label_selector)`` ("" namespace: every one): the pods as JSON.
ListPods = Callable[[str, str], Awaitable[list[dict[str, Any]]]]
#: At most this many failed exporters are named in a problem (the rest are counted).
PROBLEMS_NAMED = 5


class SourceError(Exception):
    """A source gave nothing usable this time; the message says why."""


def _why(error: BaseException) -> str:
    """A failed read in words: the API server's message (with its status), or why there was
    no answer."""
    if isinstance(error, KubeError):
        return f"HTTP {error.status} {error.message}" if error.status else error.message
    return getattr(error, "message", None) or describe(error)


def pod_proxy_path(namespace: str, name: str, port: int, path: str = "metrics") -> str:
    """The API server's proxy to a pod's port: ``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/…``."""
    return f"/api/v1/namespaces/{namespace}/pods/{name}:{port}/proxy/{path}"


def _once_each(readings: list[GPUReading]) -> list[GPUReading]:
    """One reading per series (node, GPU index, MIG instance, pod, replica), the first: a node
    read twice (a URL and its exporter pod) does not count its GPUs twice."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for r in readings:
        if r.node:
            if r.key in seen:
                continue
            seen.add(r.key)
        out.append(r)
    return out


class DCGMSource:
    """Exporter pages, through the API server (paths, and the exporter's pods found by
    ``pod_selector``) or directly (URLs)."""

    def __init__(
        self,
        urls: Sequence[str],
        get_kube_text: Callable[[str], Awaitable[str]],
        *,
        pod_selector: str = "",
        namespace: str = "",
        port: int = 9400,
        list_pods: ListPods | None = None,
    ):
        if pod_selector and list_pods is None:
            raise ValueError("a pod selector needs list_pods")
        self.urls = list(urls)
        self.get_kube_text = get_kube_text
        self.pod_selector = pod_selector
        self.namespace = namespace
        self.port = port
        self.list_pods = list_pods
        #: The exporter pods the last poll read: ``(namespace, name, node)``.
        self.exporters: list[tuple[str, str, str]] = []
        self._http: dict[str, HTTPSession] = {}

    @property
    def _selection(self) -> str:
        where = f"in {self.namespace}" if self.namespace else "in any namespace"
        return f"{self.pod_selector} {where}"

    async def _discover(self) -> tuple[list[tuple[str, str]], str]:
        """``(what, path)`` of every running exporter pod the selector matches, and the problem
        when there is none. SourceError when the pods cannot be listed."""
        assert self.list_pods is not None
        try:
            pods = await self.list_pods(self.namespace, self.pod_selector)
        except (KubeError, NoAnswer) as e:
            raise SourceError(
                f"cannot list the DCGM exporter's pods ({self._selection}): {_why(e)}"
            ) from None
        found: list[tuple[str, str, str]] = []
        for pod in pods:
            md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            node = spec.get("nodeName")
            if node and (pod.get("status") or {}).get("phase") == "Running":
                found.append((md.get("namespace") or "", md.get("name") or "", node))
        found.sort(key=lambda p: (p[2], p[0], p[1]))
        if found != self.exporters:
            nodes = ", ".join(node for _, _, node in found) or "none"
            log.info("DCGM exporter pods (%s): %d, on %s", self._selection, len(found), nodes)
        self.exporters = found
        problem = ""
        if not pods:
            problem = f"no pods match {self._selection}"
        elif not found:
            matches = "1 pod matches" if len(pods) == 1 else f"{len(pods)} pods match"
            problem = f"{matches} {self._selection}, but none is running on a node"
        targets = [
            (f"pod {ns}/{name} on {node}", pod_proxy_path(ns, name, self.port))
            for ns, name, node in found
        ]
        return targets, problem

    async def _text(self, url: str) -> str:
        if url.startswith("/"):
            return await self.get_kube_text(url)
        http = self._http.get(url)
        if http is None:
            http = self._http[url] = HTTPSession(url, "", timeout=10, no_answer=SourceError)
        answer = await http.request("GET", "", accept="text/plain")
        if answer.code != 200:
            raise SourceError(f"HTTP {answer.code} {answer.reason}")
        return answer.body.decode("utf-8", "replace")

    async def fetch(self) -> dict[PodKey, PodUtilization]:
        """Every exporter's page, merged per pod. Some exporters failing: a warning; all of
        them (or no exporter pod to read, or no list of them): SourceError saying why."""
        now = clock.now()
        targets = [(url, url) for url in self.urls]
        problems: list[str] = []
        if self.pod_selector:
            try:
                pods, problem = await self._discover()
            except SourceError as e:
                if not targets:
                    raise
                pods, problem = [], str(e)
            targets += pods
            if problem:
                problems.append(problem)
        pages = await asyncio.gather(*(self._text(t) for _, t in targets), return_exceptions=True)
        readings: list[GPUReading] = []
        read = 0
        for (what, _), page in zip(targets, pages, strict=True):
            if isinstance(page, BaseException):
                problems.append(f"{what}: {_why(page)}")
                continue
            try:
                # a big page (40,000 GPUs: about a second) is read off the event loop
                readings.extend(await asyncio.to_thread(parse_exporter, page))
                read += 1
            except ValueError as e:
                problems.append(f"{what}: {e}")
        if problems:
            said = "; ".join(problems[:PROBLEMS_NAMED])
            if len(problems) > PROBLEMS_NAMED:
                said += f"; and {len(problems) - PROBLEMS_NAMED} more"
            if not read:
                raise SourceError(said)
            log.warning("GPU utilization: some exporters did not answer: %s", said)
        return by_pod(_once_each(readings), now)

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
        #: The server pods that run now, and who judges each poll (the idle watch): set by the
        #: service when it starts
        self.running: Callable[[], set[PodKey]] = set
        self.after_poll: Callable[[float], Awaitable[Any]] | None = None
        #: Its polls, every ``interval`` seconds (started only with a source)
        self.loop = Loop("monitoring.utilization", interval, self._round)

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

    async def _round(self) -> None:
        polls = self.polls
        await self.poll(self.running)
        if self.after_poll is None:
            return
        # judged as of the poll's readings, taken when it began: a fetch that took long has not
        # made its own readings stale (after a failed poll, as of now: what is old is stale,
        # and no data is not idle)
        last = self.last_poll
        await self.after_poll(last if self.polls > polls and last is not None else clock.now())

    async def poll(self, running: Callable[[], set[PodKey]]) -> None:
        """One measurement of every pod the source reports; ``running()``: the server pods
        that run now (measurements of others are dropped, history of gone ones too)."""
        if self.source is None:
            return
        began = clock.now()  # the sources stamp their readings as of the fetch's start
        try:
            measured = await self.source.fetch()
        except (SourceError, NoAnswer) as e:
            if str(e) != self.problem:
                log.warning("GPU utilization not measured: %s", e)
            self.problem = str(e)
            return
        self.problem = ""
        self.polls += 1
        self.last_poll = began
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
                "gpu_utilization_shared": None,
                "gpu_utilization_field": None,
            }
        )
        fields["gpu_utilization_history"] = [
            list(p) for p in self.history.get((namespace, pod), ())
        ]
        return fields

    async def close(self) -> None:
        if self.source is not None:
            await self.source.close()
