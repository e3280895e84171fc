"""Benchmark of GPU utilization polling (issue 17): what polling costs the service at 5,000
nodes x 8 GPUs.

Part 1, the poll in this process. One poll of the ``dcgm`` source reads the exporter pages of
every GPU node (here: one page of all 40,000 GPUs, the size of every node's page together, three
metrics per GPU as the simulated exporter writes), parses them
(:func:`~jupyter_gpupool.core.usage.utilization.parse_exporter`, a reader of the three metrics it
needs), groups them per pod (``by_pod``) and moves the idle clocks of the running servers on
(:class:`~jupyter_gpupool.core.time.idle.IdleClock`). The baseline, measured in the same run on the
same text, is prometheus_client's general parser, which the service used first (it reads every
metric and keeps every sample). Figures: milliseconds per poll (p50 and max over ``--polls``),
the page's size, the memory the measurements hold (tracemalloc), and ``baseline_x_poll``, the
baseline's p50 over the poll's (above 1: the poll is that many times faster).

Part 2, the service as it runs (``python -m jupyter_gpupool.service``, its own process) on a
simulated cluster of the same size with ``--pods`` 1-GPU server pods, twice over the same
wall time: with ``utilization_source = "dcgm"`` reading the simulator's exporter every
``--interval`` seconds, and without a source (the baseline). Figures: the service's RSS with
and without polling and ``service_rss_x_without``, the one over the other (what polling holds,
above 1), and the CPU seconds one poll costs the service (the difference of the two runs' CPU
time, divided by the polls). Run::

    python benchmarks/bench_utilization.py            # 5,000 nodes x 8 GPUs, 20,000 servers
    python benchmarks/bench_utilization.py --quick    # tiny

Prints one JSON line on stdout and a summary on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tornado.httpclient
from bigcluster import (
    ADMIN_TOKEN,
    SYNC_TIMEOUT,
    cluster_spec,
    hub_models,
    populate,
    rss_mb,
    write_pools,
)
from prometheus_client.parser import text_string_to_metric_families
from service_process import (
    answers_ok,
    cpu_seconds,
    start_hub_stub,
    start_service,
    wait_answering,
)

from jupyter_gpupool.core.time.idle import IdleClock
from jupyter_gpupool.core.usage.utilization import by_pod, parse_exporter
from jupyter_gpupool.sim import SimCluster

METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
)


def page(nodes: int, gpus: int, per_pod: int) -> str:
    """The exporter text of ``nodes`` x ``gpus`` GPUs, ``per_pod`` GPUs to a pod."""
    lines = []
    for name, help_ in METRICS:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for n in range(nodes):
            for g in range(gpus):
                pod = f"jupyter-u{n}-{g // per_pod}"
                labels = (
                    f'gpu="{g}",UUID="GPU-{n:05d}-{g}",pci_bus_id="00000000:{g:02X}:00.0",'
                    f'device="nvidia{g}",modelName="NVIDIA-A100-SXM4-80GB",'
                    f'Hostname="gpu-node-{n}",container="notebook",namespace="jhub",pod="{pod}"'
                )
                value = (n * 7 + g * 13) % 101 if name.endswith("UTIL") else 40960
                lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def baseline(text: str) -> int:
    """prometheus_client's general parser on the same page (what parse_exporter used first);
    the GPU_UTIL samples it finds."""
    return sum(
        s.name == "DCGM_FI_DEV_GPU_UTIL"
        for family in text_string_to_metric_families(text)
        for s in family.samples
    )


def poll_part(args: argparse.Namespace) -> dict[str, Any]:
    """Part 1: the poll in this process, and prometheus_client's parser on the same page."""
    text = page(args.nodes, args.gpus, args.per_pod)
    clock = IdleClock()
    times, base_times = [], []
    measured: dict[Any, Any] = {}
    util_lines = 0
    for i in range(args.polls):
        gc.collect()
        t0 = time.perf_counter()
        measured = by_pod(parse_exporter(text), at=float(i))
        for key, m in measured.items():
            clock.observe(key, m.util_max, float(i), 5.0)
        times.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        util_lines = baseline(text)
        base_times.append((time.perf_counter() - t0) * 1000)
    # the memory the latest measurements and the clocks hold (measured apart: tracemalloc
    # slows every allocation down)
    measured, clock = {}, IdleClock()
    gc.collect()
    tracemalloc.start()
    measured = by_pod(parse_exporter(text), at=0.0)
    for key, m in measured.items():
        clock.observe(key, m.util_max, 0.0, 5.0)
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert util_lines == args.nodes * args.gpus
    result = {
        "nodes": args.nodes,
        "gpus": args.nodes * args.gpus,
        "servers": len(measured),
        "page_mb": round(len(text.encode()) / 1e6, 1),
        "poll_p50_ms": round(statistics.median(times), 1),
        "poll_max_ms": round(max(times), 1),
        "baseline_p50_ms": round(statistics.median(base_times), 1),
        "baseline_x_poll": round(statistics.median(base_times) / statistics.median(times), 2),
        "held_mb": round(held / 1e6, 1),
        "polls": args.polls,
    }
    print(
        f"GPU utilization poll: {result['gpus']} GPUs on {result['nodes']} nodes, "
        f"{result['servers']} servers, a {result['page_mb']} MB page\n"
        f"  poll (parse + per pod + idle clocks)  p50 {result['poll_p50_ms']} ms, "
        f"max {result['poll_max_ms']} ms\n"
        f"  baseline (prometheus_client parser)   p50 {result['baseline_p50_ms']} ms "
        f"({result['baseline_x_poll']}x the poll)\n"
        f"  memory held                           {result['held_mb']} MB",
        file=sys.stderr,
    )
    return result


