"""What a pool says of its MIG re-cuts under way (:mod:`..admission.recut` decides them): the
pools API's ``recuts``, the words on a shape that more of it is coming, and a waiting
request's words while a re-cut will bring what it waits for.

All of it is read from the nodes' labels (the config asked for, the MIG manager's state, the
service's :data:`~..pools.recut_policy.RECUT_AT_LABEL`), so it is what the cluster says, and
the same after the service restarts. "Expected by" is the asking time plus
:data:`EXPECTED_SECONDS`, a clock time, so a cached row stays true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ..pools.model import Pool
from ..pools.recut_policy import CONFIG_LABEL, RECUT_AT_LABEL, STATE_LABEL, UNDER_WAY
from ..usage.index import UsageIndex
from ..usage.shapes import WHOLE, config_units
from .gpu_use import clock_words

JSON = dict[str, Any]

#: What a re-cut is expected to take (the MIG manager restarts the device plugin, GFD and the
#: DCGM exporter on the node; a change of MIG mode also reboots it)
EXPECTED_SECONDS = 120.0


def brings(labels: Mapping[str, str], configs: MigConfigs = DEFAULT_CONFIGS) -> dict[str, int]:
    """What a node will offer once its ``nvidia.com/mig.config`` is applied, by shape id."""
    return config_units(labels, configs) or {}


def recuts_under_way(pool: Pool, index: UsageIndex) -> list[JSON]:
    """The pool's nodes the MIG manager is re-cutting now (those its ``recut`` names)."""
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
                "expected_at": asked + EXPECTED_SECONDS if asked is not None else None,
                "brings": brings(labels),
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
    choices: Iterable[tuple[str, str | None]], registry_pools: Mapping[str, Pool], index: UsageIndex
) -> str | None:
    """``waiting for gpu-node-2 to be re-cut into 1g.10gb instances`` when a re-cut under way
    in one of a waiting request's pools brings the shape it asks there, else None."""
    for pool_name, shape in choices:
        pool = registry_pools.get(pool_name)
        if pool is None:
            continue
        wanted = shape or WHOLE
        for r in recuts_under_way(pool, index):
            if r["brings"].get(wanted):
                if wanted == WHOLE:
                    return f"waiting for {r['node']} to go back to whole GPUs"
                profile = wanted.removeprefix("mig-")
                return f"waiting for {r['node']} to be re-cut into {profile} instances"
    return None
