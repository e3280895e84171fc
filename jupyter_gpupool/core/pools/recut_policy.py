"""A pool file's ``recut``: the nodes whose MIG layouts the service may change, and how.

::

    recut:
      nodes: [gpu-node-2]                 # of this pool's nodes
      configs: [all-disabled, all-1g.10gb, all-balanced]   # mig-parted config names
      home: all-disabled                  # the layout a node goes back to (default: the first)
      unused: 30m                         # back home after its instances stood unused this long
      interval: 10m                       # at most one change per node in this interval

The service writes one of ``configs`` to a node's ``nvidia.com/mig.config`` label, for the
MIG manager of NVIDIA's GPU operator to apply (``core/admission/recut.py`` decides when;
docs/pools.md#re-cutting-mig-layouts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..documents.durations import duration_seconds
from ..documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ..documents.spec import Checker, Field, ListOf, Record, Str
from ..documents.yaml_reader import PathElem
from ..usage.labels import NODE_RECUT_AT, NODE_RECUT_FOR
from ..usage.shapes import cut_units

#: The MIG manager's labels: the config asked for, and its state (docs/shapes.md)
CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
#: The service's own, beside them (``core/usage/labels.py``)
RECUT_AT_LABEL = NODE_RECUT_AT
RECUT_FOR_LABEL = NODE_RECUT_FOR
#: A re-cut's state while it is under way
UNDER_WAY = ("pending", "rebooting")

DEFAULT_UNUSED = "30m"
DEFAULT_INTERVAL = "10m"

RECUT = Record(
    description="Nodes whose MIG layouts the service may change to follow demand, among named "
    "mig-parted configs (the MIG manager of NVIDIA's GPU operator applies them).",
    fields=(
        Field(
            "nodes",
            ListOf(
                item=Str(nonempty=True),
                unique=True,
                description="The pool's nodes it may re-cut (each with no GPU pod on it).",
            ),
            required=True,
        ),
        Field(
            "configs",
            ListOf(
                item=Str(syntax="label-value", nonempty=True),
                unique=True,
                description="The mig-parted configs it may choose among.",
            ),
            required=True,
        ),
        Field(
            "home",
            Str(
                syntax="label-value",
                nonempty=True,
                description="The config a node goes back to. Default: the first of configs.",
            ),
        ),
        Field(
            "unused",
            Str(
                syntax="duration",
                description="Back home after its instances stood unused this long. Default "
                f"{DEFAULT_UNUSED}.",
            ),
        ),
        Field(
            "interval",
            Str(
                syntax="duration",
                description=f"At most one change per node in this long. Default {DEFAULT_INTERVAL}.",
            ),
        ),
    ),
)


@dataclass(frozen=True)
class RecutPolicy:
    """What a pool lets the service re-cut (its file's ``recut``)."""

    nodes: tuple[str, ...]
    configs: tuple[str, ...]
    home: str
    unused: str = DEFAULT_UNUSED
    interval: str = DEFAULT_INTERVAL

    @property
    def unused_seconds(self) -> float:
        return duration_seconds(self.unused)

    @property
    def interval_seconds(self) -> float:
        return duration_seconds(self.interval)


def read_recut(
    c: Checker, data: Mapping[str, Any], pool_nodes: Mapping[str, str], path: tuple[PathElem, ...]
) -> RecutPolicy | None:
    """A checked ``recut`` section (its shape is checked by :data:`RECUT`); None when it has
    problems, which are added to ``c`` at their lines."""
    nodes = tuple(data.get("nodes") or ())
    configs = tuple(data.get("configs") or ())
    if not nodes or not configs:
        return None  # reported by the shape
    ok = True
    if pool_nodes:
        for i, node in enumerate(nodes):
            if node not in pool_nodes:
                c.add((*path, "nodes", i), f"{node!r} is not one of this pool's nodes")
                ok = False
    home = data.get("home") or configs[0]
    if home not in configs:
        c.add((*path, "home"), f"{home!r} must be one of configs ({', '.join(configs)})")
        ok = False
    for key in ("unused", "interval"):
        try:
            duration_seconds(data.get(key) or "1s")
        except ValueError:
            ok = False  # reported by the shape
    if not ok:
        return None
    return RecutPolicy(
        nodes,
        configs,
        home,
        data.get("unused") or DEFAULT_UNUSED,
        data.get("interval") or DEFAULT_INTERVAL,
    )


def recut_to_dict(policy: RecutPolicy) -> dict[str, Any]:
    """The ``recut`` section that reads back as ``policy`` (defaults left out)."""
    out: dict[str, Any] = {"nodes": list(policy.nodes), "configs": list(policy.configs)}
    if policy.home != policy.configs[0]:
        out["home"] = policy.home
    if policy.unused != DEFAULT_UNUSED:
        out["unused"] = policy.unused
    if policy.interval != DEFAULT_INTERVAL:
        out["interval"] = policy.interval
    return out


def could_make(
    policy: RecutPolicy,
    labels_of: Callable[[str], Mapping[str, str]],
    configs: MigConfigs = DEFAULT_CONFIGS,
) -> dict[str, list[str]]:
    """Per shape id, the policy's nodes that one of its configs would cut to offer it (read
    as GFD describes each node: product and GPU count), whatever runs on them now: what a
    re-cut could make (``core/admission/recut.could_offer`` asks the same of one shape)."""
    out: dict[str, list[str]] = {}
    for name in policy.nodes:
        labels = labels_of(name)
        made: set[str] = set()
        for config in policy.configs:
            made.update(cut_units(labels, config, configs) or {})
        for shape in sorted(made):
            out.setdefault(shape, []).append(name)
    return out
