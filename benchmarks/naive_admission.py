"""The naive admission bench_admission compares with: gpuctl's way, listing every node and pod
and recomputing usage for every decision."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from jupyter_gpupool.core.admission.walk import AdmissionRequest
from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.core.usage.records import pod_gpus


def naive_decide(
    req: AdmissionRequest, reg: Registry, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> str | None:
    """gpuctl's way: list everything and recompute usage for every decision."""
    node_pool: dict[str, str] = {}
    node_total: dict[str, int] = {}
    for n in nodes:
        meta = n["metadata"]
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
        )
        if not ready or n["spec"].get("unschedulable"):
            continue
        node_pool[meta["name"]] = meta["labels"].get(L.POOL_LABEL, "default")
        node_total[meta["name"]] = int(n["status"]["allocatable"].get(L.GPU_RESOURCE, 0))
    used: dict[str, int] = defaultdict(int)
    subject: dict[tuple[str, str], int] = defaultdict(int)
    for p in pods:
        if p["status"]["phase"] in ("Succeeded", "Failed"):
            continue
        g = pod_gpus(p["spec"])
        node = p["spec"].get("nodeName")
        if node:
            used[node] += g
        charged = p["metadata"]["annotations"].get(L.POD_CHARGED)
        if charged and node in node_pool:
            subject[(node_pool[node], charged)] += g
    for pool in req.pools or reg.default_pool_order(req.groups):
        quota = reg.quota(pool)
        if quota is not None:
            gs = [g for g in quota.groups if g in req.groups]
            if gs and subject[(pool, f"group:{gs[0]}")] + req.gpus > (
                quota.groups[gs[0]].limit or 10**9
            ):
                continue
        for name, total in node_total.items():
            if node_pool[name] == pool and total - used[name] >= req.gpus:
                return pool
    return None
