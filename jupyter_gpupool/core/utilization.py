"""GPU utilization: what NVIDIA's DCGM exporter (or Prometheus, which scrapes it) says each
server's GPUs are doing.

The exporter writes one series per GPU in Prometheus' text format: ``DCGM_FI_DEV_GPU_UTIL``
(percent), ``DCGM_FI_DEV_FB_USED`` and ``DCGM_FI_DEV_FB_FREE`` (MiB of the GPU's memory), with
``Hostname`` and ``gpu`` naming the GPU and, for a GPU a pod holds, ``namespace``, ``pod`` and
``container``. :func:`parse_exporter` reads that text, :func:`from_prometheus` the answers of
Prometheus' query API, and both give :class:`PodUtilization` per ``(namespace, pod)``.

Pure: text and JSON in, values out; the service polls (``jupyter_gpupool.service.utilization``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"

#: Prometheus' default queries: per pod, the mean utilization of its GPUs, their memory used
#: and free (MiB). ``max`` for the idle policy: a server is idle when all its GPUs are.
DEFAULT_QUERIES = {
    "util": f"avg by (namespace, pod) ({UTIL})",
    "util_max": f"max by (namespace, pod) ({UTIL})",
    "mem_used": f"sum by (namespace, pod) ({FB_USED})",
    "mem_free": f"sum by (namespace, pod) ({FB_FREE})",
}

PodKey = tuple[str, str]  # (namespace, pod)


@dataclass(frozen=True)
class GPUReading:
    """One GPU as the exporter reports it."""

    node: str
    gpu: str
    namespace: str = ""
    pod: str = ""
    util: float | None = None
    mem_used: float | None = None
    mem_free: float | None = None


@dataclass(frozen=True)
class PodUtilization:
    """A pod's GPUs at ``at``: mean and highest utilization (%), memory used and total (MiB)."""

    gpus: int
    util: float
    util_max: float
    mem_used: float | None
    mem_total: float | None
    at: float

    def as_json(self) -> dict[str, Any]:
        return {
            "gpus_measured": self.gpus,
            "gpu_utilization": round(self.util, 1),
            "gpu_utilization_max": round(self.util_max, 1),
            "gpu_memory_used_mib": None if self.mem_used is None else round(self.mem_used),
            "gpu_memory_total_mib": None if self.mem_total is None else round(self.mem_total),
            "measured_at": self.at,
        }


def parse_exporter(text: str) -> list[GPUReading]:
    """The GPUs of one exporter's page; ValueError when it is not Prometheus' text format."""
    gpus: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and friends on bad lines
        raise ValueError(f"not Prometheus' text format: {e}") from None
    fields = {UTIL: "util", FB_USED: "mem_used", FB_FREE: "mem_free"}
    for family in families:
        for sample in family.samples:
            field = fields.get(sample.name)
            if field is None:
                continue
            labels = sample.labels
            key = (labels.get("Hostname", ""), labels.get("gpu", ""))
            gpu = gpus.setdefault(
                key,
                {
                    "node": key[0],
                    "gpu": key[1],
                    "namespace": labels.get("namespace", ""),
                    "pod": labels.get("pod", ""),
                },
            )
            gpu[field] = float(sample.value)
    return [GPUReading(**g) for g in gpus.values()]


def by_pod(readings: Iterable[GPUReading], at: float) -> dict[PodKey, PodUtilization]:
    """The readings of GPUs held by pods, per pod (GPUs without a utilization are left out)."""
    mine: dict[PodKey, list[GPUReading]] = {}
    for r in readings:
        if r.pod and r.util is not None:
            mine.setdefault((r.namespace, r.pod), []).append(r)
    out = {}
    for key, gpus in mine.items():
        utils = [float(g.util) for g in gpus if g.util is not None]
        used = [g.mem_used for g in gpus if g.mem_used is not None]
        free = [g.mem_free for g in gpus if g.mem_free is not None]
        out[key] = PodUtilization(
            gpus=len(gpus),
            util=sum(utils) / len(utils),
            util_max=max(utils),
            mem_used=sum(used) if used else None,
            mem_total=sum(used) + sum(free) if used and len(free) == len(used) else None,
            at=at,
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
    ``util`` is required, the others may be missing)."""
    util = _vector(answers["util"])
    util_max = _vector(answers["util_max"]) if "util_max" in answers else {}
    used = _vector(answers["mem_used"]) if "mem_used" in answers else {}
    free = _vector(answers["mem_free"]) if "mem_free" in answers else {}
    out = {}
    for key, value in util.items():
        mem_used = used.get(key)
        out[key] = PodUtilization(
            gpus=0,  # Prometheus' answer is per pod: how many GPUs it averaged is not said
            util=value,
            util_max=util_max.get(key, value),
            mem_used=mem_used,
            mem_total=mem_used + free[key] if mem_used is not None and key in free else None,
            at=at,
        )
    return out
