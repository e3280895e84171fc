"""Re-partitioning a simulated node's MIG GPUs, as NVIDIA's MIG manager does.

NVIDIA's MIG manager (mig-parted's ``deployments/gpu-operator/reconfigure-mig.sh``) watches the
node's ``nvidia.com/mig.config`` label. When it changes, it sets
``nvidia.com/mig.config.state=pending``, stops the GPU operator's clients on the node, and
applies the MIG mode first (``nvidia-mig-parted apply --mode-only``). When the mode cannot change
in place and it may reboot (``-r``, ``WITH_REBOOT``), it sets ``rebooting`` and reboots; started
again, it finds the mode applied, sets ``pending`` once more and goes on. Then it applies the
layout (``nvidia-mig-parted apply``) and ends in ``success``, or ``failed`` when the apply fails.
It does not look at user pods first: NVML will not destroy a GPU instance in use, so the apply
fails and the node keeps its old layout. Only the device plugin, started again at the end,
advertises the new instances: allocatable changes with ``success``.

:class:`MigManager` does the same, one node update per state, ``delay`` seconds apart: the
simulated GPUs change MIG mode only by rebooting (every GPU that enters or leaves MIG mode), so
such a change goes ``pending``, ``rebooting``, ``pending``, ``success``; any other
``pending``, ``success``. The reboot itself (the node NotReady, its pods gone) is not simulated.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import yaml

from ...core.documents.yaml_reader import DocumentError
from ..objects.errors import ApiError
from ..objects.resources import RESOURCES
from ..objects.store import Store
from .gpudevices import GPUDevices
from .partitions import Layout
from .spec import GPU_RESOURCE, NodeSpec, parse_cluster

log = logging.getLogger(__name__)

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
#: a re-partition is under way while the state is one of these
BUSY_STATES = ("pending", "rebooting")


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


def _gfd_labels(spec: NodeSpec) -> dict[str, str]:
    """The labels GPU Feature Discovery writes for the spec's GPUs (``nvidia.com/…``)."""
    return {k: v for k, v in spec.all_labels().items() if k.startswith("nvidia.com/")}


@dataclasses.dataclass
class _Run:
    """One node's re-partition under way: the states still to write, then the apply."""

    new: NodeSpec
    config: str
    steps: list[str]  # states to write before the apply ("rebooting", "pending")
    timer: asyncio.TimerHandle | None = None


