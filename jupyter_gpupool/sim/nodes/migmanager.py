"""Re-partitioning a simulated node's MIG GPUs, as NVIDIA's MIG manager does.

NVIDIA's MIG manager (mig-parted's ``cmd/nvidia-mig-manager/main.go``, running
``pkg/mig/reconfigure/reconfigure.go``, earlier ``reconfigure-mig.sh``) watches the node's
``nvidia.com/mig.config`` label and acts when its value changes: a name its config file does
not have ends ``failed``, a config already applied ``success``, anything else goes ``pending``,
stops the GPU operator's clients on the node, and applies the MIG mode first. When the mode
cannot change in place and it may reboot (``WITH_REBOOT``), it sets ``rebooting`` and reboots;
started again, it finds the mode applied, sets ``pending`` once more and goes on. Then it applies
the layout and ends in ``success``, or ``failed`` when the apply fails. It does not look at user
pods first: NVML will not destroy a GPU instance in use, so the apply fails and the node keeps its
old layout. Only the device plugin, started again at the end, advertises the new instances.
Changes of the label while it works are taken up afterwards, the latest value only.

:class:`MigManager` does the same (:mod:`.migplan` says what, step by step) when any client
changes the label through the API, and when :meth:`MigManager.repartition` asks for a layout
itself; one node update per state, ``delay`` seconds apart: the simulated GPUs change MIG mode
only by rebooting (every GPU that enters or leaves MIG mode), so such a change goes ``pending``,
``rebooting``, ``pending``, ``success``; any other ``pending``, ``success``. The new
allocatable, capacity and GFD labels come in the update after ``success``, as the device plugin
and GFD, started again, write them after the MIG manager's last word. The reboot itself
(the node NotReady, its pods gone) is not simulated.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import yaml

from ...core.documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ...core.documents.yaml_reader import DocumentError
from ..objects.errors import ApiError
from ..objects.resources import RESOURCES
from ..objects.store import Store
from ..objects.watches import WatchEvent
from .gpudevices import GPUDevices
from .migplan import CONFIG_LABEL, STATE_LABEL, node_labels, node_resources, plan
from .partitions import Layout
from .spec import NodeSpec, parse_cluster

log = logging.getLogger(__name__)

__all__ = ["BUSY_STATES", "CONFIG_LABEL", "STATE_LABEL", "MigManager"]

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


def _changed_gpus(old: Layout | None, new: Layout | None) -> frozenset[int]:
    """The GPUs a re-partition to ``new`` may change: those in MIG mode before or after."""
    return frozenset((old.mig_gpus() if old else set()) | (new.mig_gpus() if new else set()))


@dataclasses.dataclass
class _Run:
    """One node's re-partition under way: the states still to write, then the apply."""

    new: NodeSpec | None  # None: the layout stays
    config: str
    steps: list[str]  # states to write before the apply ("rebooting", "pending")
    touched: frozenset[int]  # the GPUs it changes: the apply fails while pods hold them
    end: str = "success"  # or "failed", for ``reason``
    reason: str | None = None
    own_label: bool = False  # repartition(): the manager writes nvidia.com/mig.config itself
    timer: asyncio.TimerHandle | None = None


