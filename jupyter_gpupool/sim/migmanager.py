"""Re-partitioning a simulated node's MIG GPUs, as NVIDIA's MIG manager does.

NVIDIA's MIG manager (mig-parted's ``reconfigure-mig.sh``) watches the node's
``nvidia.com/mig.config`` label; when it changes it sets ``nvidia.com/mig.config.state=pending``,
stops the GPU operator's clients on the node, runs ``nvidia-mig-parted apply``, and ends in
``success`` or, when the apply fails, ``failed``. It does not look at user pods first: applying a
layout to GPUs whose instances are in use fails (NVML will not destroy a busy GPU instance), so
the node ends in ``failed`` with its old layout. :func:`repartition` does the same in two node
updates (``pending``, then ``success`` with the new allocatable and labels, or ``failed``).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

import yaml

from ..core.yamldoc import DocumentError
from .errors import ApiError
from .gpudevices import GPUDevices
from .partitions import Layout
from .resources import RESOURCES
from .spec import GPU_RESOURCE, NodeSpec, parse_cluster
from .store import Store

log = logging.getLogger(__name__)

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"


def _new_spec(old: NodeSpec, mig: Any) -> NodeSpec:
    """The node's spec with its GPUs cut as ``mig`` (a cluster file's ``gpu.mig`` mapping); a 400
    ApiError saying what is wrong otherwise."""
    gpu: dict[str, Any] = {"count": old.gpu.count, "mig": mig}
    if old.gpu.product:
        gpu["product"] = old.gpu.product
    if old.gpu.memory_mib is not None:
        gpu["memory"] = old.gpu.memory_mib
    try:
        (parsed,) = parse_cluster(yaml.safe_dump({"nodes": [{"name": old.name, "gpu": gpu}]})).nodes
    except DocumentError as e:
        words = "; ".join(f"{p.path}: {p.message}" for p in e.problems)
        raise ApiError(400, f"node {old.name}: {words}") from None
    return dataclasses.replace(old, gpu=dataclasses.replace(old.gpu, mig=parsed.gpu.mig))


def _in_use(devices: GPUDevices, name: str, old: Layout | None, new: Layout | None) -> list[str]:
    """The pods holding devices of GPUs whose MIG layout would change."""
    touched = (old.mig_gpus() if old else set()) | (new.mig_gpus() if new else set())
    pods = set()
    for key, holder in devices.holders(name).items():
        if devices.gpu_index(name, key) in touched:
            pods.add(f"{holder.namespace}/{holder.pod}")
    return sorted(pods)


def repartition(
    store: Store,
    devices: GPUDevices,
    specs: MutableMapping[str, NodeSpec],
    layouts: MutableMapping[str, Layout],
    name: str,
    mig: Mapping[str, Any],
    config: str = "custom",
) -> dict[str, Any]:
    """Cut node ``name``'s GPUs as ``mig`` says, through ``pending``: the node, its state
    ``success``. A 409 ApiError (the node left ``failed``, its layout unchanged) while pods hold
    devices of the GPUs it would change; 404 for no such node, 400 for a layout that can't be."""
    node = store.get("nodes", None, name)
    old = specs.get(name)
    if old is None or old.gpu.mig is None:
        raise ApiError(400, f"node {name} has no MIG GPUs to re-partition (gpu.mig)")
    new = _new_spec(old, dict(mig))
    old_layout, new_layout = layouts.get(name), new.gpu.layout()

    def write(change: Any) -> dict[str, Any]:
        cur = store.get("nodes", None, name)
        updated = copy.deepcopy(cur)
        change(updated)
        return store.write_internal(RESOURCES["nodes"], ("", name), cur, updated)

    def labels(state: str) -> Any:
        return lambda n: n["metadata"]["labels"].update({CONFIG_LABEL: config, STATE_LABEL: state})

    write(labels("pending"))
    busy = _in_use(devices, name, old_layout, new_layout)
    if busy:
        write(labels("failed"))
        reason = (
            f"node {name}: the MIG manager cannot re-partition GPUs in use "
            f"(by {', '.join(busy)}): {STATE_LABEL}=failed, the layout is unchanged"
        )
        log.warning("%s", reason)
        raise ApiError(409, reason, "Conflict")

    old_derived = old.all_labels()

    def apply(n: dict[str, Any]) -> None:
        kept = {k: v for k, v in n["metadata"]["labels"].items() if k not in old_derived}
        kept.update(new.all_labels())
        kept.update({CONFIG_LABEL: config, STATE_LABEL: "success"})
        n["metadata"]["labels"] = kept
        for key in ("capacity", "allocatable"):
            res = n["status"].get(key) or {}
            res = {
                k: v
                for k, v in res.items()
                if k != GPU_RESOURCE and not k.startswith("nvidia.com/mig-")
            }
            res.update(
                (k, v) for k, v in new.capacity().items() if k not in ("cpu", "memory", "pods")
            )
            n["status"][key] = res

    node = write(apply)
    specs[name] = new
    if new_layout is not None:
        layouts[name] = new_layout
    return node
