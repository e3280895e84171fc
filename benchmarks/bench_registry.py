"""Benchmark of a large registry change while admissions go on (issue 27's "valid but large pool
sets stall the whole service").

Starts a small simulated cluster and the gpupool service as its own process
(``python -m jupyter_gpupool.service``, with ``max_pools`` raised to fit the change), with a stub
of JupyterHub's token check, and one client asking for admissions one after the other (1 GPU in
a pool of the cluster) the whole time. Then:

1. **Quiet**: admissions alone for ``--quiet-seconds``: their latency with nothing else to do;
2. **Accept**: ``POST api/v1/pools`` of ``--pools`` new pool documents (one YAML body) while the
   admissions go on: the change's time (``accept_s``; target: under 0.5 s for 1,000 pools) and
   the latency of every admission answered meanwhile (``accept_admission_max_ms``; target: no
   admission waits more than 50 ms);
3. **Refuse**: a body of ``--refuse-pools`` pools (17,661 in about 1 MB at full size), more than
   ``max_pools`` allows: its 400 (``refuse_s``) and the admissions meanwhile;
4. **The baseline**: the same change and refusal against the same service with its registry
   work done in the event loop, as before (``baseline_registry_service.py``), started on its
   own copy of the same pool files after the service has stopped.

Prints one JSON line; ``on_loop_x_off_loop_wait`` is the baseline's longest admission wait
during the change over the service's (above 1: what the thread buys). Run::

    python benchmarks/bench_registry.py                       # 1,000 pools, 17,661 refused
    python benchmarks/bench_registry.py --pools 200 --refuse-pools 2000 --quiet-seconds 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tornado.httpclient
from bigcluster import ADMIN_TOKEN, cluster_spec, hub_models, percentile, write_pools
from service_process import (
    SERVICE_COMMAND,
    answers_ok,
    quiet,
    start_hub_stub,
    start_service,
    stop_service,
    wait_answering,
)

from jupyter_gpupool.sim import SimCluster

BASELINE = (sys.executable, str(Path(__file__).resolve().parent / "baseline_registry_service.py"))
#: The pools the cluster has before the change (one holds the admissions).
CLUSTER_POOLS = 2
HEADERS = {"Authorization": f"token {ADMIN_TOKEN}"}


def pool_documents(count: int, prefix: str) -> str:
    """``count`` pool documents in one body, as compact as a person would write them (17,661
    take about 1 MB)."""
    return "".join(
        f"---\nkind: pool\nversion: v0.1\npool: {{name: {prefix}-{i}}}\n" for i in range(count)
    )


class Admissions:
    """One client asking for an admission after the other (kept: once the user's quota is full,
    each is refused with a 409, decided as any other): every latency with when it was sent."""

    def __init__(self, base: str):
        self.base = base
        self.http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        self.sent: list[tuple[float, float, int]] = []  # (sent at, ms, status)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._answered = asyncio.Event()

    async def one(self) -> None:
        body = {"user": "u0", "groups": ["g00"], "pools": ["pool-00"], "gpus": 1}
        t0 = time.perf_counter()
        resp = await self.http.fetch(
            self.base + "api/v1/admissions",
            method="POST",
            body=json.dumps(body),
            headers=HEADERS,
            raise_error=False,
            request_timeout=600,
        )
        self.sent.append((t0, 1000 * (time.perf_counter() - t0), resp.code))
        self._answered.set()

    async def in_flight_answered(self) -> None:
        """Back once the admission sent last has its answer (one held up by a change is
        answered after the change's own answer)."""
        self._answered.clear()
        await self._answered.wait()

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self.one()

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    def between(self, start: float, end: float) -> list[tuple[float, int]]:
        """``(ms, status)`` of the admissions sent or answered between ``start`` and ``end``."""
        return [(ms, s) for t0, ms, s in self.sent if t0 <= end and t0 + ms / 1000 >= start]


def summary(answered: list[tuple[float, int]]) -> dict[str, Any]:
    ms = sorted(m for m, _ in answered)
    statuses: dict[str, int] = {}
    for _, s in answered:
        statuses[str(s)] = statuses.get(str(s), 0) + 1
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2) if ms else 0.0,
        "max_ms": round(ms[-1], 2) if ms else 0.0,
        "status": statuses,
    }


