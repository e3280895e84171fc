"""The simulated kubelet's device manager for ``nvidia.com/gpu``: which GPUs each pod holds.

As the kubelet's device manager with NVIDIA's device plugin, :class:`GPUDevices` gives each
container that asks for ``nvidia.com/gpu`` whole GPUs of its node when the kubelet admits the pod
(the lowest free indices, in the order pods are bound), and takes them back when the pod finishes
or goes away. A process gets ``NVIDIA_VISIBLE_DEVICES`` with their UUIDs (:func:`gpu_uuid`), as
the device plugin's default ``envvar`` strategy sets it; the simulated DCGM exporter
(:mod:`.dcgm`) reads the same table, as the real one asks the kubelet's pod-resources API.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...core.kube.quantities import parse_quantity
from ..objects.store import Store
from .partitions import Layout, Unit, gpu_uuid, is_device_resource

__all__ = ["GPUDevices", "GPUHolder", "container_gpus", "gpu_uuid", "store_gpu_capacity"]

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia.com/gpu"


def container_devices(container: Mapping[str, Any]) -> dict[str, int]:
    """The device-plugin resources a container asks for (``nvidia.com/gpu``, ``nvidia.com/gpu.
    shared``, ``nvidia.com/mig-…``), by name: its limits (requests equal limits)."""
    res = container.get("resources") or {}
    asked = dict(res.get("requests") or {})
    asked.update(res.get("limits") or {})
    out = {}
    for name, q in asked.items():
        if is_device_resource(name) and q is not None:
            n = int(parse_quantity(q))
            if n > 0:
                out[name] = n
    return out


def container_gpus(container: Mapping[str, Any]) -> int:
    """How many devices (whole GPUs, MIG instances, shared replicas) a container asks for."""
    return sum(container_devices(container).values())


@dataclass(frozen=True)
class GPUHolder:
    """Who holds a GPU: the pod (by uid, namespace and name) and its container."""

    uid: str
    namespace: str
    pod: str
    container: str


class GPUDevices:
    """The kubelet's device manager for ``nvidia.com/gpu``: which GPUs of each node each container
    holds.

    A pod's containers get the lowest free indices of its node, in container order, when the
    kubelet first sees the pod bound (admission); pods are seen in the order they are bound. The
    GPUs are freed when the pod reaches Succeeded or Failed or is deleted. Init containers get none
    (the real device manager lends theirs to the app containers afterwards). ``capacity(node)`` is
    the node's allocatable ``nvidia.com/gpu`` (None: unknown, no bound); a pod that asks for more
    than are free is logged and holds none, where the real kubelet would reject it
    (``UnexpectedAdmissionError``).
    """

    def __init__(
        self,
        capacity: Callable[[str], int | None] | None = None,
        layouts: Mapping[str, Layout] | None = None,
    ):
        self._capacity = capacity or (lambda node: None)
        #: partitioned nodes' layouts, by node name: their devices are the layout's units, each
        #: held by its index in ``Layout.units`` (whole-GPU nodes: the GPU's index)
        self.layouts: Mapping[str, Layout] = layouts if layouts is not None else {}
        self._nodes: dict[str, dict[int, GPUHolder]] = {}
        self._pods: dict[str, str] = {}  # pod uid -> node

    def allocate(self, pod: Mapping[str, Any]) -> dict[str, list[int]]:
        """Give the bound ``pod``'s containers their GPUs (once): ``{container: [index, ...]}``."""
        md = pod["metadata"]
        uid = md["uid"]
        if uid in self._pods:
            return self.of_pod(uid)
        node = (pod.get("spec") or {}).get("nodeName")
        containers = (pod.get("spec") or {}).get("containers") or []
        if node and node in self.layouts:
            return self._allocate_units(pod, node, containers)
        wants = [(c["name"], container_gpus(c)) for c in containers]
        wants = [(name, n) for name, n in wants if n > 0]
        if not node or not wants:
            return {}
        held = self._nodes.setdefault(node, {})
        total = sum(n for _, n in wants)
        capacity = self._capacity(node)
        bound = capacity if capacity is not None else len(held) + total
        free = [i for i in range(bound) if i not in held]
        if len(free) < total:
            log.warning(
                "pod %s/%s asks for %d %s on node %s, which has %d free: it holds none",
                md.get("namespace"),
                md.get("name"),
                total,
                GPU_RESOURCE,
                node,
                len(free),
            )
            return {}
        self._pods[uid] = node
        out = {}
        for name, n in wants:
            take, free = free[:n], free[n:]
            for i in take:
                held[i] = GPUHolder(uid, md.get("namespace", ""), md.get("name", ""), name)
            out[name] = take
        return out

    def _allocate_units(
        self, pod: Mapping[str, Any], node: str, containers: list[Any]
    ) -> dict[str, list[int]]:
        """As the device plugin of a partitioned node: each container gets the lowest free units
        of each resource it asks for (MIG instances, shared replicas)."""
        md = pod["metadata"]
        layout = self.layouts[node]
        held = self._nodes.setdefault(node, {})
        free: dict[str, list[int]] = {}
        for i, u in enumerate(layout.units):
            if i not in held:
                free.setdefault(u.resource, []).append(i)
        plan: list[tuple[str, list[int]]] = []
        for c in containers:
            take: list[int] = []
            for resource, n in sorted(container_devices(c).items()):
                have = free.get(resource, [])
                if len(have) < n:
                    log.warning(
                        "pod %s/%s asks for %d %s on node %s, which has %d free: it holds none",
                        md.get("namespace"),
                        md.get("name"),
                        n,
                        resource,
                        node,
                        len(have),
                    )
                    return {}
                take += have[:n]
                free[resource] = have[n:]
            if take:
                plan.append((c["name"], take))
        if not plan:
            return {}
        self._pods[md["uid"]] = node
        for name, take in plan:
            for i in take:
                held[i] = GPUHolder(md["uid"], md.get("namespace", ""), md.get("name", ""), name)
        return dict(plan)

    def unit(self, node: str, key: int) -> Unit | None:
        """The unit ``key`` of a partitioned node (None on a whole-GPU node)."""
        layout = self.layouts.get(node)
        if layout is None or not 0 <= key < len(layout.units):
            return None
        return layout.units[key]

    def gpu_index(self, node: str, key: int) -> int:
        """The physical GPU a held device is on."""
        unit = self.unit(node, key)
        return key if unit is None else unit.gpu

    def device_id(self, node: str, key: int) -> str:
        """What the device plugin puts in ``NVIDIA_VISIBLE_DEVICES`` for this device: the GPU's
        UUID, a MIG device's ``MIG-…`` UUID, or a shared replica's GPU's UUID."""
        layout = self.layouts.get(node)
        unit = self.unit(node, key)
        if layout is None or unit is None:
            return gpu_uuid(node, key)
        return layout.uuid(node, unit)

    def visible_devices(self, node: str, keys: list[int]) -> str:
        """``NVIDIA_VISIBLE_DEVICES`` for these devices (a GPU's UUID once, however many of its
        replicas)."""
        ids: list[str] = []
        for k in keys:
            d = self.device_id(node, k)
            if d not in ids:
                ids.append(d)
        return ",".join(ids)

    def release(self, uid: str) -> None:
        """The pod is done with its GPUs (finished or deleted)."""
        node = self._pods.pop(uid, None)
        if node is not None:
            held = self._nodes.get(node, {})
            for i in [i for i, h in held.items() if h.uid == uid]:
                del held[i]

    def of_pod(self, uid: str) -> dict[str, list[int]]:
        """The GPU indices each container of the pod holds (empty when it holds none)."""
        node = self._pods.get(uid)
        out: dict[str, list[int]] = {}
        for i, h in sorted(self._nodes.get(node or "", {}).items()):
            if h.uid == uid:
                out.setdefault(h.container, []).append(i)
        return out

    def in_order(self, uid: str) -> list[int]:
        """The pod's GPU indices container by container, each container's in the order of its
        ``NVIDIA_VISIBLE_DEVICES``."""
        return [i for indices in self.of_pod(uid).values() for i in indices]

    def node_of(self, uid: str) -> str | None:
        """The node whose GPUs the pod holds, or None."""
        return self._pods.get(uid)

    def holders(self, node: str) -> dict[int, GPUHolder]:
        """The GPUs of ``node`` that are held, by index."""
        return dict(self._nodes.get(node, {}))

    def pods_on(self, node: str, gpus: set[int] | frozenset[int]) -> list[str]:
        """The pods (``namespace/name``) holding devices of these physical GPUs of ``node``."""
        pods = {
            f"{h.namespace}/{h.pod}"
            for key, h in self._nodes.get(node, {}).items()
            if self.gpu_index(node, key) in gpus
        }
        return sorted(pods)

    def relayout(self, node: str, old: Layout | None, new: Layout | None) -> None:
        """Node ``node``'s layout changes from ``old`` to ``new`` (None: whole GPUs): the devices
        held, all on GPUs whose layout stays, are the same units under their new indices. Call
        it before ``layouts`` holds ``new``."""
        held = self._nodes.get(node)
        if not held:
            return

        def ident(layout: Layout | None, key: int) -> tuple[Any, ...]:
            if layout is None:
                return (key, GPU_RESOURCE, None, None, None)
            u = layout.units[key]
            return (u.gpu, u.resource, u.profile, u.gi, u.replica)

        where = {ident(new, i): i for i in range(len(new.units))} if new is not None else None
        moved = {}
        for key, holder in held.items():
            it = ident(old, key)
            to = where.get(it) if where is not None else (it[0] if it[2:] == (None,) * 3 else None)
            if to is not None:
                moved[to] = holder
        self._nodes[node] = moved


def store_gpu_capacity(store: Store) -> Callable[[str], int | None]:
    """A node's GPUs on the simulator's store: its allocatable ``nvidia.com/gpu`` (0 when the
    node is gone)."""

    def capacity(node: str) -> int | None:
        obj = store.find("nodes", None, node)
        if obj is None:
            return 0
        alloc = (obj.get("status") or {}).get("allocatable") or {}
        return int(parse_quantity(alloc.get(GPU_RESOURCE, "0")))

    return capacity