class MigManager:
    """The MIG manager of every simulated GPU node (see the module's words).

    ``delay``: seconds between two of a re-partition's node updates (0 still lets the caller
    see ``pending`` first: each step runs on a later turn of the event loop). ``configs``: the
    mig-parted configs the label names (the GPU operator's default file's when not given).
    """

    def __init__(
        self,
        store: Store,
        devices: GPUDevices,
        specs: MutableMapping[str, NodeSpec],
        layouts: MutableMapping[str, Layout],
        settle: Callable[[], None],
        delay: float = 0.05,
        configs: MigConfigs | None = None,
    ):
        self.store = store
        self.devices = devices
        self.specs = specs
        self.layouts = layouts
        self.settle = settle
        self.delay = delay
        self.configs: MigConfigs = DEFAULT_CONFIGS if configs is None else configs
        self._runs: dict[str, _Run] = {}
        self._queued: dict[str, str] = {}  # the label's latest value, not yet taken up
        self._taken: dict[str, str] = {}  # the value each node's manager took up last
        self._due: set[str] = set()  # nodes whose queued value a turn of the loop takes up
        self._writing = False  # the manager's own node update is being committed

    def start(self) -> None:
        """Follow the nodes' ``nvidia.com/mig.config`` labels (values set before, too)."""
        if self._on_event not in self.store.listeners:
            self.store.listeners.append(self._on_event)
        for name in list(self._queued):
            self._take_soon(name)

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
        self._taken[name] = config
        self._queued.pop(name, None)
        node = self._label(name, "pending", config)
        busy = self.devices.pods_on(name, _changed_gpus(old_layout, new_layout))
        if busy:
            self._label(name, "failed", config)
            reason = (
                f"node {name}: the MIG manager cannot re-partition GPUs in use "
                f"(by {', '.join(busy)}): {STATE_LABEL}=failed, the layout is unchanged"
            )
            log.warning("%s", reason)
            raise ApiError(409, reason, "Conflict")
        old_mode = old_layout.mig_gpus() if old_layout else set()
        new_mode = new_layout.mig_gpus() if new_layout else set()
        steps = ["rebooting", "pending"] if old_mode != new_mode else []
        touched = _changed_gpus(old_layout, new_layout)
        self._runs[name] = _Run(new, config, steps, touched, own_label=True)
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
        node as it ends (``success``, or ``failed`` when pods took its GPUs meanwhile). A label
        change taken up on a later turn of the event loop is not part of it."""
        while name in self._runs:
            self._step(name)
        return self.store.get("nodes", None, name)

    def forget(self, name: str) -> None:
        """Drop node ``name``'s re-partition and label changes (the node was removed)."""
        run = self._runs.pop(name, None)
        if run is not None and run.timer is not None:
            run.timer.cancel()
        self._queued.pop(name, None)
        self._taken.pop(name, None)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.listeners.remove(self._on_event)
        for name in list(self._runs):
            self.forget(name)

    # ---- the label ------------------------------------------------------------------------------

    def _on_event(self, ev: WatchEvent) -> None:
        """A node's ``nvidia.com/mig.config`` changed (by any client; not the manager's own
        write): its manager takes the value up on a later turn of the event loop, or when the
        re-partition under way ends. As mig-parted's, an empty value is not taken up."""
        if ev.resource != "nodes" or ev.type != "MODIFIED" or self._writing:
            return
        old = ((ev.old or {}).get("metadata") or {}).get("labels") or {}
        labels = ev.obj["metadata"].get("labels") or {}
        value = labels.get(CONFIG_LABEL)
        if value == old.get(CONFIG_LABEL) or not value:
            return
        name = ev.obj["metadata"]["name"]
        self._taken.setdefault(name, old.get(CONFIG_LABEL) or "")
        self._queued[name] = value
        if name not in self._runs:
            self._take_soon(name)

    def _take_soon(self, name: str) -> None:
        if name in self._due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving yet: start() takes it up
        self._due.add(name)
        loop.call_soon(self._take, name)

    def _take(self, name: str) -> None:
        """Take up node ``name``'s latest label value, as mig-parted's ``Run`` does."""
        self._due.discard(name)
        if name in self._runs:
            return  # the run's end takes it up
        config = self._queued.pop(name, None)
        spec = self.specs.get(name)
        if config is None or config == self._taken.get(name) or spec is None:
            return
        if self.store.find("nodes", None, name) is None:
            return
        self._taken[name] = config
        p = plan(spec, config, self.configs)
        if not p.steps:
            if p.reason:
                log.warning("%s: %s=failed", p.reason, STATE_LABEL)
            self._label(name, p.end)
            return
        busy = self.devices.pods_on(name, p.touched)
        if busy:
            log.warning(
                "node %s: the MIG manager cannot re-partition GPUs in use (by %s): %s=failed, "
                "the layout is unchanged",
                name,
                ", ".join(busy),
                STATE_LABEL,
            )
            self._label(name, "pending")
            self._label(name, "failed")
            return
        self._label(name, p.steps[0])
        self._runs[name] = _Run(p.new, config, list(p.steps[1:]), p.touched, p.end, p.reason)
        self._schedule(name)

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
            self._label(name, run.steps.pop(0), run.config if run.own_label else None)
            self._schedule(name)
            return
        del self._runs[name]
        self._apply(name, run)
        if name in self._queued:
            self._take_soon(name)

    def _label(self, name: str, state: str, config: str | None = None) -> dict[str, Any]:
        """Write the state (and, for :meth:`repartition`, the config) label."""
        wanted = {STATE_LABEL: state, **({CONFIG_LABEL: config} if config else {})}

        def change(n: dict[str, Any]) -> None:
            n["metadata"].setdefault("labels", {}).update(wanted)

        return self._write(name, change)

    def _write(self, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        cur = self.store.get("nodes", None, name)
        updated = copy.deepcopy(cur)
        change(updated)
        self._writing = True
        try:
            node = self.store.write_internal(RESOURCES["nodes"], ("", name), cur, updated)
        finally:
            self._writing = False
        self.settle()
        return node

    def _apply(self, name: str, run: _Run) -> None:
        """``nvidia-mig-parted apply``: the new layout and ``success``, or ``failed`` and the
        old layout when it cannot be, or when pods took devices of the GPUs it changes
        meanwhile."""
        config = run.config if run.own_label else None
        busy = self.devices.pods_on(name, run.touched)
        if busy or run.end == "failed":
            why = run.reason or f"node {name}"
            if busy:
                why = f"node {name}: the MIG manager cannot re-partition GPUs in use (by {', '.join(busy)})"
            log.warning("%s: %s=failed, the layout is unchanged", why, STATE_LABEL)
            self._label(name, "failed", config)
            return
        old, new = self.specs[name], run.new
        if new is None:
            self._label(name, "success", config)
            return

        def apply(n: dict[str, Any]) -> None:
            n["metadata"]["labels"] = node_labels(n["metadata"].get("labels") or {}, old, new)
            for key in ("capacity", "allocatable"):
                n["status"][key] = node_resources(n["status"].get(key) or {}, new)

        # ``success`` first: the MIG manager sets it once it has started the device plugin and
        # GFD again, which then advertise the new devices and label them (the next update)
        self._label(name, "success", config)
        old_layout, new_layout = self.layouts.get(name), new.gpu.layout()
        self.devices.relayout(name, old_layout, new_layout)
        self.specs[name] = new
        if new_layout is None:
            self.layouts.pop(name, None)
        else:
            self.layouts[name] = new_layout
        self._write(name, apply)
