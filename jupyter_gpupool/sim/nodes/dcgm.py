"""The simulated cluster's DCGM exporter: what NVIDIA's dcgm-exporter would say of each GPU.

``GET /sim/v1/dcgm/metrics[?node=NAME]`` (:meth:`DcgmExporter.render`) writes Prometheus' text
format as dcgm-exporter does on a Kubernetes node (its ``gpuMetricsFormat`` template and
``etc/default-counters.csv``): for every node with allocatable ``nvidia.com/gpu``, Ready or not,
one series per GPU of

- ``DCGM_FI_DEV_GPU_UTIL`` (gauge, %), ``DCGM_FI_DEV_FB_FREE`` and ``DCGM_FI_DEV_FB_USED``
  (gauges, MiB), with the exporter's help texts;
- labels ``gpu`` (index), ``UUID`` (``GPU-…``, stable per node and index), ``pci_bus_id``,
  ``device`` (``nvidia0``…), ``modelName`` (the node's ``nvidia.com/gpu.product`` label, else its
  ``runwhere.ai/gpu-type``) and ``Hostname`` (the node's name: the exporter's ``NODE_NAME``), and,
  for a GPU a pod's container holds, ``container``, ``namespace`` and ``pod``. As in the real
  exporter's pod mapper, a free GPU has no such labels at all.

Which container holds which GPU is the kubelet's table (:class:`~.gpudevices.GPUDevices`), as
the real exporter asks the kubelet's pod-resources API; the same table sets the processes'
``NVIDIA_VISIBLE_DEVICES``.

A GPU's utilization is its pod's setting: ``PUT /sim/v1/namespaces/NS/pods/NAME/gpu-utilization``
``{"percent": 80}`` for all its GPUs, or ``{"percent": [0, 90]}`` one per GPU in the order the pod
sees them (container by container, each in its ``NVIDIA_VISIBLE_DEVICES`` order)
(:meth:`DcgmExporter.set`), or the pod's annotation
``sim.gpupool.jupyter.org/gpu-utilization: "80"`` when it is created (or changed); 0 without
either, and 0 on a free GPU. Memory used is ``floor(memory * percent / 100)`` MiB, free the rest;
a GPU's memory is the node's ``nvidia.com/gpu.memory`` label (MiB), else the size in its
``runwhere.ai/gpu-type`` (``A10-24G``: 24 GiB), else 80 GiB.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.kube.quantities import parse_quantity
from ..objects.errors import ApiError, not_found
from ..objects.resources import RESOURCES
from ..objects.store import Store
from ..objects.watches import WatchEvent
from .gpudevices import GPU_RESOURCE, GPUDevices, GPUHolder, container_gpus
from .partitions import Layout, gpu_uuid

log = logging.getLogger(__name__)

ANNOTATION = "sim.gpupool.jupyter.org/gpu-utilization"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_USED = "DCGM_FI_DEV_FB_USED"
#: MIG instances report no DCGM_FI_DEV_GPU_UTIL; their activity is this profiling field (0-1)
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
#: (field, Prometheus type, help), in the order of dcgm-exporter's default-counters.csv
FIELDS = (
    (UTIL, "gauge", "GPU utilization (in %)."),
    (FB_FREE, "gauge", "Framebuffer memory free (in MiB)."),
    (FB_USED, "gauge", "Framebuffer memory used (in MiB)."),
    (GR_ENGINE_ACTIVE, "gauge", "Ratio of time the graphics engine is active."),
)

PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
TYPE_LABEL = "runwhere.ai/gpu-type"
DEFAULT_MEMORY_MIB = 80 * 1024
DEFAULT_MODEL = "NVIDIA GPU"
_TYPE_SIZE = re.compile(r"(\d+)G(?:B|i)?$", re.IGNORECASE)


_WHOLE = "a whole number from 0 to 100"


def _shown(value: object) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{text} (a string)" if isinstance(value, str) else text


def parse_percent(value: object) -> int:
    """A utilization setting from JSON: a whole number from 0 to 100, as DCGM reports it (``80``
    or ``80.0``; not ``true``, ``"80"`` or ``37.5``). ValueError saying what is wrong otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be {_WHOLE}, not {_shown(value)}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"must be {_WHOLE}, not {_shown(value)}")
    if not 0 <= value <= 100:
        raise ValueError(f"must be {_WHOLE}, not {_shown(value)}")
    return int(value)


