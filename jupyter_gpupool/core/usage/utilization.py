"""GPU utilization: what NVIDIA's DCGM exporter (or Prometheus, which scrapes it) says each
server's GPUs are doing.

The exporter writes one series per GPU in Prometheus' text format: ``DCGM_FI_DEV_GPU_UTIL``
(percent), ``DCGM_FI_DEV_FB_USED`` and ``DCGM_FI_DEV_FB_FREE`` (MiB of the GPU's memory), with
``Hostname`` and ``gpu`` naming the GPU and, for a GPU a pod holds, ``namespace``, ``pod`` and
``container``. :func:`parse_exporter` reads that text (those metrics only), :func:`from_prometheus` the answers of
Prometheus' query API, and both give :class:`PodUtilization` per ``(namespace, pod)``.

Which field is read, by shape:

- **A whole GPU**: ``DCGM_FI_DEV_GPU_UTIL``; a series without it but with
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (an exporter set up with profiling fields only) is read from
  that ratio x 100.
- **A MIG instance** (a series with ``GPU_I_PROFILE`` and ``GPU_I_ID``): DCGM does not report
  ``DCGM_FI_DEV_GPU_UTIL`` for MIG instances (some exporters write it as 0), so its activity is
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a ratio 0..1) x 100, and only that; its memory is the
  instance's own ``DCGM_FI_DEV_FB_*``. A pod's reading of its instance's parent GPU, if the
  exporter gives one, is left out beside it.
- **A shared GPU** (time-slicing, MPS): the exporter gives the GPU's series to the pods using it
  (one copy per container with a ``vgpu`` label under its ``KUBERNETES_VIRTUAL_GPUS`` setting;
  without it, to one of them only). Each of those pods reads the whole GPU's figure, marked
  :attr:`PodUtilization.shared`: a series with ``vgpu``, or a GPU whose series name more than
  one pod. Its own share of the GPU cannot be told apart.

Pure: text and JSON in, values out; the service polls (``jupyter_gpupool.service.monitoring.polling``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .rows import ServerUsage

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
#: A MIG instance's activity (and a GPU's, on exporters with profiling fields): a ratio 0..1
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

#: Prometheus' default queries: per pod, the mean utilization of its GPUs, their memory used
#: and free (MiB). ``max`` for the idle policy: a server is idle when all its GPUs are.
DEFAULT_QUERIES = {
    "util": f"avg by (namespace, pod) ({UTIL})",
    "util_max": f"max by (namespace, pod) ({UTIL})",
    "mem_used": f"sum by (namespace, pod) ({FB_USED})",
    "mem_free": f"sum by (namespace, pod) ({FB_FREE})",
    # MIG instances: their activity ratio as percent (taken over "util" for the pods that have it)
    "mig_util": f'avg by (namespace, pod) ({ENGINE_ACTIVE}{{GPU_I_ID!=""}}) * 100',
    "mig_util_max": f'max by (namespace, pod) ({ENGINE_ACTIVE}{{GPU_I_ID!=""}}) * 100',
    # the pods on a shared GPU: a vgpu label, or a whole GPU whose series name several pods
    "shared": (
        f'count by (namespace, pod) ({UTIL}{{vgpu!=""}} or ({UTIL}{{pod!="",GPU_I_ID=""}}'
        f' and on (Hostname, gpu) (count by (Hostname, gpu) ({UTIL}{{pod!="",GPU_I_ID=""}}) > 1)))'
    ),
}

PodKey = tuple[str, str]  # (namespace, pod)


@dataclass(frozen=True)
class GPUReading:
    """One series of the exporter: a GPU, a MIG instance of it (``instance``: its
    ``GPU_I_ID``), or a shared GPU's copy for one pod (``vgpu``)."""

    node: str
    gpu: str
    namespace: str = ""
    pod: str = ""
    util: float | None = None
    mem_used: float | None = None
    mem_free: float | None = None
    instance: str = ""
    profile: str = ""
    vgpu: str = ""
    engine_active: float | None = None

    @property
    def device(self) -> tuple[str, str, str]:
        """The device measured: node, GPU index, MIG instance ("" for the whole GPU)."""
        return (self.node, self.gpu, self.instance)

    @property
    def key(self) -> tuple[str, ...]:
        """The series: its device and the pod (and replica) it is attributed to."""
        return (self.node, self.gpu, self.instance, self.namespace, self.pod, self.vgpu)

    @property
    def activity(self) -> float | None:
        """Percent busy, from the field its shape reports (the module docstring)."""
        if self.instance:
            return None if self.engine_active is None else self.engine_active * 100.0
        if self.util is not None:
            return self.util
        return None if self.engine_active is None else self.engine_active * 100.0


