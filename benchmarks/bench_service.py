"""Benchmark of the gpupool service over HTTP, on a large simulated cluster.

Builds a simulated cluster (default 5,000 nodes x 8 GPUs in 50 pools, and 20,000 server pods bound
to them, created in-process through the simulator's store for speed), starts the service as its
own process (``python -m jupyter_gpupool.service``) against it with a stub of JupyterHub's token
check (HubAuth caches the answer, as in production), waits for its first full list, then runs two
phases with ``--clients`` concurrent clients, each sending its next request when the previous one
is answered, over a persistent connection (``--no-keepalive``: a new connection per request, as
tornado's simple HTTP client does):

1. ``POST api/v1/admissions``: 1 GPU for a random user (with groups, as the spawner sends them)
   in a random list of three pools; the admissions are kept (reservations pile up, as in a spawn
   storm);
2. ``GET api/v1/pools`` as a user (the spawn form).

Prints one JSON line: p50/p99 milliseconds per phase, requests per second, the service's RSS,
and how long the service took to start and sync (``startup_s``) and the simulator to fill
(``populate_s``). Targets: admission p99 <= 10 ms, pools p99 <= 20 ms. The simulator lives in this
process and the service in another, so on a 2-core machine each has a core. Run::

    python benchmarks/bench_service.py                    # full size
    python benchmarks/bench_service.py --nodes 200 --pods 800 --requests 200   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tornado.httpclient
import yaml
from service_process import start_hub_stub, start_service, wait_answering

from jupyter_gpupool.sim import ClusterSpec, NodeSpec, SimCluster
from jupyter_gpupool.sim.spec import GPUSpec

ADMIN_TOKEN = "bench-admin-token"
USER_TOKEN = "bench-user-token"


def hub_models() -> dict[str, dict[str, Any]]:
    """The two tokens the benchmark uses, as JupyterHub would describe them."""
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


def populate(cluster: SimCluster, nodes: int, pools: int, pods: int, groups: int) -> None:
    """Server pods bound to nodes round-robin (1 GPU each), labelled as gpupool's spawner does."""
    store = cluster.store
    for i in range(pods):
        node = i % nodes
        pool = f"pool-{node % pools:02d}"
        user = f"u{i % 2000}"
        group = f"g{i % groups:02d}"
        store.create(
            "pods",
            "default",
            server_pod(f"jupyter-{user}-{i}", f"node-{node:05d}", pool, user, group),
        )


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
            "containers": [
                {
                    "name": "notebook",
                    "image": "jupyter/base",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def write_pools(directory: Path, pools: int, groups: int) -> None:
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


#: The first full list of a 5,000-node cluster takes longer than the default sync timeout.
SYNC_TIMEOUT = "--GPUPoolService.sync_timeout=600"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Http:
    """The benchmark's HTTP client: aiohttp with persistent connections (one per client, as a
    browser or a long-lived spawner keeps them), or with ``keepalive=False`` tornado's simple
    client, which opens a connection per request."""

    def __init__(self, clients: int, keepalive: bool):
        self.keepalive = keepalive
        self.clients = clients
        self._aio: Any = None
        self._tornado: tornado.httpclient.AsyncHTTPClient | None = None

    async def fetch(self, method: str, url: str, token: str, body: Any = None) -> int:
        headers = {"Authorization": f"token {token}"}
        data = None if body is None else json.dumps(body)
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.keepalive:
            import aiohttp

            if self._aio is None:
                self._aio = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=self.clients)
                )
            async with self._aio.request(method, url, data=data, headers=headers) as resp:
                await resp.read()
                return int(resp.status)
        if self._tornado is None:
            self._tornado = tornado.httpclient.AsyncHTTPClient(
                force_instance=True, max_clients=self.clients
            )
        resp = await self._tornado.fetch(
            url, method=method, body=data, headers=headers, raise_error=False
        )
        return int(resp.code)

    async def close(self) -> None:
        if self._aio is not None:
            await self._aio.close()
        if self._tornado is not None:
            self._tornado.close()