async def change(base: str, body: str) -> tuple[int, float, str]:
    http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
    t0 = time.perf_counter()
    resp = await http.fetch(
        base + "api/v1/pools",
        method="POST",
        body=body,
        headers={**HEADERS, "Content-Type": "application/yaml"},
        raise_error=False,
        request_timeout=600,
    )
    seconds = time.perf_counter() - t0
    http.close()
    return resp.code, seconds, (resp.body or b"")[:200].decode("utf-8", "replace")


async def measure(
    command: tuple[str, ...], cluster: SimCluster, hub_api: str, pools_dir: Path, args: Any
) -> dict[str, Any]:
    """The quiet, accept and refuse phases against one service started with ``command``."""
    proc, base = start_service(
        cluster.kubeconfig,
        pools_dir,
        hub_api,
        f"--GPUPoolService.max_pools={args.pools + CLUSTER_POOLS}",
        db_url="",
        command=command,
    )
    try:
        await wait_answering(proc, answers_ok(base + "api/v1/", ADMIN_TOKEN), timeout=120)
        await quiet(proc.pid)
        asker = Admissions(base)
        for _ in range(20):  # warm up: connections, the token check cached
            await asker.one()
        asker.sent.clear()
        asker.start()
        t0 = time.perf_counter()
        await asyncio.sleep(args.quiet_seconds)
        quiet_phase = asker.between(t0, time.perf_counter())
        t1 = time.perf_counter()
        accepted = await change(base, pool_documents(args.pools, "big"))
        end = time.perf_counter()
        await asker.in_flight_answered()
        accept_phase = asker.between(t1, end)
        await asyncio.sleep(0.2)
        t2 = time.perf_counter()
        refused = await change(base, pool_documents(args.refuse_pools, "huge"))
        end = time.perf_counter()
        await asker.in_flight_answered()
        refuse_phase = asker.between(t2, end)
        await asker.stop()
        asker.http.close()
    finally:
        stop_service(proc)
    return {
        "quiet": summary(quiet_phase),
        "accept": {"status": accepted[0], "s": accepted[1], "answer": accepted[2]},
        "accept_admissions": summary(accept_phase),
        "refuse": {"status": refused[0], "s": refused[1], "answer": refused[2]},
        "refuse_admissions": summary(refuse_phase),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    runs: dict[str, dict[str, Any]] = {}
    async with SimCluster(cluster_spec(args.nodes, CLUSTER_POOLS, 8)) as cluster:
        with tempfile.TemporaryDirectory() as tmp:
            pristine = Path(tmp) / "pools"
            write_pools(pristine, CLUSTER_POOLS, 1)
            for name, command in (("service", SERVICE_COMMAND), ("baseline", BASELINE)):
                pools_dir = Path(tmp) / name
                shutil.copytree(pristine, pools_dir)
                runs[name] = await measure(command, cluster, hub_api, pools_dir, args)
    service, baseline = runs["service"], runs["baseline"]
    off, on = service["accept_admissions"]["max_ms"], baseline["accept_admissions"]["max_ms"]
    return {
        "pools": args.pools,
        "body_kb": round(len(pool_documents(args.pools, "big")) / 1024, 1),
        "accept_status": service["accept"]["status"],
        "accept_s": round(service["accept"]["s"], 3),
        "accept_admissions": service["accept_admissions"],
        "quiet_admissions": service["quiet"],
        "refuse_pools": args.refuse_pools,
        "refuse_body_kb": round(len(pool_documents(args.refuse_pools, "huge")) / 1024, 1),
        "refuse_status": service["refuse"]["status"],
        "refuse_s": round(service["refuse"]["s"], 3),
        "refuse_admissions": service["refuse_admissions"],
        "baseline_accept_s": round(baseline["accept"]["s"], 3),
        "baseline_accept_admissions": baseline["accept_admissions"],
        "baseline_refuse_s": round(baseline["refuse"]["s"], 3),
        "on_loop_x_off_loop_wait": round(on / off, 2) if off else 0.0,
        "targets": {"accept_s": 0.5, "admission_max_ms": 50},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=1000, help="pools the change creates")
    parser.add_argument(
        "--refuse-pools", type=int, default=17661, help="pools of the body that is refused"
    )
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--quiet-seconds", type=float, default=3.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    result = asyncio.run(main(parse_args()))
    print(json.dumps(result))
    sys.exit(0 if result["accept_status"] == 201 else 1)
