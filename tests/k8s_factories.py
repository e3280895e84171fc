"""Minimal Node and Pod dicts, shaped as the API server sends them in watch events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_gpupool.core.usage import labels as L

#: The example pool files (gpuctl's four pools and the demo's quotas), as shipped.
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "pools"
#: The same four pools with the richer quotas the admission tests are written against.
TEST_POOLS = Path(__file__).resolve().parent / "core" / "data"


def node(
    name: str,
    pool: str | None = None,
    gpus: int = 8,
    gpu_type: str | None = "A100-80G",
    *,
    ready: bool = True,
    cordoned: bool = False,
    conditions: dict[str, bool] | None = None,
    taints: list[dict[str, str]] | None = None,
    extra_labels: dict[str, str] | None = None,
    product: str | None = None,
    device_plugin: bool = True,
    extra_allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A node; ``extra_labels`` and ``extra_allocatable`` add what GFD and the device plugin
    write for MIG devices and shared GPUs (``nvidia.com/mig-3g.40gb: "1"``)."""
    labels = {L.HOSTNAME_LABEL: name}
    if pool is not None:
        labels[L.POOL_LABEL] = pool
    if gpu_type is not None:
        labels[L.GPU_TYPE_LABEL] = gpu_type
    if product is not None:
        labels[L.GFD_PRODUCT_LABEL] = product
        labels[L.GFD_COUNT_LABEL] = str(gpus)
    labels.update(extra_labels or {})
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus and device_plugin:
        allocatable[L.GPU_RESOURCE] = str(gpus)
    allocatable.update(extra_allocatable or {})
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    for ctype, value in (conditions or {}).items():
        conds.append({"type": ctype, "status": "True" if value else "False"})
    spec: dict[str, Any] = {}
    if cordoned:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "metadata": {"name": name, "labels": labels, "resourceVersion": "1"},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": dict(allocatable), "conditions": conds},
    }


def pod(
    name: str,
    gpus: int = 1,
    node_name: str | None = None,
    *,
    namespace: str = "jhub",
    user: str | None = None,
    server: str = "",
    pool: str | None = None,
    charged: str | None = None,
    over_quota: bool = False,
    admission: str | None = None,
    phase: str | None = None,
    created: str = "2025-01-01T00:00:00Z",
    uid: str | None = None,
    deleting: bool = False,
    init_gpus: int = 0,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod; ``limits`` adds other resources to its container's limits (a MIG device:
    ``{"nvidia.com/mig-3g.40gb": "1"}`` with ``gpus=0``)."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if user is not None:
        annotations[L.POD_USER] = user
        labels[L.POD_USER] = L.safe_label_value(user)
        annotations[L.POD_SERVER] = server
        annotations[L.POD_CHARGED] = charged or f"user:{user}"
        labels[L.POD_OVER_QUOTA] = "true" if over_quota else "false"
    if pool is not None:
        labels[L.POD_POOL] = pool
    if admission is not None:
        labels[L.POD_ADMISSION] = admission
    container: dict[str, Any] = {"name": "notebook", "image": "jupyter/base"}
    if gpus or limits:
        own = {L.GPU_RESOURCE: str(gpus)} if gpus else {}
        container["resources"] = {"limits": {**own, **(limits or {})}}
    spec: dict[str, Any] = {"containers": [container]}
    if init_gpus:
        spec["initContainers"] = [
            {"name": "init", "resources": {"limits": {L.GPU_RESOURCE: init_gpus}}}
        ]
    if node_name is not None:
        spec["nodeName"] = node_name
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{namespace}-{name}",
        "labels": labels,
        "annotations": annotations,
        "creationTimestamp": created,
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-01-02T00:00:00Z"
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }
