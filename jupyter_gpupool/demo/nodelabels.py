"""The demo cluster's node labels, kept in the state directory from one start to the next.

The simulated cluster is made afresh from its cluster file at each start, but an admin's work in
the demo is mostly node labels: a node moved to another pool (``gpupool label node``, ``kubectl
label``), the nodes of a new pool (``gpupool create -f`` labels them). The pool files themselves
stay in ``STATE/pools`` (see :func:`.run.demo_pools_dir`); without their labels, a restarted
demo would show the pools with the nodes of the cluster file. So the demo writes, whenever a
node's labels change, how each node's labels differ from the cluster file to
``STATE/node-labels.json``, and applies that on the next start. A new state directory has no such
file and starts from the cluster file alone.

Only nodes of the cluster file are kept: a node the cluster file no longer has is left out.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..sim import SimCluster
from ..sim.objects.watches import WatchEvent

#: In the state directory: per node, the labels that differ from the cluster file.
NODE_LABELS_FILE = "node-labels.json"

#: A label set to a value, or ``None``: the cluster file's label was removed.
Changes = dict[str, dict[str, str | None]]


def label_changes(base: Mapping[str, str], now: Mapping[str, str]) -> dict[str, str | None]:
    """What turns ``base`` into ``now``: new or changed values, and ``None`` for removed keys."""
    changes: dict[str, str | None] = {k: v for k, v in now.items() if base.get(k) != v}
    changes.update({k: None for k in base if k not in now})
    return changes


def read_changes(path: Path) -> Changes:
    """The file's changes; none if there is no file. A file that is not what the demo writes
    stops the start rather than be overwritten: it holds an admin's work."""
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return {}
    problem = f"{path} is not the demo's node labels; move it away to start from the cluster file"
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise RuntimeError(f"{problem} ({e})") from None
    ok = isinstance(data, dict) and all(
        isinstance(node, str)
        and isinstance(labels, dict)
        and all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in labels.items())
        for node, labels in data.items()
    )
    if not ok:
        raise RuntimeError(problem)
    return data


def write_changes(path: Path, changes: Changes) -> None:
    # replaced in one step: a demo killed while writing leaves the old file, not half a new one
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(changes, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


class NodeLabelKeeper:
    """Restores the saved node labels into a cluster that has not started, then saves them on
    each change until :meth:`stop`."""

    def __init__(self, cluster: SimCluster, path: Path):
        self.cluster = cluster
        self.path = path
        # what the cluster file gives each node, as the simulated kubelet registered it
        self.base = {spec.name: spec.all_labels() for spec in cluster.spec.nodes}
        self._written: Changes | None = None

    def restore(self) -> list[str]:
        """Apply the saved changes; the names of the nodes that had some."""
        saved = read_changes(self.path)
        restored = []
        for name, changes in sorted(saved.items()):
            if name not in self.base or not changes:
                continue
            for key, value in changes.items():
                self.cluster.label_node(name, key, value)
            restored.append(name)
        self._written = saved
        return restored

    def start(self) -> None:
        self.cluster.store.listeners.append(self._on_change)

    def stop(self) -> None:
        if self._on_change in self.cluster.store.listeners:
            self.cluster.store.listeners.remove(self._on_change)

    def current(self) -> Changes:
        changes: Changes = {}
        for name, base in self.base.items():
            node = self.cluster.store.find("nodes", None, name)
            if node is None:
                continue
            diff = label_changes(base, node["metadata"].get("labels") or {})
            if diff:
                changes[name] = diff
        return changes

    def _on_change(self, ev: WatchEvent) -> None:
        # called by the store on every write: only a node whose labels changed is worth a save
        if ev.resource != "nodes" or ev.obj["metadata"]["name"] not in self.base:
            return
        old = (ev.old or {}).get("metadata", {}).get("labels")
        if ev.type == "MODIFIED" and old == ev.obj["metadata"].get("labels"):
            return
        changes = self.current()
        if changes == self._written:
            return
        try:
            write_changes(self.path, changes)
        except OSError as e:
            # the cluster's own write has happened: say what will not survive a restart
            print(f"gpupool demo: cannot keep node labels in {self.path}: {e}", file=sys.stderr)
            return
        self._written = changes
