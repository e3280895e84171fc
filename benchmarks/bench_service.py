"""Benchmark of the gpupool service over HTTP as the spawner uses it, on a cluster at Kubernetes'
own limits.

Builds the simulated cluster of ``bigcluster.py`` (default 5,000 nodes x 8 GPUs in 50 pools and
150,000 pods: 20,000 notebook servers, 10,000 other GPU jobs, 120,000 pods without GPUs), then:

1. **The API server's list time**: a bare client lists every node and every active pod in pages
   of 500, as the service does, reading the bytes without decoding them (``api_list_s``);
2. **Start**: the service as its own process (``python -m jupyter_gpupool.service``) against
   it, with a stub of JupyterHub's token check; ``startup_s`` is the time until it answers
   (its first full list streamed into the index), ``startup_minus_list_s`` that time less the
   API server's own list time. Target: <= 3 s;
3. **The baseline**: the same service with the admission and the pool list taken out
   (``baseline_service.py``: same HTTP, token checks and request parsing), started alongside;
   with ``--against undurable``, the service itself with its reservations kept in memory only
   (``undurable_service.py``: a 201 waits for no commit) in its place, so that the ratios say
   what the durable answers cost (the ``baseline_`` keys are then that service's);
4. **Admissions**: ``--clients`` concurrent spawners, each with its own
   :class:`~jupyter_gpupool.client.GPUPoolClient` (kept-alive connections, as in the hub), each
   sending its next ``POST api/v1/admissions`` when the previous one is answered: 1 GPU (4 in
   every fifth request, which no node has free: refused with 409) for a random user with its
   group in three random pools; the admissions are kept (reservations pile up, as in a spawn
   storm). 201 and 409 latencies are reported apart; the same requests go to the baseline.
   Targets: p99 <= 3 ms, >= 5,000 admissions/s;
5. **Pool lists**: the same clients ``GET api/v1/pools`` as a user (the spawn form), against
   the service and the baseline. Target: p99 <= 3 ms.

Both services are measured once quiet after their start (the ledger writes a session for every
running server in a thread then). The service's RSS is read after the start and after the load
(target: <= 200 MB) with its peak. The simulator lives in this process and the services in theirs, so on a 2-core machine the
service has a core while it is measured. Prints one JSON line. Run::

    python benchmarks/bench_service.py                                  # full size
    python benchmarks/bench_service.py --nodes 200 --pods 3000 --requests 500   # quick
    python benchmarks/bench_service.py --profile adm.txt --gil   # where the service's time goes

``--profile FILE`` attaches ``py-spy record`` to the service while its admissions are measured
and writes the collapsed stacks (``--gil``: of the thread holding the GIL only, what bounds the
rate on one core; ``--profile-of baseline``: the baseline's instead, to compare the two).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
from bigcluster import (
    ADMIN_TOKEN,
    SYNC_TIMEOUT,
    USER_TOKEN,
    USERS,
    add_size_arguments,
    build,
    hub_models,
    percentile,
    rss_mb,
    write_pools,
)
from service_process import (
    answers_ok,
    cpu_seconds,
    quiet,
    start_hub_stub,
    start_service,
    stop_service,
    wait_answering,
)

from jupyter_gpupool.client import AdmissionRejected, GPUPoolClient, GPUPoolError
from jupyter_gpupool.service.cluster.watch import ACTIVE_PODS
from jupyter_gpupool.sim import SimCluster

#: The second service measured: ``--against`` names it
AGAINST = {
    "baseline": Path(__file__).resolve().parent / "baseline_service.py",
    "undurable": Path(__file__).resolve().parent / "undurable_service.py",
}

#: Every this many admissions asks for more GPUs than any node has free (a 409).
REFUSED_EVERY = 5


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def api_list_seconds(cluster: SimCluster, page: int = 500) -> tuple[float, int]:
    """How long the API server takes to answer a paged list of every node and active pod (the
    bytes read, not decoded); and how many bytes that was."""
    token = cluster.token
    base = cluster.url
    total = 0
    started = time.perf_counter()
    async with aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {token}"},
        connector=aiohttp.TCPConnector(ssl=False),
    ) as http:
        for path, params in (("api/v1/nodes", {}), ("api/v1/pods", {"fieldSelector": ACTIVE_PODS})):
            cont = ""
            while True:
                query = {**params, "limit": str(page)}
                if cont:
                    query["continue"] = cont
                async with http.get(f"{base}/{path}", params=query) as resp:
                    body = await resp.read()
                    if resp.status != 200:
                        raise SystemExit(f"listing {path}: {resp.status} {body[:200]!r}")
                total += len(body)
                # only the continue token is read (it is in the first bytes: metadata first)
                head = body[:1000].decode("utf-8", "replace")
                marker = '"continue": "'
                at = head.find(marker)
                if at < 0:
                    break
                cont = head[at + len(marker) : head.index('"', at + len(marker))]
    return time.perf_counter() - started, total


class Latencies:
    """Milliseconds per answer status."""

    def __init__(self) -> None:
        self.by_status: dict[int, list[float]] = {}
        self.seconds = 0.0
        self.server_cpu_s = 0.0
        self.client_cpu_s = 0.0

    def add(self, status: int, ms: float) -> None:
        self.by_status.setdefault(status, []).append(ms)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.by_status.values())

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "per_s": round(self.count / self.seconds) if self.seconds else 0,
            # CPU time per request: the server's, and this process's (the clients')
            "server_cpu_ms": round(1000 * self.server_cpu_s / max(1, self.count), 3),
            "client_cpu_ms": round(1000 * self.client_cpu_s / max(1, self.count), 3),
        }
        for status, values in sorted(self.by_status.items()):
            out[str(status)] = {
                "n": len(values),
                "p50_ms": round(statistics.median(values), 2),
                "p99_ms": round(percentile(values, 99), 2),
            }
        return out


async def run_phase(
    clients: list[GPUPoolClient],
    total: int,
    ask: Callable[[GPUPoolClient, random.Random], Awaitable[int]],
    server: int,
) -> Latencies:
    """``total`` requests from the clients, each sending its next when its last is answered."""
    out = Latencies()
    left = total

    async def spawner(client: GPUPoolClient, seed: int) -> None:
        nonlocal left
        rng = random.Random(seed)
        while left > 0:
            left -= 1
            t = time.perf_counter()
            status = await ask(client, rng)
            out.add(status, (time.perf_counter() - t) * 1000)

    started = time.perf_counter()
    server_cpu, client_cpu = cpu_seconds(server), time.process_time()
    await asyncio.gather(*(spawner(c, i) for i, c in enumerate(clients)))
    out.seconds = time.perf_counter() - started
    out.server_cpu_s = cpu_seconds(server) - server_cpu
    out.client_cpu_s = time.process_time() - client_cpu
    return out


def profiler(out: str | None, pid: int, gil: bool) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the service's process into ``out`` (collapsed stacks, a flame
    graph's input) while its admissions are measured, only the thread holding the GIL with
    ``gil``; None without ``--profile``."""
    if not out:
        return None
    command = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--output", out]
    spy = subprocess.Popen([*command, "--rate", "200", *(["--gil"] if gil else [])])
    time.sleep(1.0)  # attached before the first request
    return spy


