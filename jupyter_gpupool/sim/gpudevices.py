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
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.quantities import parse_quantity
from .store import Store

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia.com/gpu"
_GPU_UUIDS = uuid.UUID("5d0c3a4e-7a0b-4c55-9a43-2f6a0d1e8b17")  # a fixed namespace for uuid5


def gpu_uuid(node: str, index: int) -> str:
    """The UUID of GPU ``index`` of ``node``, as NVML names GPUs (``GPU-`` + a UUID): stable for a
    node name and index, so the same GPU keeps its UUID across restarts of the simulator."""
    return f"GPU-{uuid.uuid5(_GPU_UUIDS, f'{node}/{index}')}"


def container_gpus(container: Mapping[str, Any]) -> int:
    """How many ``nvidia.com/gpu`` a container asks for (its limit; requests equal limits)."""
    res = container.get("resources") or {}
    want = (res.get("limits") or {}).get(
        GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE)
    )
    return int(parse_quantity(want)) if want is not None else 0


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

    def __init__(self, capacity: Callable[[str], int | None] | None = None):
        self._capacity = capacity or (lambda node: None)
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
