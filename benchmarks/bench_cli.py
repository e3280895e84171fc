"""Benchmark of ``gpupool get pools`` against a gpuctl-style recount, as whole processes.

Builds the large simulated cluster of ``bigcluster.py`` (default 5,000 nodes x 8 GPUs in 50
pools, 150,000 pods: 20,000 servers, 10,000 other GPU jobs, 120,000 CPU pods) in this process,
starts the gpupool service as its own process against it, then times, as whole processes (from
start to exit, wall time), each ``--runs`` times, interleaved:

- ``gpupool get pools --url URL --token TOKEN``: the installed console script, what a user runs;
- ``recount_pools.py``: what a gpuctl-like tool does without a service: list every node and pod
  with the official ``kubernetes`` client (paged by 500, as kubectl) and sum per pool;
- ``recount_pools.py --raw``: the same lists read as plain JSON, a faster baseline.

All three tables must agree on GPU TOTAL/USED/FREE and NODE COUNT of every pool (every run is
checked), or the benchmark fails. Prints one JSON line: the sizes, the median and max seconds of
each, the ratios (baseline median / ``get pools`` median, > 1 means gpupool is faster; target:
``recount_x_get_pools`` >= 100) and, for scale, the median of an empty ``python -c pass``.
Progress goes to stderr. Run::

    python benchmarks/bench_cli.py                                        # full size
    python benchmarks/bench_cli.py --nodes 20 --pools 3 --pods 200 --runs 2   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tornado.httpclient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bigcluster import (  # noqa: E402
    ADMIN_TOKEN,
    SYNC_TIMEOUT,
    add_size_arguments,
    build,
    hub_models,
    write_pools,
)
from service_process import (  # noqa: E402
    answers_ok,
    start_hub_stub,
    start_service,
    wait_answering,
)

RECOUNT = HERE / "recount_pools.py"
#: The figures the three tables must agree on.
COMPARED = ("GPU TOTAL", "GPU USED", "GPU FREE", "NODE COUNT")
TARGET = 100
#: No single process may take longer than this (seconds).
PROCESS_TIMEOUT = 1800

Table = dict[str, tuple[int, ...]]


class Disagreement(SystemExit):
    """The tables differ: the benchmark would compare different answers."""


def log(message: str) -> None:
    print(f"bench_cli: {message}", file=sys.stderr, flush=True)


def gpupool_command() -> list[str]:
    """The ``gpupool`` console script installed beside this Python (what ``pip install`` puts
    on a user's PATH), else the module."""
    script = Path(sys.executable).parent / "gpupool"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "jupyter_gpupool.cli"]


def parse_table(text: str) -> Table:
    """A gpuctl table's rows as ``{pool: (GPU TOTAL, GPU USED, GPU FREE, NODE COUNT)}``, the
    pools without nodes left out. Columns are left-aligned: a cell starts under its header."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("POOL NAME"):
        raise Disagreement(f"not a pool table:\n{text}")
    header = lines[0]
    starts = [0] + [m.end() for m in re.finditer(r"  +", header)]  # two spaces part columns
    ends: list[int | None] = [*starts[1:], None]
    spans = {header[a:b].strip(): (a, b) for a, b in zip(starts, ends, strict=True)}
    missing = [h for h in ("POOL NAME", *COMPARED) if h not in spans]
    if missing:
        raise Disagreement(f"no column {missing} in:\n{text}")
    out: Table = {}
    for line in lines[1:]:
        name = line[slice(*spans["POOL NAME"])].strip()
        figures = tuple(int(line[slice(*spans[h])].strip()) for h in COMPARED)
        if figures[-1]:  # pools defined without nodes are not in a recount
            out[name] = figures
    return out


def check_agree(tables: Mapping[str, Table], expected_pools: int) -> None:
    """Every table the same as the first, with ``expected_pools`` pools; else fail loudly."""
    (first_name, first), *others = tables.items()
    if len(first) != expected_pools:
        raise Disagreement(
            f"{first_name}: {len(first)} pools with nodes, expected {expected_pools}: {first}"
        )
    for name, t in others:
        if t != first:
            diff = {
                pool: {first_name: first.get(pool), name: t.get(pool)}
                for pool in sorted(set(first) | set(t))
                if first.get(pool) != t.get(pool)
            }
            raise Disagreement(f"the tables disagree ({', '.join(COMPARED)}): {diff}")


def answers_patiently(url: str) -> Callable[[], Awaitable[bool]]:
    """:func:`service_process.answers_ok`, a request that times out being a "not yet": while
    the service lists 150,000 pods, this process's event loop is busy answering that list."""
    answers = answers_ok(url, ADMIN_TOKEN)

    async def patient() -> bool:
        try:
            return await answers()
        except tornado.httpclient.HTTPClientError as e:
            if e.code == 599:  # timed out
                return False
            raise

    return patient


