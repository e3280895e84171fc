"""A cluster of partitioned GPU nodes for the spawner and notebook tests (issue 29): the service's
own answers (tests/real_answers.py) for nodes the simulator makes from a cluster file.

``slice-pool``: a MIG node (two A100-80GB, two 3g.40gb instances on one, the other left whole)
and a time-sliced node (two A10, 4 replicas each); ``mig-pool``: a node all in 1g.10gb instances
(no whole GPUs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import real_answers
import yaml

from jupyter_gpupool.service.state import ServiceState
from jupyter_gpupool.sim import ClusterSpec, parse_cluster
from jupyter_gpupool.sim.cluster import node_object

NODES = [
    {
        "name": "mig-node",
        "labels": {"runwhere.ai/pool": "slice-pool"},
        "gpu": {
            "count": 2,
            "type": "A100-80G",
            "product": "NVIDIA-A100-SXM4-80GB",
            "memory": 81920,
            "mig": {"strategy": "mixed", "devices": {"3g.40gb": 2}},
        },
    },
    {
        "name": "shared-node",
        "labels": {"runwhere.ai/pool": "slice-pool"},
        "gpu": {
            "count": 2,
            "type": "A10",
            "product": "NVIDIA-A10",
            "memory": 23028,
            "sharing": {"strategy": "time-slicing", "replicas": 4},
        },
    },
    {
        "name": "small-node",
        "labels": {"runwhere.ai/pool": "mig-pool"},
        "gpu": {
            "count": 1,
            "type": "A100-80G",
            "product": "NVIDIA-A100-SXM4-80GB",
            "memory": 81920,
            "mig": {"strategy": "mixed", "devices": {"1g.10gb": 7}},
        },
    },
]
DOCUMENTS = """
kind: pool
version: v0.1
pool: {name: slice-pool, description: parts of GPUs}
nodes: {}
---
kind: pool
version: v0.1
pool: {name: mig-pool, description: only MIG instances}
nodes: {}
"""


def shaped_state() -> ServiceState:
    """The service's state for this cluster, nothing running."""
    spec = parse_cluster(yaml.safe_dump({"nodes": NODES}))
    return real_answers.service_state(DOCUMENTS, [node_object(n, 0.0) for n in spec.nodes])


def shaped_launch_options(user: str = "alice") -> dict[str, Any]:
    """``GET api/v1/launch-options`` for ``user`` on this cluster."""
    return real_answers.launch_options(shaped_state(), user, [], 64)


def spec_of(nodes: list[dict[str, Any]]) -> ClusterSpec:
    """A simulated cluster of these nodes (the cluster file's ``nodes``)."""
    return parse_cluster(yaml.safe_dump({"nodes": nodes}))


def one_pool_dir(tmp_path: Path, pool: str, **extra: Any) -> Path:
    """A pools directory holding one pool document (``extra``: its other keys, e.g. ``quota``)."""
    d = tmp_path / "pools"
    d.mkdir()
    doc = {"kind": "pool", "version": "v0.1", "pool": {"name": pool}, "nodes": {}, **extra}
    (d / f"{pool}.yaml").write_text(yaml.safe_dump(doc))
    return d
