"""Benchmark of the service's pages on a large simulated cluster.

Builds the same cluster as ``bench_service.py`` (default 5,000 nodes x 8 GPUs in 50 pools, 20,000
server pods), starts the service as its own process against it, and requests every page (and the
API calls the pages poll for their live refresh) ``--requests`` times, one at a time, as an admin.
Prints one JSON line: the cluster's size, and under ``pages`` the status, p50/p99 milliseconds and
size of each page, with the unpaginated node list of the API (``api/v1/nodes``, every node in one
answer) as the baseline the paged pages are measured against. Target: every page p99 <= 100 ms.
Run::

    python benchmarks/bench_pages.py                                  # full size
    python benchmarks/bench_pages.py --nodes 200 --pods 800 --requests 5   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
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
from bench_service import (
    ADMIN_TOKEN,
    SYNC_TIMEOUT,
    cluster_spec,
    hub_models,
    percentile,
    populate,
    write_pools,
)
from service_process import answers_ok, start_hub_stub, start_service, wait_answering

from jupyter_gpupool.sim import SimCluster


def pages(nodes: int) -> dict[str, str]:
    """Name -> path under the service prefix."""
    last = max(0, nodes - 100)
    return {
        "user": "",
        "pools": "pools",
        "pool": "pools/pool-00",
        "nodes": "nodes",
        "nodes_last_page": f"nodes?offset={last}",
        "nodes_status_filter": "nodes?status=free",
        "nodes_name_filter": "nodes?q=node-0049",
        "quotas": "quotas",
        "admin": "admin",
        "usage_chart": "pools/usage.svg",
        "api_nodes_page": "api/v1/nodes?limit=100&labels=1",
        "api_pool_servers": "api/v1/servers?pool=pool-00&limit=100",
        "api_quota_rows": "api/v1/quotas?rows=1",
        "baseline_api_all_nodes": "api/v1/nodes",
    }


async def measure(
    http: tornado.httpclient.AsyncHTTPClient, url: str, n: int
) -> tuple[list[float], int, int]:
    times, size, code = [], 0, 0
    for _ in range(n + 1):  # the first one warms up
        t0 = time.perf_counter()
        resp = await http.fetch(
            url, headers={"Authorization": f"token {ADMIN_TOKEN}"}, raise_error=False
        )
        times.append(1000 * (time.perf_counter() - t0))
        size, code = len(resp.body), resp.code
    return times[1:], size, code


async def main(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    cluster = SimCluster(cluster_spec(args.nodes, args.pools, args.gpus))
    populate(cluster, args.nodes, args.pools, args.pods, args.groups)
    await cluster.start()
    gc.collect()
    gc.freeze()
    # The pages apart from the sizes: the "nodes" and "pools" pages would overwrite them.
    measured: dict[str, Any] = {}
    out: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "pools": args.pools,
        "pages": measured,
    }
    with tempfile.TemporaryDirectory() as tmp:
        pools_dir = Path(tmp) / "pools"
        pools_dir.mkdir()
        write_pools(pools_dir, args.pools, args.groups)
        proc, base = start_service(cluster.kubeconfig, pools_dir, hub_api, SYNC_TIMEOUT)
        http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        try:
            await wait_answering(proc, answers_ok(base + "api/v1/", ADMIN_TOKEN))
            for name, path in pages(args.nodes).items():
                times, size, code = await measure(http, base + path, args.requests)
                measured[name] = {
                    "status": code,
                    "p50_ms": round(statistics.median(times), 1),
                    "p99_ms": round(percentile(times, 99), 1),
                    "kb": round(size / 1024, 1),
                }
        finally:
            http.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            await cluster.stop()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--requests", type=int, default=30)
    print(json.dumps(asyncio.run(main(parser.parse_args()))), flush=True)