async def polls_seen(http: tornado.httpclient.AsyncHTTPClient, base: str) -> set[float]:
    """The times of the polls that measured the first server (``measured_at``)."""
    resp = await http.fetch(
        base + "api/v1/servers?limit=1", headers={"Authorization": f"token {ADMIN_TOKEN}"}
    )
    [row] = json.loads(resp.body)["servers"]
    return {row["measured_at"]} if row["measured_at"] is not None else set()


async def service_run(
    cluster: SimCluster, pools_dir: Path, hub_api: str, args: argparse.Namespace, seconds: float
) -> dict[str, Any]:
    """The service with the dcgm source (``seconds`` 0: until ``args.service_polls`` polls) or
    without a source (for ``seconds``); its CPU time and RSS over that time, and the polls."""
    extra = [SYNC_TIMEOUT, f"--GPUPoolService.utilization_interval={args.interval}"]
    if not seconds:
        extra += [
            "--GPUPoolService.utilization_source=dcgm",
            '--GPUPoolService.dcgm_urls=["/sim/v1/dcgm/metrics"]',
        ]
    proc, base = start_service(cluster.kubeconfig, pools_dir, hub_api, *extra, db_url="")
    http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
    try:
        await wait_answering(proc, answers_ok(base + "api/v1/", ADMIN_TOKEN))
        polls: set[float] = set()
        if not seconds:  # the first poll comes at start: count from the second
            while not polls:
                polls = await polls_seen(http, base)
                await asyncio.sleep(0.05)
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        seen = len(polls)
        while True:
            await asyncio.sleep(0.05)
            if seconds:
                if time.monotonic() - t0 >= seconds:
                    break
            else:
                polls |= await polls_seen(http, base)
                if len(polls) - seen >= args.service_polls:
                    break
        return {
            "cpu_s": cpu_seconds(proc.pid) - cpu0,
            "wall_s": time.monotonic() - t0,
            "rss_mb": rss_mb(proc.pid),
            "polls": len(polls) - seen,
        }
    finally:
        http.close()
        proc.terminate()
        proc.wait(timeout=30)


async def service_part(args: argparse.Namespace) -> dict[str, Any]:
    """Part 2: the service polling the simulator's exporter, against the service without."""
    hub_api = start_hub_stub(hub_models())
    cluster = SimCluster(cluster_spec(args.nodes, args.pools, args.gpus))
    populate(cluster, args.nodes, args.pools, args.pods, args.groups, servers=args.pods)
    await cluster.start()
    gc.collect()
    gc.freeze()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pools_dir = Path(tmp) / "pools"
            pools_dir.mkdir()
            write_pools(pools_dir, args.pools, args.groups)
            polling = await service_run(cluster, pools_dir, hub_api, args, 0)
            without = await service_run(cluster, pools_dir, hub_api, args, polling["wall_s"])
    finally:
        await cluster.stop()
    per_poll = (polling["cpu_s"] - without["cpu_s"]) / max(polling["polls"], 1)
    result = {
        "service_pods": args.pods,
        "service_polls": polling["polls"],
        "service_interval_s": args.interval,
        "service_cpu_per_poll_ms": round(per_poll * 1000, 1),
        "service_rss_mb": round(polling["rss_mb"], 1),
        "service_rss_without_mb": round(without["rss_mb"], 1),
        "service_rss_x_without": round(polling["rss_mb"] / without["rss_mb"], 3),
    }
    print(
        f"The service, {args.pods} servers, polling every {args.interval:g} s:\n"
        f"  CPU per poll                          {result['service_cpu_per_poll_ms']} ms "
        f"(over {result['service_polls']} polls, less the same time without a source)\n"
        f"  RSS                                   {result['service_rss_mb']} MB "
        f"({result['service_rss_x_without']}x the {result['service_rss_without_mb']} MB "
        "without a source)",
        file=sys.stderr,
    )
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--per-pod", type=int, default=2, help="GPUs per server (part 1)")
    parser.add_argument("--polls", type=int, default=5, help="polls measured in part 1")
    parser.add_argument("--pods", type=int, default=20000, help="server pods (part 2)")
    parser.add_argument("--pools", type=int, default=10, help="pools (part 2)")
    parser.add_argument("--groups", type=int, default=20, help="groups (part 2)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    parser.add_argument("--service-polls", type=int, default=5, help="polls measured in part 2")
    parser.add_argument("--no-service", action="store_true", help="part 1 only")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.polls, args.pods, args.pools = 20, 3, 40, 2
        args.interval, args.service_polls = 0.5, 3
    result = poll_part(args)
    if not args.no_service:
        result |= asyncio.run(service_part(args))
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
