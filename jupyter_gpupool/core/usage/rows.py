"""What the usage index returns: a pool's, a node's and a server's row, as the pages, the API and
reclaim see them. Frozen values, built on demand from the index's records.
"""

from __future__ import annotations

from dataclasses import dataclass

from .amounts import Amount


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