#: A pod's setting: one percent for all its GPUs, or one per GPU (in the order the pod sees them)
Setting = int | tuple[int, ...]


def parse_percents(value: list[object], gpus: int, pod: str) -> tuple[int, ...]:
    """A setting per GPU from JSON: one :func:`parse_percent` per GPU of the pod (``gpus``, what
    its containers ask for). ValueError saying what is wrong otherwise (naming ``percent``)."""
    if len(value) != gpus:
        raise ValueError(
            f"percent has {len(value)} values but pod {pod} asks for {gpus} GPUs: give one per GPU, in the "
            "order of its NVIDIA_VISIBLE_DEVICES (or one number for all)"
        )
    out = []
    for i, v in enumerate(value):
        try:
            out.append(parse_percent(v))
        except ValueError as e:
            raise ValueError(f"percent[{i}] {e}") from None
    return tuple(out)


def parse_annotation(text: str) -> int:
    """The annotation's value (a string, as every annotation): ``"80"``, digits only, 0 to 100."""
    stripped = text.strip()
    if not stripped.isascii() or not stripped.isdigit() or not 0 <= int(stripped) <= 100:
        raise ValueError(f"must be {_WHOLE}, not {text!r}")
    return int(stripped)


def gpu_memory_mib(labels: Mapping[str, str]) -> int:
    """One GPU's memory (MiB) on a node with these labels (see the module docstring)."""
    with contextlib.suppress(ValueError):
        mib = int(labels.get(MEMORY_LABEL, ""))
        if mib > 0:
            return mib
    m = _TYPE_SIZE.search(labels.get(TYPE_LABEL, ""))
    if m and int(m.group(1)) > 0:
        return int(m.group(1)) * 1024
    return DEFAULT_MEMORY_MIB


