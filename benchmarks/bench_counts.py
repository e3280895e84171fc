"""Benchmark of a pool's row counting its GPUs in GPU-equivalents (issue 40).

A pool's row (``GET api/v1/pools``, every page and client after it) now counts each kind of GPU
its nodes hold (:func:`jupyter_gpupool.core.usage.nodes.pool_parts`): its whole GPUs from the
index's counters, and the parts (MIG instances, time-sliced replicas) of its nodes that offer
them, each node's counted once per change of what its pods use. The baseline, measured in the
same run on the same index, is the row without the parts (as before issue 40). Run::

    python benchmarks/bench_counts.py [--whole 4000] [--mig 500] [--shared 500]

and it prints one JSON line: the best of 30 rows' times (ms) of each, their ratio (a cost:
about 1 for whole GPUs alone), and the same after one pod on a MIG node changed (the one node
counted again), with the parts the row counted.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import jupyter_gpupool.core.usage.index as index_module
from jupyter_gpupool.core.usage.index import UsageIndex

POOL = "p"


def node(name: str, allocatable: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"runwhere.ai/pool": POOL, **labels}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", **allocatable},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, node_name: str, resource: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "jhub",
            "uid": name,
            "labels": {"component": "singleuser-server", "hub.jupyter.org/username": name},
            "annotations": {"hub.jupyter.org/username": name},
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def build(whole: int, mig: int, shared: int) -> UsageIndex:
    idx = UsageIndex()
    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "1"}
    for i in range(whole):
        idx.apply_node("ADDED", node(f"w{i}", {"nvidia.com/gpu": "8"}, {}))
        idx.apply_pod("ADDED", pod(f"w{i}-nb", f"w{i}", "nvidia.com/gpu"))
    for i in range(mig):
        labels = {**a100, "nvidia.com/mig.strategy": "mixed"}
        idx.apply_node("ADDED", node(f"m{i}", {"nvidia.com/mig-1g.10gb": "7"}, labels))
        idx.apply_pod("ADDED", pod(f"m{i}-nb", f"m{i}", "nvidia.com/mig-1g.10gb"))
    for i in range(shared):
        labels = {
            "nvidia.com/gpu.product": "NVIDIA-A10-SHARED",
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
        }
        idx.apply_node("ADDED", node(f"s{i}", {"nvidia.com/gpu": "4"}, labels))
    return idx


def best_ms(idx: UsageIndex, runs: int = 30, change: bool = False) -> float:
    best = float("inf")
    for i in range(runs):
        if change:  # one pod on a MIG node comes or goes: that node is counted again
            kind = "DELETED" if i % 2 == 0 else "ADDED"
            idx.apply_pod(kind, pod("m0-nb", "m0", "nvidia.com/mig-1g.10gb"))
        t0 = time.perf_counter()
        idx.pool_usage(POOL)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--whole", type=int, default=4000)
    parser.add_argument("--mig", type=int, default=500)
    parser.add_argument("--shared", type=int, default=500)
    args = parser.parse_args()
    idx = build(args.whole, args.mig, args.shared)
    row = idx.pool_usage(POOL)
    with_parts = best_ms(idx)
    after_change = best_ms(idx, change=True)
    real = index_module.pool_parts
    index_module.pool_parts = lambda ps, nodes: ()  # the row as before issue 40
    try:
        baseline = best_ms(idx)
        baseline_change = best_ms(idx, change=True)
    finally:
        index_module.pool_parts = real
    print(
        json.dumps(
            {
                "nodes": {"whole": args.whole, "mig": args.mig, "shared": args.shared},
                "parts": [(p.kind, p.units, str(p.equivalents)) for p in row.parts],
                "row_ms": round(with_parts, 3),
                "baseline_row_ms": round(baseline, 3),
                "row_x_baseline": round(with_parts / baseline, 2),
                "row_after_a_pod_ms": round(after_change, 3),
                "baseline_after_a_pod_ms": round(baseline_change, 3),
                "after_a_pod_x_baseline": round(after_change / baseline_change, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
