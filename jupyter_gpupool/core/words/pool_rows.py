"""What a pool is and holds, as the service lists it: its name among the pools, its definition,
and its row of ``GET api/v1/pools`` (gpuctl's columns, what can still be admitted, and the
shapes its nodes offer, :mod:`.shape_rows`).

Pure: read off the registry, the usage index and the reservations. The live state caches these
rows (:class:`jupyter_gpupool.service.state.ServiceState`); the API and the pages show them.
"""

from __future__ import annotations

from typing import Any

from ..documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ..pools.model import DEFAULT_POOL, Pool, Registry
from ..usage.index import PoolUsage, UsageIndex
from ..usage.reservations import Reservations
from .gpu_counts import counts_row
from .recut_rows import EXPECTED_SECONDS, recuts_under_way, with_coming
from .shape_rows import pool_shapes

JSON = dict[str, Any]


def pool_names(registry: Registry, index: UsageIndex) -> list[str]:
    """Defined pools in registry order, then pools that exist only as node labels; and
    ``default`` always (gpuctl lists it even when empty)."""
    names = list(registry.pools)
    names += [n for n in index.pool_names() if n not in registry.pools]
    if DEFAULT_POOL not in names:
        names.append(DEFAULT_POOL)
    return names


def pool_or_bare(registry: Registry, name: str) -> Pool:
    """The pool's definition; a pool that only exists as a node label is a bare, open pool."""
    return registry.pool(name) or Pool(name)


def pool_exists(registry: Registry, index: UsageIndex, name: str) -> bool:
    return name == DEFAULT_POOL or name in registry.pools or index.has_pool(name)


def whole_reserved(index: UsageIndex, reservations: Reservations, pool: str) -> dict[str, int]:
    """Whole GPUs held by reservations, per node of ``pool`` (not the ``nvidia.com/gpu`` units
    of nodes that share their GPUs: those are counted in the pool's shapes)."""
    held = reservations.pool_nodes(pool)
    return {node: n for node, n in held.items() if index.node_gpus_whole(node)}


def largest_free_block(index: UsageIndex, reservations: Reservations, pool: str, raw: int) -> int:
    """The most free whole GPUs on one schedulable node, GPUs held by reservations counted as
    used.

    ``raw`` is the index's answer without reservations. Reserved nodes are few (admission fills
    the fullest node first), so this looks at them one by one and at the groups' free-GPU
    counters only above the best block found so far.
    """
    held = whole_reserved(index, reservations, pool)
    if not held:
        return raw
    best = 0
    reserved_at: dict[tuple[int, int], int] = {}  # (group, raw free GPUs) -> reserved nodes
    for node, gpus in held.items():
        group = index.node_group(node)
        if group is None:
            continue
        free = index.node_free(node)
        key = (id(group), free)
        reserved_at[key] = reserved_at.get(key, 0) + 1
        best = max(best, free - gpus)
    for group in index.placement_groups(pool):
        if group.shape is not None:  # replicas, not whole GPUs
            continue
        gid = id(group)
        for free in range(len(group.counts) - 1, best, -1):
            if group.counts[free] > reserved_at.get((gid, free), 0):
                best = free
                break
    return best


#: Status of a defined pool none of whose listed nodes is in it any more (see ``nodes_taken_out``).
UNLABELED = "unlabeled"


def nodes_taken_out(pool: Pool, index: UsageIndex) -> list[JSON]:
    """Nodes the pool's document lists that are in the cluster but not in the pool, with the
    pool each is in now.

    gpupool labels a pool's nodes itself, so such a node had its pool label removed or changed
    outside gpupool: ``gpuctl delete pool`` removes the labels and leaves gpupool's document, which
    would otherwise make the pool look merely empty. Nodes missing from the cluster are not
    listed: nothing took them out of the pool.
    """
    out = []
    for host in pool.nodes:
        node = index.node(host)
        if node is not None and node.pool != pool.name:
            out.append({"name": host, "pool": node.pool})
    return out


def pool_summary(
    pool: Pool,
    usage: PoolUsage,
    index: UsageIndex,
    reservations: Reservations,
    configs: MigConfigs = DEFAULT_CONFIGS,
    recut_seconds: float = EXPECTED_SECONDS,
) -> JSON:
    """One row of ``GET api/v1/pools``: gpuctl's columns, and what can still be admitted
    (``configs``: the mig-parted configs a re-cut under way is read with; ``recut_seconds``:
    what a re-cut is expected to take)."""
    reserved = sum(whole_reserved(index, reservations, pool.name).values())
    taken_out = nodes_taken_out(pool, index)
    recuts = recuts_under_way(pool, index, configs, recut_seconds)
    status = usage.status
    if taken_out and usage.node_count == 0:
        status = UNLABELED  # not "empty": its document still lists nodes
    return {
        "name": pool.name,
        "description": pool.description,
        "status": status,
        # in GPU-equivalents, with the whole GPUs and the parts beside them (gpu_counts)
        **counts_row(usage.parts),
        # whole GPUs, as admission of whole GPUs counts them
        "gpu_reserved": reserved,
        "gpu_available": max(0, usage.gpu_free_schedulable - reserved),
        "gpu_borrowed": index.borrowed_gpus(pool.name),
        "node_count": usage.node_count,
        "schedulable_nodes": usage.schedulable_nodes,
        "gpu_types": list(usage.gpu_types),
        "largest_free_block": largest_free_block(
            index, reservations, pool.name, usage.largest_free_block
        ),
        "server_count": usage.servers,
        "pending_servers": usage.pending_servers,
        "placement": pool.placement,
        "platforms": [
            {"name": p.name, "gpu_type": p.gpu_type, "description": p.description}
            for p in pool.platforms.values()
        ],
        "default_platform": pool.default_platform,
        "limits": {
            "max_gpus": pool.limits.max_gpus,
            "min_gpus": pool.limits.min_gpus,
            "allowed_gpus": list(pool.limits.allowed_gpus),
        },
        "defined": pool.source is not None,
        "nodes_taken_out": taken_out,
        "shapes": with_coming(pool_shapes(index, reservations, pool.name, pool.shapes), recuts),
        # its nodes the MIG manager re-cuts now, at the service's asking (core/admission/recut)
        "recuts": recuts,
        # every shape its nodes offer, named in its file or not
        "shapes_offered": sorted({c.shape.id for c in index.shape_counts(pool.name)}),
    }
