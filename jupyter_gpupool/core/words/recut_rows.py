"""What a pool says of its MIG re-cuts under way (:mod:`..admission.recut` decides them): the
pools API's ``recuts``, the words on a shape that more of it is coming, a waiting request's
words while a re-cut will bring what it waits for, and the shapes that only a re-cut would
offer as the launch options list them (:func:`recut_shape_rows`).

All of it is read from the nodes' labels (the config asked for, the MIG manager's state, the
service's :data:`~..pools.recut_policy.RECUT_AT_LABEL`), so it is what the cluster says, and
the same after the service restarts. "Expected by" is the asking time plus what re-cuts took
lately (the re-cut watch's mean, :data:`EXPECTED_SECONDS` before any ended), a clock time, so a
cached row stays true until a re-cut ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ..pools.model import Pool
from ..pools.recut_policy import (
    CONFIG_LABEL,
    RECUT_AT_LABEL,
    STATE_LABEL,
    UNDER_WAY,
    could_make,
)
from ..time.wait_estimate import minutes_text
from ..usage.index import UsageIndex
from ..usage.shapes import MIG, WHOLE, config_units, cut_shape
from .gpu_use import clock_words
from .shape_rows import shape_row

JSON = dict[str, Any]

#: What a re-cut is expected to take before any was seen to end (the MIG manager restarts the
#: device plugin, GFD and the DCGM exporter on the node; a change of MIG mode also reboots it)
EXPECTED_SECONDS = 120.0


def brings(labels: Mapping[str, str], configs: MigConfigs = DEFAULT_CONFIGS) -> dict[str, int]:
    """What a node will offer once its ``nvidia.com/mig.config`` is applied, by shape id."""
    return config_units(labels, configs) or {}


def recuts_under_way(
    pool: Pool,
    index: UsageIndex,
    configs: MigConfigs = DEFAULT_CONFIGS,
    expected: float = EXPECTED_SECONDS,
) -> list[JSON]:
    """The pool's nodes the MIG manager is re-cutting now (those its ``recut`` names), each
    with what it brings as ``configs`` cut it, and when it should end (``expected`` seconds
    after it was asked)."""
    if pool.recut is None:
        return []
    out = []
    for name in pool.recut.nodes:
        labels = index.node_labels(name)
        if labels.get(STATE_LABEL) not in UNDER_WAY or not labels.get(CONFIG_LABEL):
            continue
        try:
            asked = float(labels.get(RECUT_AT_LABEL) or "")
        except ValueError:
            asked = None
        out.append(
            {
                "node": name,
                "config": labels[CONFIG_LABEL],
                "state": labels[STATE_LABEL],
                "asked_at": asked,
                "expected_at": asked + expected if asked is not None else None,
                "brings": brings(labels, configs),
            }
        )
    return out


def with_coming(shapes: Iterable[JSON], recuts: Iterable[JSON]) -> list[JSON]:
    """The pool's shape rows, each that a re-cut under way brings more of saying so:
    ``MIG 1g.10gb: 0 free now, 56 more expected by 10:03 UTC (gpu-node-2 is re-cut)``."""
    recuts = list(recuts)
    out = []
    for row in shapes:
        mine = [r for r in recuts if r["brings"].get(row["id"])]
        if mine:
            more = sum(r["brings"][row["id"]] for r in mine)
            at = max((r["expected_at"] for r in mine if r["expected_at"] is not None), default=None)
            when = f" expected by {clock_words(at, at)}" if at is not None else ""
            nodes = ", ".join(r["node"] for r in mine)
            row = {
                **row,
                "coming": more,
                "text": f"{row['text']} now, {more} more{when} ({nodes} is re-cut)",
            }
        out.append(row)
    return out


def waiting_for_recut(
    choices: Iterable[tuple[str, str | None]],
    registry_pools: Mapping[str, Pool],
    index: UsageIndex,
    configs: MigConfigs = DEFAULT_CONFIGS,
) -> str | None:
    """``waiting for gpu-node-2 to be re-cut into 1g.10gb instances`` when a re-cut under way
    in one of a waiting request's pools brings the shape it asks there, else None."""
    for pool_name, shape in choices:
        pool = registry_pools.get(pool_name)
        if pool is None:
            continue
        wanted = shape or WHOLE
        for r in recuts_under_way(pool, index, configs):
            if r["brings"].get(wanted):
                if wanted == WHOLE:
                    return f"waiting for {r['node']} to go back to whole GPUs"
                profile = wanted.removeprefix("mig-")
                return f"waiting for {r['node']} to be re-cut into {profile} instances"
    return None


def recut_shape_rows(
    pool: Pool,
    index: UsageIndex,
    expected_seconds: float,
    now: float,
    configs: MigConfigs = DEFAULT_CONFIGS,
) -> list[JSON]:
    """The launch options' rows of the MIG shapes that no node of the pool offers now and that
    its ``recut`` lets the service cut one of its nodes into (a shape its file lets in): each
    with 0 free, ``recut: true`` and ``ready_in_s``, the seconds until a re-cut should bring it
    (``expected_seconds`` from now; what is left of that for a re-cut under way that brings it,
    asked at its node's :data:`~..pools.recut_policy.RECUT_AT_LABEL`):
    ``MIG 1g.10gb: 0 free now, more in about 2 min``. Whether a node is free to be re-cut
    (no GPU pod on it, its interval passed) is not asked: the line re-cuts it once it is."""
    if pool.recut is None:
        return []
    offered = {c.shape.id for c in index.shape_counts(pool.name)}
    rules = {r.id: r.name for r in pool.shapes}
    under_way = recuts_under_way(pool, index, configs)
    out = []
    for shape_id, nodes in could_make(pool.recut, index.node_labels, configs).items():
        if not shape_id.startswith(f"{MIG}-") or shape_id in offered:
            continue
        if not pool.offers_shape(shape_id):
            continue
        shape = cut_shape(shape_id, index.node_labels(nodes[0]))
        if shape is None:
            continue
        mine = [r for r in under_way if r["brings"].get(shape_id)]
        ready = expected_seconds
        if mine:
            ready = min(
                expected_seconds
                if r["asked_at"] is None
                else r["asked_at"] + expected_seconds - now
                for r in mine
            )
        ready = max(0.0, ready)
        row = shape_row(shape, 0, 0, 0, rules.get(shape_id))
        if mine:
            more = sum(r["brings"][shape_id] for r in mine)
            names = ", ".join(r["node"] for r in mine)
            coming = f"{more} more in about {minutes_text(ready)} ({names} is re-cut)"
        else:
            coming = f"more in about {minutes_text(ready)}"
        row.update(
            text=f"{row['text']} now, {coming}",
            recut=True,
            ready_in_s=round(ready),
            recut_nodes=list(nodes),
        )
        out.append(row)
    return out
