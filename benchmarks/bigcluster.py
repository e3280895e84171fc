"""The large simulated cluster the service benchmarks share, at the size of the largest clusters
Kubernetes supports (5,000 nodes, 150,000 pods), and the tokens and pool files that go with it.

The pods are a mix, since 150,000 one-GPU pods cannot fit on 40,000 GPUs and a real cluster of
that size runs mostly other work:

- ``servers`` notebook servers (1 GPU each), labelled and annotated as gpupool's spawner does;
- ``gpu_jobs`` other pods with 1 GPU and none of our labels (training jobs);
- the rest, pods without GPUs (system daemons, CPU jobs), like the kube-proxy of every node.

All are bound to nodes round-robin, created in-process through the simulator's store (no HTTP, no
scheduler) for speed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jupyter_gpupool.sim import ClusterSpec, NodeSpec, SimCluster
from jupyter_gpupool.sim.nodes.spec import GPUSpec

ADMIN_TOKEN = "bench-admin-token"
USER_TOKEN = "bench-user-token"

#: The first full list of a 5,000-node cluster takes longer than the default sync timeout.
SYNC_TIMEOUT = "--GPUPoolService.sync_timeout=600"

#: Users owning the server pods (``u0`` ... ``u1999``).
USERS = 2000


def add_size_arguments(parser: argparse.ArgumentParser, pods: int = 150_000) -> None:
    """The cluster's size on a benchmark's command line (default: Kubernetes' limits)."""
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--pods", type=int, default=pods)
    parser.add_argument("--groups", type=int, default=20)


def hub_models() -> dict[str, dict[str, Any]]:
    """The two tokens the benchmarks use, as JupyterHub would describe them."""
    return {
        ADMIN_TOKEN: {"kind": "service", "name": "spawner", "scopes": ["custom:gpupool:admin"]},
        USER_TOKEN: {
            "kind": "user",
            "name": "u0",
            "groups": ["g00"],
            "scopes": ["custom:gpupool:use"],
        },
    }


def cluster_spec(nodes: int, pools: int, gpus: int) -> ClusterSpec:
    return ClusterSpec(
        nodes=[
            NodeSpec(
                name=f"node-{i:05d}",
                labels={"runwhere.ai/pool": f"pool-{i % pools:02d}"},
                cpu="128",
                memory="1024Gi",
                gpu=GPUSpec(count=gpus, type="A100-80G"),
            )
            for i in range(nodes)
        ]
    )


def mix(pods: int, servers: int | None = None, gpu_jobs: int | None = None) -> tuple[int, int, int]:
    """``(servers, gpu_jobs, cpu_pods)`` adding up to ``pods``: by default 20,000 servers and
    10,000 GPU jobs at full size, the same shares (2/15, 1/15) at smaller sizes."""
    if servers is None:
        servers = pods * 2 // 15
    if gpu_jobs is None:
        gpu_jobs = pods // 15
    servers = min(servers, pods)
    gpu_jobs = min(gpu_jobs, pods - servers)
    return servers, gpu_jobs, pods - servers - gpu_jobs


def populate(
    cluster: SimCluster,
    nodes: int,
    pools: int,
    pods: int,
    groups: int,
    servers: int | None = None,
    gpu_jobs: int | None = None,
) -> tuple[int, int, int]:
    """Create the pods (see the module's docstring); returns ``(servers, gpu_jobs, cpu_pods)``."""
    counts = mix(pods, servers, gpu_jobs)
    n_servers, n_jobs, _ = counts
    store = cluster.store
    for i in range(pods):
        node = i % nodes
        node_name = f"node-{node:05d}"
        if i < n_servers:
            pool = f"pool-{node % pools:02d}"
            user = f"u{i % USERS}"
            group = f"g{i % groups:02d}"
            body = server_pod(f"jupyter-{user}-{i}", node_name, pool, user, group)
        elif i < n_servers + n_jobs:
            body = other_pod(f"train-{i}", node_name, gpus=1)
        else:
            body = other_pod(f"worker-{i}", node_name, gpus=0)
        store.create("pods", "default", body)
    return counts


def _container(gpus: int) -> dict[str, Any]:
    if gpus:
        resources: dict[str, Any] = {
            "requests": {"nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        }
    else:
        resources = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    return {"name": "main", "image": "busybox", "resources": resources}


def server_pod(name: str, node: str, pool: str, user: str, group: str) -> dict[str, Any]:
    """A 1-GPU server pod bound to ``node``, labelled as gpupool's spawner does."""
    return {
        "metadata": {
            "name": name,
            "labels": {
                "gpupool.jupyter.org/pool": pool,
                "gpupool.jupyter.org/user": user,
                "gpupool.jupyter.org/over-quota": "false",
            },
            "annotations": {
                "gpupool.jupyter.org/user": user,
                "gpupool.jupyter.org/server": "",
                "gpupool.jupyter.org/charged": f"group:{group}",
            },
        },
        "spec": {
            "nodeName": node,
            "containers": [{**_container(1), "name": "notebook", "image": "jupyter/base"}],
        },
    }


def other_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A pod that is not a notebook server, bound to ``node``, with ``gpus`` GPUs."""
    return {
        "metadata": {"name": name, "labels": {"app": name.split("-")[0]}},
        "spec": {"nodeName": node, "containers": [_container(gpus)]},
    }


def write_pools(directory: Path, pools: int, groups: int) -> None:
    """A pool file per pool in ``directory`` (made if need be), with group quotas."""
    directory.mkdir(parents=True, exist_ok=True)
    for p in range(pools):
        doc = {
            "kind": "pool",
            "version": "v0.1",
            "pool": {"name": f"pool-{p:02d}", "description": f"benchmark pool {p}"},
            "nodes": {},
            "quota": {
                "borrowing": True,
                "user-default": {"guaranteed": 0, "limit": 16},
                "groups": {f"g{g:02d}": {"guaranteed": 20, "limit": 400} for g in range(groups)},
            },
        }
        (directory / f"pool-{p:02d}.yaml").write_text(yaml.safe_dump(doc))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def start(cluster: SimCluster, timeout: float = 600) -> float:
    """Start the simulator and wait until its kubelet has started every pod (at 150,000 pods
    that takes it most of a minute, during which its API answers nobody); returns the seconds."""
    started = time.perf_counter()
    await cluster.start()
    while True:
        pending = sum(
            1
            for p in cluster.store.iter("pods")
            if (p.get("status") or {}).get("phase") != "Running"
        )
        if not pending:
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"{pending} pods still not running after {timeout:g} s")
        await asyncio.sleep(0.5)


@dataclass
class Built:
    """A cluster :func:`build` made, its pods, and how long it took."""

    cluster: SimCluster
    servers: int
    gpu_jobs: int
    cpu_pods: int
    populate_s: float  # creating the nodes and pods
    settle_s: float  # starting the simulator until every pod runs


async def build(args: argparse.Namespace) -> Built:
    """The cluster of ``args``' size (:func:`add_size_arguments`), populated and started with
    every pod running. The simulator's objects live in the benchmark's process: they are kept
    out of its garbage collector's walks, which would show up as the clients' latency."""
    t0 = time.perf_counter()
    cluster = SimCluster(cluster_spec(args.nodes, args.pools, args.gpus))
    counts = populate(cluster, args.nodes, args.pools, args.pods, args.groups)
    populate_s = time.perf_counter() - t0
    settle_s = await start(cluster)
    gc.collect()
    gc.freeze()
    return Built(cluster, *counts, populate_s=populate_s, settle_s=settle_s)
