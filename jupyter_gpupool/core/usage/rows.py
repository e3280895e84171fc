"""What the usage index returns: a pool's, a node's and a server's row, as the pages, the API and
reclaim see them. Frozen values, built on demand from the index's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .amounts import Amount


@dataclass(frozen=True)
class GPUPart:
    """What a node (or a pool, summed over its nodes) holds of one kind of GPU, in the units a
    pod asks for and in GPU-equivalents (physical GPUs: a MIG 1g.10gb of an A100 is 1/7, one
    replica of a GPU time-sliced in 4 is 1/4, so the four replicas are 1 GPU).

    ``kind`` is the shape's kind (``whole``, ``mig``, ``shared-time-slicing``, ``shared-mps``,
    ``hami``); ``replicas`` the replicas per GPU of shared GPUs (1 otherwise): a pool with
    A10s time-sliced in 4 and in 2 has one part for each. ``units``/``units_used`` count the
    device plugin's units (GPUs, MIG instances, replicas, slices); ``equivalents`` and
    ``equivalents_used`` their GPU-equivalents."""

    kind: str
    replicas: int
    units: int
    units_used: int
    equivalents: Amount
    equivalents_used: Amount


@dataclass(frozen=True)
class PoolUsage:
    """A pool's row on the pools page (gpuctl's ``get pools`` columns and more)."""

    name: str
    status: str  # active | degraded | unavailable | empty
    gpu_total: int
    gpu_used: int
    gpu_free: int
    gpu_free_schedulable: int
    largest_free_block: int
    node_count: int
    schedulable_nodes: int
    gpu_types: tuple[str, ...]
    servers: int
    pending_servers: int
    #: Its nodes' GPUs by kind (:class:`GPUPart`, summed over its nodes); ``gpu_total`` and the
    #: counts above count whole GPUs only
    parts: tuple[GPUPart, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class NodeUsage:
    """A node's row on the nodes page, with its status reasons."""

    name: str
    pool: str
    gpu_type: str
    gpu_total: int
    gpu_used: int
    gpu_free: int
    status: str  # kubectl's wording: Ready, NotReady, Ready,SchedulingDisabled
    reasons: tuple[str, ...]
    schedulable: bool
    pods: int
    #: Its GPUs by kind (:class:`GPUPart`), whole GPUs first; ``gpu_total``, ``gpu_used`` and
    #: ``gpu_free`` count ``nvidia.com/gpu`` units, whatever they are (replicas, MIG devices)
    parts: tuple[GPUPart, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class ServerUsage:
    """A server pod as the pages and reclaim see it."""

    namespace: str
    name: str
    user: str
    server: str
    pool: str | None
    node: str | None
    gpus: int
    state: str  # pending | starting | running | terminating
    over_quota: bool
    charged: str | None
    admission: str | None
    platform: str | None
    created: str
    uid: str = ""
    #: The shape it was admitted with when not whole GPUs (``mig-1g.10gb``, ``shared-4``...)
    shape: str | None = None
    #: Units of any GPU resource it asks for: ``gpus`` (``nvidia.com/gpu``) plus MIG devices
    #: and renamed shared GPUs; a server has a GPU of some shape when this is not 0
    units: int = 0
    #: What it counts against quotas, GPU-hours and budgets, in GPU-equivalents
    equivalents: Amount = 0