@dataclass(frozen=True)
class GPUSample:
    """One GPU as the exporter reports it."""

    node: str
    index: int
    model: str
    memory_mib: int
    holder: GPUHolder | None
    percent: int
    #: a MIG instance: its profile (``3g.40gb``) and GPU instance id
    profile: str | None = None
    gi: int | None = None
    #: a shared GPU's replica the holder has (the exporter's ``vgpu`` label)
    vgpu: int | None = None

    @property
    def uuid(self) -> str:
        return gpu_uuid(self.node, self.index)

    @property
    def used_mib(self) -> int:
        return self.memory_mib * self.percent // 100

    @property
    def free_mib(self) -> int:
        return self.memory_mib - self.used_mib

    def labels(self) -> list[tuple[str, str]]:
        """The exporter's labels, in its order."""
        out = [
            ("gpu", str(self.index)),
            ("UUID", self.uuid),
            ("pci_bus_id", f"00000000:{0x10 + self.index:02X}:00.0"),
            ("device", f"nvidia{self.index}"),
            ("modelName", self.model),
        ]
        if self.profile is not None:
            out += [("GPU_I_PROFILE", self.profile), ("GPU_I_ID", str(self.gi))]
        out.append(("Hostname", self.node))
        if self.holder is not None:
            h = self.holder
            out += [("container", h.container), ("namespace", h.namespace), ("pod", h.pod)]
            if self.vgpu is not None:
                out.append(("vgpu", str(self.vgpu)))
        return out

    def value(self, field: str) -> str | None:
        """The sample's value of ``field`` as the page writes it; None when it does not report
        it (a MIG instance has no ``DCGM_FI_DEV_GPU_UTIL``, a GPU no profiling field here)."""
        if field == UTIL:
            return None if self.profile is not None else str(self.percent)
        if field == GR_ENGINE_ACTIVE:
            return None if self.profile is None else f"{self.percent / 100:f}"
        return str(self.free_mib if field == FB_FREE else self.used_mib)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class DcgmExporter:
    """The GPUs' utilization settings, and the exporter's page built from them and the kubelet's
    device table."""

    def __init__(self, store: Store, devices: GPUDevices):
        self.store = store
        self.devices = devices
        self._settings: dict[str, tuple[Setting, str]] = {}  # pod uid -> (percent, source)
        self._problems: dict[str, str] = {}  # pod uid -> why its annotation is ignored
        #: Nodes whose exporter does not answer (:meth:`set_reachable`)
        self.down: set[str] = set()

    def start(self) -> None:
        if self._on_event not in self.store.listeners:
            self.store.listeners.append(self._on_event)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.listeners.remove(self._on_event)

    # ---- settings --------------------------------------------------------------------------

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.resource != "pods":
            return
        md = ev.obj["metadata"]
        uid = md["uid"]
        if ev.type == "DELETED":
            self._settings.pop(uid, None)
            self._problems.pop(uid, None)
            return
        value = (md.get("annotations") or {}).get(ANNOTATION)
        before = None
        if ev.old is not None:
            before = ((ev.old.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
        if value is None or (ev.type == "MODIFIED" and value == before):
            return  # set at creation, or changed: the latest write wins (as a PUT)
        try:
            self._settings[uid] = (parse_annotation(str(value)), "annotation")
            self._problems.pop(uid, None)
        except ValueError as e:
            problem = f"annotation {ANNOTATION} {e}: ignored"
            self._problems[uid] = problem
            log.warning("pod %s/%s: %s", md.get("namespace"), md.get("name"), problem)

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        if self.store.find("namespaces", None, namespace) is None:
            raise ApiError(
                404,
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )
        pod = self.store.find("pods", namespace, name)
        if pod is None:
            raise not_found(RESOURCES["pods"], name)
        return pod

    def set(self, namespace: str, name: str, percent: object) -> dict[str, Any]:
        """Set a pod's GPU utilization (whole percent, 0 to 100), for all its GPUs or, given a
        list, one per GPU in the order the pod sees them; its setting, as :meth:`get`."""
        pod = self._pod(namespace, name)
        value: Setting
        if isinstance(percent, list):
            gpus = sum(container_gpus(c) for c in pod["spec"].get("containers") or [])
            try:
                value = parse_percents(percent, gpus, f"{namespace}/{name}")
            except ValueError as e:
                raise ApiError(400, str(e)) from None
        else:
            try:
                value = parse_percent(percent)
            except ValueError as e:
                raise ApiError(400, f"percent {e}") from None
        self._settings[pod["metadata"]["uid"]] = (value, "put")
        return self.get(namespace, name)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """A pod's setting: ``percent`` (a number, or a list with one per GPU), its ``source``
        (``put``, ``annotation`` or ``default``), the ``node`` and ``gpus`` it holds (each with
        the ``percent`` it reports, in the order the pod sees them), and ``annotationProblem``
        when its annotation is bad."""
        pod = self._pod(namespace, name)
        uid = pod["metadata"]["uid"]
        percent, source = self._settings.get(uid, (0, "default"))
        node = self.devices.node_of(uid)
        gpus = [
            {
                "gpu": self.devices.gpu_index(node, i),
                "UUID": self.devices.device_id(node, i),
                "container": container,
                "percent": self.percent_of(uid, i),
            }
            for container, indices in self.devices.of_pod(uid).items()
            for i in indices
            if node is not None
        ]
        out: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "percent": list(percent) if isinstance(percent, tuple) else percent,
            "source": source,
            "node": node,
            "gpus": gpus,
        }
        if uid in self._problems:
            out["annotationProblem"] = self._problems[uid]
        return out

    def percent_of(self, uid: str, index: int) -> int:
        """What GPU ``index`` of the pod's node reports, the pod holding it."""
        setting = self._settings.get(uid, (0, "default"))[0]
        if isinstance(setting, int):
            return setting
        order = self.devices.in_order(uid)
        return setting[order.index(index)] if index in order else 0

    # ---- the exporter's page ---------------------------------------------------------------

    def samples(self, node: str | None = None) -> list[GPUSample]:
        """Every GPU of every node with allocatable ``nvidia.com/gpu`` (or of ``node`` only: a
        404 ApiError when there is no such node), by node name, then index."""
        if node is not None:
            nodes = [self.store.get("nodes", None, node)]
        else:
            nodes = sorted(self.store.iter("nodes"), key=lambda n: n["metadata"]["name"])
        out = []
        for n in nodes:
            alloc = (n.get("status") or {}).get("allocatable") or {}
            count = int(parse_quantity(alloc.get(GPU_RESOURCE, "0")))
            name = n["metadata"]["name"]
            labels = n["metadata"].get("labels") or {}
            model = labels.get(PRODUCT_LABEL) or labels.get(TYPE_LABEL) or DEFAULT_MODEL
            memory = gpu_memory_mib(labels)
            held = self.devices.holders(name)
            layout = self.devices.layouts.get(name)
            if layout is not None:
                out += self._partitioned(name, layout, model, memory, held)
                continue
            for i in range(count):
                holder = held.get(i)
                percent = self.percent_of(holder.uid, i) if holder is not None else 0
                out.append(GPUSample(name, i, model, memory, holder, percent))
        return out

    def _partitioned(
        self, node: str, layout: Layout, model: str, memory: int, held: dict[int, GPUHolder]
    ) -> list[GPUSample]:
        """A partitioned node's series: one per MIG instance (its own memory and activity), one
        per whole GPU, and a shared GPU's one series for each container sharing it (the GPU's
        utilization: what its pods' settings add up to, at most 100)."""
        out = []
        for g in range(layout.gpus):
            keys = [k for k, u in enumerate(layout.units) if u.gpu == g]
            units = [layout.units[k] for k in keys]
            if any(u.profile is not None for u in units):
                for k, u in zip(keys, units, strict=True):
                    h = held.get(k)
                    pct = self.percent_of(h.uid, k) if h is not None else 0
                    out.append(
                        GPUSample(node, g, model, u.memory_mib or 0, h, pct, u.profile, u.gi)
                    )
                continue
            gpu_mem = memory
            holders = [(k, held[k]) for k in keys if k in held]
            if len(units) == 1:  # a whole GPU
                h = holders[0][1] if holders else None
                pct = self.percent_of(h.uid, keys[0]) if h is not None else 0
                out.append(GPUSample(node, g, model, gpu_mem, h, pct))
                continue
            total = min(100, sum(self.percent_of(h.uid, k) for k, h in holders))
            if not holders:
                out.append(GPUSample(node, g, model, gpu_mem, None, 0))
            for k, h in holders:
                replica = layout.units[k].replica
                out.append(GPUSample(node, g, model, gpu_mem, h, total, vgpu=replica))
        return out

    def set_reachable(self, node: str, reachable: bool) -> dict[str, Any]:
        """Make the node's exporter answer, or not (a crashed exporter, a node cut off):
        while it does not, its own page is a 503 and the whole cluster's page leaves its GPUs
        out, as a Prometheus target that is down. 404 for an unknown node."""
        if self.store.find("nodes", None, node) is None:
            raise ApiError(404, f'nodes "{node}" not found', "NotFound")
        if reachable:
            self.down.discard(node)
        else:
            self.down.add(node)
        return {"node": node, "reachable": reachable}

    def render(self, node: str | None = None) -> str:
        """The exporter's page: Prometheus' text format (``CONTENT_TYPE``)."""
        if node is not None and node in self.down:
            raise ApiError(
                503,
                f"the DCGM exporter of node {node} is not answering (made unreachable in the "
                "simulator)",
                "ServiceUnavailable",
            )
        samples = [s for s in self.samples(node) if s.node not in self.down]
        lines = []
        for field, ptype, help_text in FIELDS:
            if field == GR_ENGINE_ACTIVE and not any(s.profile for s in samples):
                continue  # only MIG instances report it here
            lines.append(f"# HELP {field} {help_text}")
            lines.append(f"# TYPE {field} {ptype}")
            for s in samples:
                value = s.value(field)
                if value is None:
                    continue
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels())
                lines.append(f"{field}{{{labels}}} {value}")
        return "\n".join(lines) + "\n"