async def stop_service(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s (the service ignores SIGTERM until its first list is
    done). Waited for without blocking this process's loop, which serves the cluster."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(proc.wait, 30)
    except subprocess.TimeoutExpired:
        log("the service did not stop on SIGTERM within 30 s: killed")
        proc.kill()
        await asyncio.to_thread(proc.wait)


async def timed(command: Sequence[str], cwd: str) -> tuple[float, str]:
    """Run ``command`` as a process; ``(wall seconds from start to exit, stdout)``. Awaited, so
    that this process's event loop keeps serving the simulated cluster and the hub stub."""
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), PROCESS_TIMEOUT)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} exited with {proc.returncode}:\n{err.decode(errors='replace')}"
        )
    return elapsed, out.decode()


def summary(times: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(times), 4), "max": round(max(times), 4)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    hub_api = start_hub_stub(hub_models())
    built = await build(args)
    cluster = built.cluster
    log(
        f"{args.pods} pods created in {built.populate_s:.1f} s, running {built.settle_s:.1f} s later"
    )
    with tempfile.TemporaryDirectory() as tmp:
        pools_dir = Path(tmp) / "pools"
        write_pools(pools_dir, args.pools, args.groups)
        proc, base = start_service(cluster.kubeconfig, pools_dir, hub_api, SYNC_TIMEOUT)
        try:
            t0 = time.perf_counter()
            await wait_answering(proc, answers_patiently(base + "api/v1/"))
            ready = time.perf_counter() - t0
            log(f"the service answers after {ready:.1f} s")
            recount = [sys.executable, str(RECOUNT), "--kubeconfig", cluster.kubeconfig]
            commands = {
                "get_pools": [
                    *gpupool_command(),
                    "get",
                    "pools",
                    "--url",
                    base,
                    "--token",
                    ADMIN_TOKEN,
                ],
                "recount": recount,
                "raw_recount": [*recount, "--raw"],
                "python_floor": [sys.executable, "-c", "pass"],
            }
            work = Path(tmp) / "cwd"  # an empty working directory: no demo found there
            work.mkdir()
            await timed(commands["get_pools"], str(work))  # warm-up: the service's token cache
            times: dict[str, list[float]] = {name: [] for name in commands}
            for run in range(args.runs):
                tables: dict[str, Table] = {}
                for name, command in commands.items():
                    elapsed, out = await timed(command, str(work))
                    times[name].append(elapsed)
                    if name != "python_floor":
                        tables[name] = parse_table(out)
                    log(f"run {run + 1}/{args.runs}: {name} {elapsed:.3f} s")
                check_agree(tables, min(args.nodes, args.pools))
        finally:
            await stop_service(proc)
            await cluster.stop()
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {
        "nodes": args.nodes,
        "pools": args.pools,
        "gpus_per_node": args.gpus,
        "pods": args.pods,
        "servers": built.servers,
        "gpu_jobs": built.gpu_jobs,
        "cpu_pods": built.cpu_pods,
        "runs": args.runs,
        "tables_agree": True,  # check_agree raised otherwise
        "pools_compared": len(tables["get_pools"]),
        "service_ready_s": round(ready, 2),
        "get_pools_s": summary(times["get_pools"]),
        "recount_s": summary(times["recount"]),
        "raw_recount_s": summary(times["raw_recount"]),
        "python_floor_s": summary(times["python_floor"]),
        "recount_x_get_pools": round(medians["recount"] / medians["get_pools"], 1),
        "raw_recount_x_get_pools": round(medians["raw_recount"] / medians["get_pools"], 1),
        "target_recount_x_get_pools": TARGET,
        "load_avg_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(parser)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each command")
    print(json.dumps(asyncio.run(main(parser.parse_args()))), flush=True)
