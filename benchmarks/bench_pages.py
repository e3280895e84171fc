"""Benchmark of the service's pages on a large simulated cluster.

Builds the cluster of ``bigcluster.py`` (default 5,000 nodes x 8 GPUs in 50 pools, 150,000 pods:
20,000 1-GPU server pods, 10,000 other 1-GPU pods and 120,000 pods without GPUs), starts the
service as its own process against it, and requests every page (and the API calls the pages poll
for their live refresh) ``--requests`` times, one at a time, as an admin. The baseline, measured
in the same run the same way, is the unpaginated node list of the API (``api/v1/nodes``, every
node in one answer): what a page would cost if it sent the whole cluster.

Prints one JSON line: the cluster's size (and the mix of its pods), the seconds until the service
answered, the baseline's status, p50/p99 milliseconds and size, and under ``pages`` the same for
each page with ``baseline_x_page``, the baseline's p50 over the page's p50 (above 1: the page is
that many times cheaper than the whole list; at a few dozen nodes the whole list is cheaper
than a page, at the quick size below every ratio is about 2 or more). Target: every page p99
<= 100 ms (``targets``; ``max_page_p99_ms`` is the slowest page's). Run::

    python benchmarks/bench_pages.py                                                   # full size
    python benchmarks/bench_pages.py --nodes 3000 --pools 5 --pods 6000 --requests 5   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tornado.httpclient
from bigcluster import (
    ADMIN_TOKEN,
    SYNC_TIMEOUT,
    add_size_arguments,
    build,
    hub_models,
    percentile,
    write_pools,
)
from service_process import (
    answers_ok,
    quiet,
    start_hub_stub,
    start_service,
    stop_service,
    wait_answering,
)

#: The baseline: every node in one answer.
BASELINE = "api/v1/nodes"

#: Every page's p99, milliseconds.
TARGET_P99_MS = 100


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
        "reports": "reports",
        "admin": "admin",
        "usage_chart": "pools/usage.svg",
        "api_nodes_page": "api/v1/nodes?limit=100&labels=1",
        "api_pool_servers": "api/v1/servers?pool=pool-00&limit=100",
        "api_quota_rows": "api/v1/quotas?rows=1",
    }


async def measure(http: tornado.httpclient.AsyncHTTPClient, url: str, n: int) -> dict[str, Any]:
    """``n`` GETs of ``url`` after one to warm up: the last status, p50/p99 ms and size."""
    times, size, code = [], 0, 0
    for _ in range(n + 1):  # the first one warms up
        t0 = time.perf_counter()
        resp = await http.fetch(
            url, headers={"Authorization": f"token {ADMIN_TOKEN}"}, raise_error=False
        )
        times.append(1000 * (time.perf_counter() - t0))
        size, code = len(resp.body), resp.code
    times = times[1:]
    return {
        "status": code,
        "p50_ms": statistics.median(times),
        "p99_ms": percentile(times, 99),
        "kb": round(size / 1024, 1),
    }


def rounded(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 1) if k.endswith("_ms") else v for k, v in figures.items()}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    built = await build(args)
    cluster = built.cluster
    with tempfile.TemporaryDirectory() as tmp:
        pools_dir = Path(tmp) / "pools"
        write_pools(pools_dir, args.pools, args.groups)
        t0 = time.perf_counter()
        proc, base = start_service(cluster.kubeconfig, pools_dir, hub_api, SYNC_TIMEOUT)
        http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        try:
            await wait_answering(proc, answers_ok(base + "api/v1/", ADMIN_TOKEN))
            ready_s = time.perf_counter() - t0
            # measured once the service is quiet after its start (its ledger's first writes)
            quiet_s = await quiet(proc.pid)
            measured = {
                name: await measure(http, base + path, args.requests)
                for name, path in pages(args.nodes).items()
            }
            baseline = await measure(http, base + BASELINE, args.requests)
        finally:
            http.close()
            stop_service(proc)
            await cluster.stop()
    for page in measured.values():
        page["baseline_x_page"] = round(baseline["p50_ms"] / page["p50_ms"], 2)
    return {
        "nodes": args.nodes,
        "gpus": args.nodes * args.gpus,
        "pools": args.pools,
        "groups": args.groups,
        "pods": args.pods,
        "servers": built.servers,
        "gpu_jobs": built.gpu_jobs,
        "cpu_pods": built.cpu_pods,
        "requests": args.requests,
        # building the cluster, until every pod runs
        "populate_s": round(built.populate_s + built.settle_s, 1),
        "service_ready_s": round(ready_s, 1),
        "quiet_after_start_s": round(quiet_s, 1),
        "baseline": {"path": BASELINE, **rounded(baseline)},
        "pages": {name: rounded(page) for name, page in measured.items()},
        "max_page_p99_ms": round(max(page["p99_ms"] for page in measured.values()), 1),
        "targets": {"page_p99_ms": TARGET_P99_MS},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(parser)
    parser.add_argument("--requests", type=int, default=30)
    print(json.dumps(asyncio.run(main(parser.parse_args()))), flush=True)
