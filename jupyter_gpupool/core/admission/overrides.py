"""Pod overrides: what an admitted request changes in the spawner's pod, as one plain dict.

Built as KubeSpawner builds pods in ``objects.py``: a pure function of settings (the pool, its
platform, the registry's templates, the request and who it is charged to) that returns
pod-template terms (``nodeSelector``, ``tolerations``, ``labels``, ``annotations``, ``env``,
``image``, ``resources``, ``affinity``), with no I/O, so tests compare whole dicts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..kube.quantities import format_cpu, format_memory, parse_quantity
from ..pools.model import DEFAULT_POOL, Defaults, Platform, Pool, Registry
from ..pools.templates import merge_templates
from ..usage.amounts import amount_text
from ..usage.labels import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    POD_ADMISSION,
    POD_CHARGED,
    POD_EQUIVALENTS,
    POD_GPUS,
    POD_GROUPS,
    POD_OVER_QUOTA,
    POD_PLATFORM,
    POD_POOL,
    POD_RUNWHERE_POOL,
    POD_SERVER,
    POD_SHAPE,
    POD_USER,
    POOL_LABEL,
    safe_label_value,
)
from ..usage.shapes import (
    HAMI,
    HAMI_MEMORY_RESOURCE,
    HAMI_NODE_LABEL,
    MIG_STRATEGY_LABEL,
    REPLICAS_LABEL,
    WHOLE,
    Shape,
)

if TYPE_CHECKING:
    from .decision import AdmissionRequest

#: What every GPU server tolerates: the taint GPU nodes commonly carry for the GPU resource.
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def whole_gpu_terms() -> list[list[dict[str, Any]]]:
    """Node affinity terms (ORed; the expressions of each ANDed) of the nodes whose
    ``nvidia.com/gpu`` are whole GPUs: not time-sliced or MPS replicas (GFD's
    ``nvidia.com/gpu.replicas`` above 1), not single-strategy MIG devices, not HAMi slices
    (docs/shapes.md). A pod asking whole GPUs must not get a replica from the scheduler when
    the node admission picked is full: it would be charged a GPU and share one."""
    others = [
        {"key": MIG_STRATEGY_LABEL, "operator": "NotIn", "values": ["single"]},
        {"key": HAMI_NODE_LABEL[0], "operator": "NotIn", "values": [HAMI_NODE_LABEL[1]]},
    ]
    return [
        [{"key": REPLICAS_LABEL, "operator": "DoesNotExist"}, *others],
        [{"key": REPLICAS_LABEL, "operator": "Lt", "values": ["2"]}, *others],
    ]


@functools.lru_cache(maxsize=1024)
def _resource_requests(defaults: Defaults, n: int) -> tuple[tuple[str, str], ...]:
    """The CPU and memory requests of a server of ``n`` GPUs with ``defaults``, worked out
    once per pair (parsing and formatting quantities was a tenth of building the overrides)."""
    return tuple(_resources(defaults, n).items())


def _resources(defaults: Defaults, n: int) -> dict[str, str]:
    out: dict[str, str] = {}
    cpu = Decimal(0)
    if defaults.cpu is not None:
        cpu += parse_quantity(defaults.cpu)
    if defaults.cpu_per_gpu is not None:
        cpu += parse_quantity(defaults.cpu_per_gpu) * n
    if cpu:
        out["cpu"] = format_cpu(cpu)
    mem = Decimal(0)
    if defaults.memory is not None:
        mem += parse_quantity(defaults.memory)
    if defaults.memory_per_gpu is not None:
        mem += parse_quantity(defaults.memory_per_gpu) * n
    if mem:
        out["memory"] = format_memory(mem)
    return out


def build_overrides(
    *,
    registry: Registry,
    pool: Pool,
    platform: Platform | None,
    request: AdmissionRequest,
    charged: str,
    over_quota: bool,
    pool_label: str = POOL_LABEL,
    type_pin: tuple[str, str] | None = None,
    node_hostname: str | None = None,
    shape: Shape | None = None,
    shape_pin: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The pod settings for an admitted request: defaults, pool and platform templates, ours.

    Ours come last so a template cannot break accounting: pool selection, GPU limits and the
    labels/annotations the usage index reads back. A ``shape`` other than whole GPUs asks for its
    resource instead of ``nvidia.com/gpu`` (and HAMi's memory), and is named on the pod: its id
    in a label, its GPU-equivalents in an annotation (what quotas count).
    """
    n = request.gpus
    defaults = pool.defaults.overlay(platform.defaults if platform else None)
    base: dict[str, Any] = {}
    if requests := _resource_requests(defaults, n):
        base["resources"] = {"requests": dict(requests)}
    template = registry.pod_template(pool.name, platform.name if platform else None)

    node_selector: dict[str, str] = dict(pool.selector)
    affinity: dict[str, Any] = {}
    required: list[dict[str, Any]] = []  # ANDed with each of the terms below
    if not pool.selector:
        if pool.name == DEFAULT_POOL:
            # Nodes *without* a pool label: not expressible as a nodeSelector.
            required.append({"key": pool_label, "operator": "DoesNotExist"})
        else:
            node_selector[pool_label] = pool.name
    terms = whole_gpu_terms() if n and (shape is None or shape.kind == WHOLE) else [[]]
    if required or any(terms):
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": [*required, *t]} for t in terms]
        }
    if type_pin is not None:
        node_selector[type_pin[0]] = type_pin[1]
    # where the pool's nvidia.com/gpu means different things on different nodes (whole GPUs,
    # time-sliced replicas, MIG devices): the labels that say which, so the scheduler cannot
    # put the pod on a node of another shape
    node_selector.update(shape_pin or {})
    if node_hostname is not None:
        # The node the GPUs are reserved on: a preference, the scheduler has the last word.
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {"key": HOSTNAME_LABEL, "operator": "In", "values": [node_hostname]}
                    ]
                },
            }
        ]

    labels = {
        POD_POOL: pool.name,
        POD_RUNWHERE_POOL: pool.name,
        POD_USER: safe_label_value(request.user),
        POD_SERVER: safe_label_value(request.server),
        POD_GPUS: str(n),
        POD_OVER_QUOTA: "true" if over_quota else "false",
        POD_CHARGED: safe_label_value(charged),
    }
    if request.admission_id:
        labels[POD_ADMISSION] = request.admission_id
    if platform is not None:
        labels[POD_PLATFORM] = platform.name
    annotations = {
        POD_POOL: pool.name,
        POD_USER: request.user,
        POD_SERVER: request.server,
        POD_GROUPS: ",".join(request.groups),
        POD_CHARGED: charged,
    }
    ours: dict[str, Any] = {
        "nodeSelector": node_selector,
        "labels": labels,
        "annotations": annotations,
    }
    if n:
        gpu = {shape.resource if shape is not None else GPU_RESOURCE: str(n)}
        if shape is not None:
            labels[POD_SHAPE] = shape.id
            annotations[POD_EQUIVALENTS] = amount_text(n * shape.equivalent)
            if shape.kind == HAMI and shape.memory_mib:
                gpu[HAMI_MEMORY_RESOURCE] = str(shape.memory_mib)
        ours["resources"] = {"requests": dict(gpu), "limits": dict(gpu)}
        ours["tolerations"] = [dict(GPU_TOLERATION)]
    else:
        # CUDA images set NVIDIA_VISIBLE_DEVICES=all, which would show a GPU-less server every
        # GPU of its node; "none" keeps the driver but no devices.
        ours["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    if affinity:
        ours["affinity"] = {"nodeAffinity": affinity}
    return merge_templates(base, template, owned=ours)