@dataclass(frozen=True)
class PodUtilization:
    """A pod's GPUs at ``at``: mean and highest utilization (%), memory used and total (MiB).
    ``shared``: the figure is a shared GPU's, for all the servers on it; ``mig``: it is of MIG
    instances (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``)."""

    gpus: int
    util: float
    util_max: float
    mem_used: float | None
    mem_total: float | None
    at: float
    shared: bool = False
    mig: bool = False

    @property
    def field(self) -> str:
        """The DCGM field the utilization was read from."""
        return ENGINE_ACTIVE if self.mig else UTIL

    def as_json(self) -> dict[str, Any]:
        return {
            "gpu_utilization_shared": self.shared,
            "gpu_utilization_field": self.field,
            "gpus_measured": self.gpus,
            "gpu_utilization": round(self.util, 1),
            "gpu_utilization_max": round(self.util_max, 1),
            "gpu_memory_used_mib": None if self.mem_used is None else round(self.mem_used),
            "gpu_memory_total_mib": None if self.mem_total is None else round(self.mem_total),
            "measured_at": self.at,
        }


#: One sample line of the exporter: ``NAME{LABELS} VALUE [TIMESTAMP]``.
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+\S+)?[ \t]*$")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_FIELDS = {
    UTIL: "util",
    FB_USED: "mem_used",
    FB_FREE: "mem_free",
    ENGINE_ACTIVE: "engine_active",
}


