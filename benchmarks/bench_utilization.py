"""Benchmark of GPU utilization polling (issue 17): what one poll costs the service at 5,000
nodes x 8 GPUs.

One poll of the ``dcgm`` source reads the exporter pages of every GPU node (here: one page of
all 40,000 GPUs, the size of every node's page together, three metrics per GPU as the simulated
exporter writes), parses them (:func:`~jupyter_gpupool.core.utilization.parse_exporter`, with
prometheus_client's parser), groups them per pod (``by_pod``) and moves the idle clocks of the
running servers on (:class:`~jupyter_gpupool.core.idle.IdleClock`). The baseline, measured in
the same run on the same text, is prometheus_client's general parser, which the service used
first (it reads every metric and keeps every sample). Figures: milliseconds per poll (p50 and max over
``--polls``), the page's size, the memory the measurements hold (tracemalloc), and the ratio to
the baseline. Run::

    python benchmarks/bench_utilization.py            # 5,000 nodes x 8 GPUs, 20,000 servers
    python benchmarks/bench_utilization.py --quick    # tiny

Prints one JSON line on stdout and a summary on stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client.parser import text_string_to_metric_families

from jupyter_gpupool.core.idle import IdleClock
from jupyter_gpupool.core.utilization import by_pod, parse_exporter

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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--per-pod", type=int, default=2, help="GPUs per server")
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.polls = 20, 3
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


if __name__ == "__main__":
    print(json.dumps(main()))
