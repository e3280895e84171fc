"""GPUs counted from Kubernetes objects by NVIDIA's conventions, for tests that check the
service's counts against the cluster (issue 40), without the service's code.

- A MIG device of the mixed strategy is ``nvidia.com/mig-<g>g.<gb>gb``: ``g`` of the GPU's
  compute slices, 7 on an A100 (NVIDIA's MIG user guide; the only MIG GPU of these clusters).
- On a time-sliced or MPS node ``nvidia.com/gpu`` counts GPUs x ``nvidia.com/gpu.replicas``
  (the device plugin's sharing config), so one unit is 1/replicas of a GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

A100_SLICES = 7


def unit_value(resource: str, labels: Mapping[str, str]) -> Fraction | None:
    """What one unit of ``resource`` on a node with ``labels`` is, in GPUs (None: not a GPU)."""
    if resource.startswith("nvidia.com/mig-"):
        profile = resource[len("nvidia.com/mig-") :]
        return Fraction(int(profile.split("g.")[0]), A100_SLICES)
    if resource == "nvidia.com/gpu":
        return Fraction(1, int(labels.get("nvidia.com/gpu.replicas") or "1"))
    return None


def node_gpus(node: Mapping[str, Any]) -> Fraction:
    """A node object's GPUs, from its ``status.allocatable`` and labels."""
    labels = node["metadata"].get("labels") or {}
    total = Fraction(0)
    for resource, quantity in ((node.get("status") or {}).get("allocatable") or {}).items():
        value = unit_value(resource, labels)
        if value is not None:
            total += value * int(quantity)
    return total


def pods_gpus(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Fraction:
    """The GPUs the pods bound to ``node`` (and not finished) hold, from their limits."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    used = Fraction(0)
    for pod in pods:
        if pod["spec"].get("nodeName") != name:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in pod["spec"].get("containers") or ():
            res = c.get("resources") or {}
            for resource, quantity in (res.get("limits") or res.get("requests") or {}).items():
                value = unit_value(resource, labels)
                if value is not None:
                    used += value * int(quantity)
    return used


def number(value: Fraction) -> int | float:
    """As the API writes an amount: an integer when whole, else 3 decimals."""
    return int(value) if value.denominator == 1 else round(float(value), 3)


def cell(value: Fraction) -> str:
    """As a table's cell says it: two decimals at most."""
    return str(int(value)) if value.denominator == 1 else f"{float(value):.2f}".rstrip("0")