def _labels(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None
        value = m.group(2)
        if "\\" in value:
            value = re.sub(r"\\[\\\"n]", lambda e: _ESCAPES[e.group(0)], value)
        out[m.group(1)] = value
        pos = m.end()
    return out


def parse_exporter(text: str) -> list[GPUReading]:
    """The GPUs of one exporter's page; ValueError when it is not Prometheus' text format.

    Only the metrics used are read, line by line: a page of 40,000 GPUs (5,000 nodes)
    takes about 1.2 s this way, where prometheus_client's general parser, which reads every
    metric, takes 4.4 s (``benchmarks/bench_utilization.py``); the tests check both agree.
    """
    gpus: dict[tuple[str, ...], dict[str, Any]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ValueError(f"not Prometheus' text format: line {number}: {line[:80]!r}")
        field = _FIELDS.get(m.group(1))
        if field is None:
            continue
        labels = _labels(m.group(2) or "")
        try:
            value = float(m.group(3))
        except ValueError:
            labels = None
        if labels is None:
            raise ValueError(f"not Prometheus' text format: line {number}: {line[:80]!r}")
        get = labels.get
        key = (
            get("Hostname", ""),
            get("gpu", ""),
            get("GPU_I_ID", ""),
            get("namespace", ""),
            get("pod", ""),
            get("vgpu", ""),
        )
        gpu = gpus.get(key)
        if gpu is None:
            gpu = gpus[key] = {
                "node": key[0],
                "gpu": key[1],
                "instance": key[2],
                "namespace": key[3],
                "pod": key[4],
                "vgpu": key[5],
                "profile": get("GPU_I_PROFILE", ""),
            }
        gpu[field] = value
    return [GPUReading(**g) for g in gpus.values()]


def by_pod(readings: Iterable[GPUReading], at: float) -> dict[PodKey, PodUtilization]:
    """The readings of devices held by pods, per pod (those without a utilization are left
    out; a pod's reading of a GPU it holds a MIG instance of too is left out beside it)."""
    readings = [r for r in readings if r.pod and r.activity is not None]
    pods_on: dict[tuple[str, str, str], set[PodKey]] = {}
    for r in readings:
        pods_on.setdefault(r.device, set()).add((r.namespace, r.pod))
    mine: dict[PodKey, list[GPUReading]] = {}
    for r in readings:
        mine.setdefault((r.namespace, r.pod), []).append(r)
    out = {}
    for key, gpus in mine.items():
        cut = {(g.node, g.gpu) for g in gpus if g.instance}
        if cut:
            gpus = [g for g in gpus if g.instance or (g.node, g.gpu) not in cut]
        utils = [float(g.activity) for g in gpus if g.activity is not None]
        used = [g.mem_used for g in gpus if g.mem_used is not None]
        free = [g.mem_free for g in gpus if g.mem_free is not None]
        out[key] = PodUtilization(
            gpus=len(gpus),
            util=sum(utils) / len(utils),
            util_max=max(utils),
            mem_used=sum(used) if used else None,
            mem_total=sum(used) + sum(free) if used and len(free) == len(used) else None,
            at=at,
            shared=any(not g.instance and (g.vgpu or len(pods_on[g.device]) > 1) for g in gpus),
            mig=bool(cut),
        )
    return out


def _vector(answer: Mapping[str, Any]) -> dict[PodKey, float]:
    """``{(namespace, pod): value}`` of one ``/api/v1/query`` answer (a vector)."""
    data = answer.get("data") or {}
    if answer.get("status") != "success" or data.get("resultType") != "vector":
        raise ValueError(f"not a vector answer: {answer.get('error') or data.get('resultType')}")
    out = {}
    for item in data.get("result") or ():
        metric = item.get("metric") or {}
        if metric.get("pod"):
            out[(str(metric.get("namespace", "")), str(metric["pod"]))] = float(item["value"][1])
    return out


def from_prometheus(
    answers: Mapping[str, Mapping[str, Any]], at: float
) -> dict[PodKey, PodUtilization]:
    """Per pod, from the answers to :data:`DEFAULT_QUERIES` (or queries of the same shapes;
    ``util`` is required, the others may be missing). A pod in ``mig_util`` is read from it
    (its MIG instances), whatever ``util`` says of it."""

    def vector(name: str) -> dict[PodKey, float]:
        return _vector(answers[name]) if name in answers else {}

    util = _vector(answers["util"])
    util_max = vector("util_max")
    mig, mig_max = vector("mig_util"), vector("mig_util_max")
    used, free, shared = vector("mem_used"), vector("mem_free"), vector("shared")
    out = {}
    for key in {**util, **mig}:
        if key in mig:
            value, most = mig[key], mig_max.get(key, mig[key])
        else:
            value, most = util[key], util_max.get(key, util[key])
        mem_used = used.get(key)
        out[key] = PodUtilization(
            gpus=0,  # Prometheus' answer is per pod: how many GPUs it averaged is not said
            util=value,
            util_max=most,
            mem_used=mem_used,
            mem_total=mem_used + free[key] if mem_used is not None and key in free else None,
            at=at,
            shared=key not in mig and shared.get(key, 0) > 0,
            mig=key in mig,
        )
    return out


# --- what a pool's GPUs do: used against allocated ---------------------------------------------


def _measured(
    servers: Iterable[ServerUsage], measure: Callable[[str, str], PodUtilization | None]
) -> list[tuple[int, float]]:
    """``(GPUs, mean utilization %)`` of each running server ``measure`` has a value for.

    GPUs are the usage index's (``nvidia.com/gpu``), as the pools' "in use" counts them: a
    time-sliced server's replica is one, read at its shared GPU's figure, so that the busy
    share of the replicas in use is the GPU's utilization; a server on a mixed-strategy MIG
    instance asks for no ``nvidia.com/gpu`` and is left out here as it is of "in use" (its own
    row and the idle policy read its instance)."""
    out = []
    for s in servers:
        if s.state != "running" or s.gpus <= 0:
            continue
        got = measure(s.namespace, s.name)
        if got is not None:
            out.append((s.gpus, got.util))
    return out


def busy_gpus(
    servers: Iterable[ServerUsage], measure: Callable[[str, str], PodUtilization | None]
) -> float | None:
    """GPUs actually busy: over the running ``servers`` that ``measure(namespace, pod)`` has a
    (fresh) measurement for, the sum of their GPUs times their mean utilization / 100; None when
    none of them is measured (not measured is not idle)."""
    measured = _measured(servers, measure)
    if not measured:
        return None
    return sum(gpus * util / 100.0 for gpus, util in measured)


def measured_gpus(
    servers: Iterable[ServerUsage], measure: Callable[[str, str], PodUtilization | None]
) -> int:
    """GPUs of the running ``servers`` that ``measure`` has a (fresh) measurement for."""
    return sum(gpus for gpus, _ in _measured(servers, measure))


def hourly_busy(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[float, str], float]:
    """The mean ``gpu_busy`` of samples (``time``, ``pool``, ``gpu_busy``) per hour (its start)
    and pool, as :func:`~.history.hourly_averages` buckets them; samples without a value are
    left out, and an hour without any has no entry."""
    buckets: dict[tuple[float, str], list[float]] = {}
    for r in rows:
        busy = r.get("gpu_busy")
        if busy is None:
            continue
        hour = float(int(r["time"] // 3600) * 3600)
        buckets.setdefault((hour, str(r["pool"])), []).append(float(busy))
    return {key: sum(values) / len(values) for key, values in buckets.items()}
