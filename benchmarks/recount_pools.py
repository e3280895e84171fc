"""The baseline of ``bench_cli.py``: pool usage recounted from a full list, as gpuctl does it.

Lists every node and every pod from the API server with the official ``kubernetes`` client,
paged as kubectl pages (``limit=500`` and ``continue``), and sums per pool (the node label
``runwhere.ai/pool``; nodes without it are in ``default``) the GPUs (allocatable
``nvidia.com/gpu``), the GPUs used (those of the non-finished pods bound to the pool's nodes: the
containers' ``nvidia.com/gpu`` limits, else requests, or the largest init container's if more, as
the scheduler counts them) and the nodes. Prints gpuctl's table::

    POOL NAME  GPU TOTAL  GPU USED  GPU FREE  NODE COUNT

``--raw`` reads the answers as plain JSON (``_preload_content=False``, ``json.loads``) instead of
building the client's model objects: the same requests, without the client's deserialization.
Standalone on purpose (no ``jupyter_gpupool`` import), as a gpuctl-like tool would be. Run::

    python benchmarks/recount_pools.py --kubeconfig KUBECONFIG [--raw]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubernetes import client, config

GPU = "nvidia.com/gpu"
POOL_LABEL = "runwhere.ai/pool"
DEFAULT_POOL = "default"
FINISHED = ("Succeeded", "Failed")
HEADERS = ("POOL NAME", "GPU TOTAL", "GPU USED", "GPU FREE", "NODE COUNT")


def gpus(resources: Mapping[str, Any] | None) -> int:
    """The GPUs a container asks for: its limit, else its request."""
    if not resources:
        return 0
    for which in ("limits", "requests"):
        value = (resources.get(which) or {}).get(GPU)
        if value is not None:
            return int(str(value))
    return 0


def pod_gpus(containers: list[Any], init_containers: list[Any]) -> int:
    """As the scheduler counts them: the containers' sum, or the largest init container's."""
    return max(sum(gpus(c) for c in containers), max((gpus(c) for c in init_containers), default=0))


def paged(list_call: Callable[..., Any], page_size: int, raw: bool) -> Iterator[Any]:
    """Every item of a list, a page of ``page_size`` at a time (kubectl's ``--chunk-size``)."""
    token = None
    while True:
        kwargs: dict[str, Any] = {"limit": page_size}
        if token:
            kwargs["_continue"] = token
        if raw:
            page = json.loads(list_call(_preload_content=False, **kwargs).data)
            yield from page.get("items") or ()
            token = (page.get("metadata") or {}).get("continue")
        else:
            page = list_call(**kwargs)
            yield from page.items or ()
            token = page.metadata._continue
        if not token:
            return


def count_models(api: client.CoreV1Api, page_size: int) -> dict[str, list[int]]:
    """Per pool ``[gpu total, gpu used, node count]``, from the client's model objects."""
    pools: dict[str, list[int]] = {}
    node_pool: dict[str, list[int]] = {}
    for node in paged(api.list_node, page_size, raw=False):
        labels = node.metadata.labels or {}
        row = pools.setdefault(labels.get(POOL_LABEL) or DEFAULT_POOL, [0, 0, 0])
        row[0] += int(str((node.status.allocatable or {}).get(GPU, 0)))
        row[2] += 1
        node_pool[node.metadata.name] = row
    for pod in paged(api.list_pod_for_all_namespaces, page_size, raw=False):
        used = node_pool.get(pod.spec.node_name or "")
        if used is None or (pod.status and pod.status.phase in FINISHED):
            continue
        used[1] += pod_gpus(
            [c.resources.to_dict() if c.resources else None for c in pod.spec.containers],
            [
                c.resources.to_dict() if c.resources else None
                for c in pod.spec.init_containers or ()
            ],
        )
    return pools


def count_raw(api: client.CoreV1Api, page_size: int) -> dict[str, list[int]]:
    """The same as :func:`count_models`, from the answers' JSON."""
    pools: dict[str, list[int]] = {}
    node_pool: dict[str, list[int]] = {}
    for node in paged(api.list_node, page_size, raw=True):
        md = node["metadata"]
        row = pools.setdefault((md.get("labels") or {}).get(POOL_LABEL) or DEFAULT_POOL, [0, 0, 0])
        row[0] += int(str(((node.get("status") or {}).get("allocatable") or {}).get(GPU, 0)))
        row[2] += 1
        node_pool[md["name"]] = row
    for pod in paged(api.list_pod_for_all_namespaces, page_size, raw=True):
        spec = pod.get("spec") or {}
        used = node_pool.get(spec.get("nodeName") or "")
        if used is None or (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        used[1] += pod_gpus(
            [c.get("resources") for c in spec.get("containers") or ()],
            [c.get("resources") for c in spec.get("initContainers") or ()],
        )
    return pools


def table(pools: Mapping[str, list[int]]) -> str:
    """gpuctl's table: upper-case headers, left-aligned columns two spaces apart."""
    rows = [HEADERS] + [
        (name, str(t), str(u), str(max(0, t - u)), str(n))
        for name, (t, u, n) in sorted(pools.items())
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() + "\n"
        for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG or ~/.kube/config")
    parser.add_argument("--raw", action="store_true", help="plain JSON, no model objects")
    parser.add_argument("--page-size", type=int, default=500, help="as kubectl (default 500)")
    args = parser.parse_args(argv)
    config.load_kube_config(config_file=args.kubeconfig)
    api = client.CoreV1Api()
    pools = (count_raw if args.raw else count_models)(api, args.page_size)
    sys.stdout.write(table(pools))
    return 0


if __name__ == "__main__":
    sys.exit(main())
