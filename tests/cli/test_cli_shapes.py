"""``gpupool get pools -o wide`` and ``gpupool describe pool`` list a pool's shapes (issue 29),
from the service's own rows for a simulated cluster of partitioned nodes (tests/shaped_cluster.py).
"""

from __future__ import annotations

from shaped_cluster import shaped_state

from jupyter_gpupool.commands.describe import format_pool
from jupyter_gpupool.commands.get import POOL_COLUMNS
from jupyter_gpupool.commands.output import render


def rows() -> dict[str, dict]:
    """The pools' rows with one server on a 3g.40gb instance and one on a shared A10."""
    state = shaped_state()
    for name, node, resource in (
        ("mig-nb", "mig-node", "nvidia.com/mig-3g.40gb"),
        ("shared-nb", "shared-node", "nvidia.com/gpu"),
    ):
        state.index.apply_pod("ADDED", running_pod(name, node, resource))
    return {r["name"]: r for r in state.pool_summaries()}


def running_pod(name: str, node: str, resource: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "nb", "resources": {"limits": {resource: "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def test_get_pools_wide_has_each_shapes_free_and_total():
    table = render("wide", list(rows().values()), POOL_COLUMNS).splitlines()
    header = table[0]
    start = header.index("SHAPES (FREE/TOTAL)")
    cells = {line.split()[0]: line[start:].split("  ")[0].strip() for line in table[1:]}
    assert cells["slice-pool"] == "whole 1/1, mig-3g.40gb 1/2, shared-4 7/8"
    assert cells["mig-pool"] == "mig-1g.10gb 7/7"
    # gpuctl's table keeps its columns
    assert "SHAPES" not in render("table", list(rows().values()), POOL_COLUMNS)


def test_describe_pool_has_a_table_of_its_shapes():
    text = format_pool(rows()["slice-pool"], 0.0)
    shapes = text.split("\nShapes:\n")[1].split("\n\n")[0].splitlines()
    assert shapes[0].split() == [
        "SHAPE",
        "KIND",
        "GPU",
        "FREE",
        "TOTAL",
        "LARGEST",
        "FREE",
        "GPU-EQUIVALENTS",
        "ISOLATES",
    ]
    assert shapes[2].split()[:9] == [
        "mig-3g.40gb",
        "a",
        "MIG",
        "instance",
        "A100-80G",
        "1",
        "2",
        "1",
        "3/7",
    ]
    assert shapes[3].endswith(
        "nothing: every server sees all the GPU's memory, and one crash ends them all"
    )
    # a pool without shapes (no GPU nodes) has no such part
    assert "Shapes:" not in format_pool(rows()["default"], 0.0)