class MigManager:
    """The MIG manager of every simulated MIG node (see the module's words).

    ``delay``: seconds between two of a re-partition's node updates (0 still lets the caller
    see ``pending`` first: each step runs on a later turn of the event loop).
    """

    def __init__(
        self,
        store: Store,
        devices: GPUDevices,
        specs: MutableMapping[str, NodeSpec],
        layouts: MutableMapping[str, Layout],
        settle: Callable[[], None],
        delay: float = 0.05,
    ):
        self.store = store
        self.devices = devices
        self.specs = specs
        self.layouts = layouts
        self.settle = settle
        self.delay = delay
        self._runs: dict[str, _Run] = {}

    def repartition(
        self, name: str, mig: Mapping[str, Any], config: str = "custom"
    ) -> dict[str, Any]:
        """Start cutting node ``name``'s GPUs as ``mig`` says: the node, ``pending``. ApiError
        404 for no such node, 400 for a node without MIG GPUs or a layout that can't be, 409
        while it is re-partitioned already, and 409 (the node left ``failed``, its layout
        unchanged) while pods hold devices of the GPUs it would change."""
        self.store.get("nodes", None, name)  # 404
        old = self.specs.get(name)
        if old is None or old.gpu.mig is None:
            raise ApiError(400, f"node {name} has no MIG GPUs to re-partition (gpu.mig)")
        if name in self._runs:
            raise ApiError(
                409,
                f"node {name} is being re-partitioned already ({STATE_LABEL} not success)",
                "Conflict",
            )
        new = _new_spec(old, dict(mig))
        old_layout, new_layout = self.layouts.get(name), new.gpu.layout()
        node = self._label(name, config, "pending")
        busy = _in_use(self.devices, name, old_layout, new_layout)
        if busy:
            self._label(name, config, "failed")
            reason = (
                f"node {name}: the MIG manager cannot re-partition GPUs in use "
                f"(by {', '.join(busy)}): {STATE_LABEL}=failed, the layout is unchanged"
            )
            log.warning("%s", reason)
            raise ApiError(409, reason, "Conflict")
        old_mode = old_layout.mig_gpus() if old_layout else set()
        new_mode = new_layout.mig_gpus() if new_layout else set()
        steps = ["rebooting", "pending"] if old_mode != new_mode else []
        self._runs[name] = _Run(new, config, steps)
        self._schedule(name)
        return node

    def running(self, name: str) -> bool:
        """Whether a re-partition of node ``name`` is under way."""
        return name in self._runs

    def advance(self, name: str) -> dict[str, Any]:
        """Write node ``name``'s next re-partition step now, as if its delay had passed: the
        node (as it is when no re-partition is under way)."""
        self._step(name)
        return self.store.get("nodes", None, name)

    def finish(self, name: str) -> dict[str, Any]:
        """Write the rest of node ``name``'s re-partition now, as if its delays had passed: the
        node as it ends (``success``, or ``failed`` when pods took its GPUs meanwhile)."""
        while name in self._runs:
            self._step(name)
        return self.store.get("nodes", None, name)

    def forget(self, name: str) -> None:
        """Drop node ``name``'s re-partition (the node was removed)."""
        run = self._runs.pop(name, None)
        if run is not None and run.timer is not None:
            run.timer.cancel()

    def stop(self) -> None:
        for name in list(self._runs):
            self.forget(name)

    # ---- the steps --------------------------------------------------------------------------

    def _schedule(self, name: str) -> None:
        run = self._runs[name]
        run.timer = asyncio.get_running_loop().call_later(self.delay, self._step, name)

    def _step(self, name: str) -> None:
        run = self._runs.get(name)
        if run is None:
            return
        if run.timer is not None:
            run.timer.cancel()
            run.timer = None
        if self.store.find("nodes", None, name) is None:
            self.forget(name)
            return
        if run.steps:
            self._label(name, run.config, run.steps.pop(0))
            self._schedule(name)
            return
        del self._runs[name]
        self._apply(name, run)

    def _label(self, name: str, config: str, state: str) -> dict[str, Any]:
        def change(n: dict[str, Any]) -> None:
            n["metadata"]["labels"].update({CONFIG_LABEL: config, STATE_LABEL: state})

        return self._write(name, change)

    def _write(self, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        cur = self.store.get("nodes", None, name)
        updated = copy.deepcopy(cur)
        change(updated)
        node = self.store.write_internal(RESOURCES["nodes"], ("", name), cur, updated)
        self.settle()
        return node

    def _apply(self, name: str, run: _Run) -> None:
        """``nvidia-mig-parted apply``: the new layout and ``success``, or ``failed`` and the
        old layout when pods took devices of the GPUs it changes meanwhile."""
        old = self.specs[name]
        new, new_layout = run.new, run.new.gpu.layout()
        busy = _in_use(self.devices, name, self.layouts.get(name), new_layout)
        if busy:
            log.warning(
                "node %s: the MIG manager cannot re-partition GPUs in use (by %s): %s=failed",
                name,
                ", ".join(busy),
                STATE_LABEL,
            )
            self._label(name, run.config, "failed")
            return
        old_gfd = _gfd_labels(old)

        def apply(n: dict[str, Any]) -> None:
            labels = n["metadata"]["labels"]
            kept = {k: v for k, v in labels.items() if k not in old_gfd}
            kept.update(_gfd_labels(new))
            kept.update({CONFIG_LABEL: run.config, STATE_LABEL: "success"})
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

        self.specs[name] = new
        if new_layout is not None:
            self.layouts[name] = new_layout
        self._write(name, apply)