def admission_asker(pool_names: list[str], groups: int) -> Callable[..., Awaitable[int]]:
    count = 0

    async def ask(client: GPUPoolClient, rng: random.Random) -> int:
        nonlocal count
        count += 1
        user = rng.randrange(USERS)
        try:
            await client.admit(
                user=f"u{user}",
                groups=[f"g{user % groups:02d}"],
                pools=rng.sample(pool_names, min(3, len(pool_names))),
                gpus=4 if count % REFUSED_EVERY == 0 else 1,
                server="",
            )
        except AdmissionRejected:
            return 409
        except GPUPoolError as e:
            return e.status
        return 201

    return ask


async def ask_pools(client: GPUPoolClient, rng: random.Random) -> int:
    try:
        await client.pools()
    except GPUPoolError as e:
        return e.status
    return 200


def ratio(baseline: float, measured: float) -> float:
    return round(measured / baseline, 2) if baseline else 0.0


async def main(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    built = await build(args)
    cluster = built.cluster
    list_s, list_bytes = await api_list_seconds(cluster)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        pools_dir = Path(tmp) / "pools"
        write_pools(pools_dir, args.pools, args.groups)
        try:
            t0 = time.perf_counter()
            proc, base = start_service(cluster.kubeconfig, pools_dir, hub_api, SYNC_TIMEOUT)
            procs.append(proc)
            await wait_answering(proc, answers_ok(base + "api/v1/", ADMIN_TOKEN))
            startup_s = time.perf_counter() - t0
            rss_ready = rss_mb(proc.pid)
            bproc, bbase = start_service(
                cluster.kubeconfig,
                Path(tmp) / "pools",
                hub_api,
                SYNC_TIMEOUT,
                db_url=f"sqlite:///{Path(tmp) / 'baseline.sqlite'}",
                command=(sys.executable, str(AGAINST[args.against])),
            )
            procs.append(bproc)
            await wait_answering(bproc, answers_ok(bbase + "api/v1/", ADMIN_TOKEN))
            baseline_rss_ready = rss_mb(bproc.pid)

            pool_names = [f"pool-{p:02d}" for p in range(args.pools)]
            results: dict[str, dict[str, Latencies]] = {}
            quiet_s = {"service": await quiet(proc.pid), "baseline": await quiet(bproc.pid)}
            for name, url, pid in (("service", base, proc.pid), ("baseline", bbase, bproc.pid)):
                admins = [GPUPoolClient(url, ADMIN_TOKEN) for _ in range(args.clients)]
                users = [GPUPoolClient(url, USER_TOKEN) for _ in range(args.clients)]
                try:
                    admit = admission_asker(pool_names, args.groups)
                    # warm up: connections opened, token checks cached
                    await run_phase(admins, args.clients * 4, admit, pid)
                    await run_phase(users, args.clients * 4, ask_pools, pid)
                    spy = profiler(args.profile, pid, args.gil) if name == args.profile_of else None
                    admissions = await run_phase(admins, args.requests, admit, pid)
                    if spy is not None:
                        spy.send_signal(signal.SIGINT)
                        spy.wait(timeout=60)
                    results[name] = {
                        "admissions": admissions,
                        "pools": await run_phase(users, args.requests, ask_pools, pid),
                    }
                finally:
                    for c in admins + users:
                        await c.close()
            rss_loaded = rss_mb(proc.pid)
            rss_peak = peak_rss_mb(proc.pid)
            baseline_rss_loaded = rss_mb(bproc.pid)
        finally:
            for p in procs:
                stop_service(p)
            await cluster.stop()

    service, baseline = results["service"], results["baseline"]
    adm, badm = service["admissions"], baseline["admissions"]
    pls, bpls = service["pools"], baseline["pools"]
    every = lambda lat: [ms for v in lat.by_status.values() for ms in v]  # noqa: E731
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "servers": built.servers,
        "gpu_jobs": built.gpu_jobs,
        "cpu_pods": built.cpu_pods,
        "pools": args.pools,
        "clients": args.clients,
        "requests_per_phase": args.requests,
        "against": args.against,
        "admissions": adm.summary(),
        "admission_p99_ms": round(percentile(every(adm), 99), 2),
        "admissions_per_s": adm.summary()["per_s"],
        "pools_list": pls.summary(),
        "pools_p99_ms": round(percentile(every(pls), 99), 2),
        "baseline_admissions": badm.summary(),
        "baseline_pools_list": bpls.summary(),
        # the cost of the work itself: the service's p50 over the baseline's (> 1)
        "admission_x_baseline_p50": ratio(
            statistics.median(every(badm)), statistics.median(every(adm))
        ),
        "api_list_s": round(list_s, 2),
        "api_list_mb": round(list_bytes / 2**20, 1),
        "startup_s": round(startup_s, 2),
        "startup_minus_list_s": round(startup_s - list_s, 2),
        "service_rss_ready_mb": round(rss_ready, 1),
        "service_rss_mb": round(rss_loaded, 1),
        "service_peak_rss_mb": round(rss_peak, 1),
        "baseline_rss_ready_mb": round(baseline_rss_ready, 1),
        "baseline_rss_mb": round(baseline_rss_loaded, 1),
        "populate_s": round(built.populate_s, 2),
        "sim_settle_s": round(built.settle_s, 2),
        # after the start, until each service was quiet (its first database writes done)
        "quiet_after_start_s": {k: round(v, 1) for k, v in quiet_s.items()},
        "targets": {
            "admission_p99_ms": 3,
            "pools_p99_ms": 3,
            "admissions_per_s": 5000,
            "startup_minus_list_s": 3,
            "service_rss_mb": 200,
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(parser)
    parser.add_argument("--clients", type=int, default=16, help="concurrent spawners")
    parser.add_argument("--requests", type=int, default=4000, help="requests per phase")
    parser.add_argument(
        "--profile", metavar="FILE", help="py-spy's collapsed stacks of the service's admissions"
    )
    parser.add_argument("--gil", action="store_true", help="--profile: the GIL's holder only")
    parser.add_argument(
        "--against",
        choices=sorted(AGAINST),
        default="baseline",
        help="what the service is compared with: the baseline (no admission), or the service "
        "whose reservations are not written (undurable_service.py: what durability costs)",
    )
    parser.add_argument(
        "--profile-of",
        choices=("service", "baseline"),
        default="service",
        help="--profile: which of the two services (default: the service)",
    )
    result = asyncio.run(main(parser.parse_args()))
    print(json.dumps(result))