async def run_phase(
    http: Http, clients: int, total: int, make: Any
) -> tuple[list[float], float, dict[int, int]]:
    latencies: list[float] = []
    codes: dict[int, int] = {}
    left = total

    async def worker(seed: int) -> None:
        nonlocal left
        rng = random.Random(seed)
        while left > 0:
            left -= 1
            args = make(rng)
            t = time.perf_counter()
            code = await http.fetch(*args)
            latencies.append((time.perf_counter() - t) * 1000)
            codes[code] = codes.get(code, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    return latencies, time.perf_counter() - started, codes


async def main(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    t0 = time.perf_counter()
    cluster = SimCluster(cluster_spec(args.nodes, args.pools, args.gpus))
    populate(cluster, args.nodes, args.pools, args.pods, args.groups)
    populate_s = time.perf_counter() - t0
    await cluster.start()
    # The simulator's objects live in this process too: keep its garbage collector from walking
    # them during the measurement, which would show up as the *client's* latency.
    gc.collect()
    gc.freeze()
    proc = None
    with tempfile.TemporaryDirectory() as tmp:
        pools_dir = Path(tmp) / "pools"
        pools_dir.mkdir()
        write_pools(pools_dir, args.pools, args.groups)
        t0 = time.perf_counter()
        proc, base = start_service(cluster.kubeconfig, pools_dir, hub_api, SYNC_TIMEOUT)
        http = Http(args.clients, keepalive=not args.no_keepalive)
        try:

            async def answers() -> bool:
                return await http.fetch("GET", base + "api/v1/", ADMIN_TOKEN) == 200

            await wait_answering(proc, answers)
            startup_s = time.perf_counter() - t0
            pool_names = [f"pool-{p:02d}" for p in range(args.pools)]

            def admission(rng: random.Random) -> tuple[str, str, str, dict[str, Any]]:
                user = rng.randrange(2000)
                body = {
                    "user": f"u{user}",
                    "groups": [f"g{user % args.groups:02d}"],
                    "pools": rng.sample(pool_names, min(3, len(pool_names))),
                    "gpus": 1,
                }
                return "POST", base + "api/v1/admissions", ADMIN_TOKEN, body

            def pools(rng: random.Random) -> tuple[str, str, str]:
                return "GET", base + "api/v1/pools", USER_TOKEN

            # warm up both routes (token checks are cached after the first call)
            await run_phase(http, args.clients, args.clients * 4, admission)
            await run_phase(http, args.clients, args.clients * 4, pools)
            adm, adm_s, adm_codes = await run_phase(http, args.clients, args.requests, admission)
            pls, pls_s, pls_codes = await run_phase(http, args.clients, args.requests, pools)
            rss = rss_mb(proc.pid)
        finally:
            await http.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            await cluster.stop()
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "pools": args.pools,
        "clients": args.clients,
        "keepalive": not args.no_keepalive,
        "requests_per_phase": args.requests,
        "admission_p50_ms": round(statistics.median(adm), 2),
        "admission_p99_ms": round(percentile(adm, 99), 2),
        "admissions_per_s": round(len(adm) / adm_s),
        "admission_status": adm_codes,
        "pools_p50_ms": round(statistics.median(pls), 2),
        "pools_p99_ms": round(percentile(pls, 99), 2),
        "pools_per_s": round(len(pls) / pls_s),
        "pools_status": pls_codes,
        "service_rss_mb": round(rss, 1),
        "startup_s": round(startup_s, 2),
        "populate_s": round(populate_s, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=4000, help="requests per phase")
    parser.add_argument(
        "--no-keepalive",
        action="store_true",
        help="a new connection per request (tornado's simple client, as the spawner uses)",
    )
    result = asyncio.run(main(parser.parse_args()))
    print(json.dumps(result))
