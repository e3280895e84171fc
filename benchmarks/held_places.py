"""Part of ``bench_queue.py`` (``--held``): what 1,000 places held in line cost the service
while the line moves, measured on the service as the hub runs it.

The demo's cluster (examples/cluster.yaml, the simulator) runs in this process, the gpupool
service as its own process (``python -m jupyter_gpupool.service``, the demo's pools and quotas,
SQLite) with a stub of JupyterHub's token check. dev-pool's 4 GPUs are taken by 4 pods of 1
GPU. Then ``--held`` requests of 1 GPU wait in line for dev-pool (``--per-user`` per user,
within the service's cap), held by ``--askers`` batch questions (``POST
api/v1/admissions/wait``, as the hub processes' spawners ask: each question re-asked with what
it heard as soon as it is answered). Every ``--every`` seconds the line moves, one of two ways:

- ``elsewhere``: a server in inference-pool starts or stops (a pass runs; the requests held
  for dev-pool cannot move);
- ``head``: dev-pool's oldest server stops, the first request in line is admitted, its
  "spawner" (the asker that hears it) makes its pod, and its user joins the line again at the
  back (every place moves up one).

Meanwhile a bystander (bob) asks ``GET api/v1/pools`` every 20 ms. Each way is measured for
``--seconds`` with the places held and, in the same run, with none held (the baseline, the same
moves): the service process's CPU seconds (``/proc``) and bob's p50 / p99 in ms.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_admission import percentile
from service_process import (
    answers_ok,
    cpu_seconds,
    quiet,
    start_hub_stub,
    start_service,
    stop_service,
    wait_answering,
)

from jupyter_gpupool.client import GPUPoolClient, GPUPoolError
from jupyter_gpupool.core.usage import labels as L

ROOT = Path(__file__).resolve().parents[1]
SPAWNER = "bench-held-spawner"
BOB = "bench-held-bob"
DEV_NODE, ELSEWHERE_NODE = "gpu-node-5", "gpu-node-3"


def gpu_pod(name: str, node: str, admission: str | None = None) -> dict[str, Any]:
    labels = {L.POD_ADMISSION: admission} if admission else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {L.GPU_RESOURCE: "1"}}}
            ],
        },
    }


class Held:
    """The places in line and the questions that hold them."""

    def __init__(self, cluster: Any, url: str, args: Any):
        self.cluster, self.url, self.args = cluster, url, args
        self.admin = GPUPoolClient(url, SPAWNER, max_clients=20)
        #: per asker: admission id -> what it heard (None: nothing yet)
        self.heard: list[dict[str, dict[str, Any] | None]] = [{} for _ in range(args.askers)]
        self.user_of: dict[str, str] = {}
        self.dev_pods: collections.deque[str] = collections.deque()
        self.joined = asyncio.Event()
        self.n = 0
        self.admitted = 0
        self.refused: dict[int, int] = {}
        self.refusal = ""
        self.joining: set[asyncio.Future[None]] = set()

    async def join(self, user: str, asker: int) -> None:
        self.n += 1
        try:
            answer = await self.admin.admit(
                user=user,
                groups=[],
                pools=["dev-pool"],
                gpus=1,
                server=f"s{self.n}",
                queue=True,
            )
        except GPUPoolError as e:
            self.refused[e.status] = self.refused.get(e.status, 0) + 1
            self.refusal = e.message
            return
        self.user_of[answer["id"]] = user
        self.heard[asker][answer["id"]] = None
        self.joined.set()

    async def fill(self) -> None:
        users = max(1, self.args.held // self.args.per_user)
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with sem:
                await self.join(f"u{i // self.args.per_user:04d}", i % self.args.askers)

        await asyncio.gather(*(one(i) for i in range(users * self.args.per_user)))

    async def ask(self, k: int, client: GPUPoolClient) -> None:
        heard = self.heard[k]
        while True:
            if not heard:
                self.joined.clear()
                await self.joined.wait()
                continue
            try:
                rows = await client.admissions_wait(dict(heard), wait=20)
            except GPUPoolError:
                await asyncio.sleep(0.1)
                continue
            for aid, row in rows.items():
                if row.get("state") == "queued":
                    if aid in heard:
                        heard[aid] = {"state": "queued", "position": row.get("position")}
                    continue
                heard.pop(aid, None)
                if row.get("state") == "admitted":
                    self.admitted += 1
                    name = f"held-{aid}"
                    self.cluster.store.create("pods", "default", gpu_pod(name, DEV_NODE, aid))
                    self.dev_pods.append(name)
                    joining = asyncio.ensure_future(self.join(self.user_of[aid], k))
                    self.joining.add(joining)
                    joining.add_done_callback(self.joining.discard)

    def filler(self) -> None:
        """Another server takes one of dev-pool's GPUs."""
        self.n += 1
        name = f"filler-{self.n}"
        self.cluster.store.create("pods", "default", gpu_pod(name, DEV_NODE))
        self.dev_pods.append(name)

    def places(self) -> int:
        return sum(len(h) for h in self.heard)


async def bystander(url: str, seconds: float) -> list[float]:
    """Bob's ``GET api/v1/pools`` every 20 ms for ``seconds``: each answer's ms. Run in a
    process of its own (:func:`asked_by_bob`), so that the askers' work in this one is not in
    his figures."""
    out: list[float] = []
    async with GPUPoolClient(url, BOB) as client:
        await client.pools()
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            t = time.perf_counter()
            await client.pools()
            out.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.02)
    return out


async def asked_by_bob(url: str, seconds: float) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        url,
        str(seconds),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    out, _ = await proc.communicate()
    return list(json.loads(out))


async def mover(cluster: Any, way: str, held: Held, until: float, every: float) -> int:
    """The line moves every ``every`` seconds; returns the moves made."""
    moves = 0
    while time.perf_counter() < until:
        await asyncio.sleep(every)
        if way == "elsewhere":
            name = "held-elsewhere"
            if cluster.pod("default", name) is None:
                cluster.store.create("pods", "default", gpu_pod(name, ELSEWHERE_NODE))
            else:
                cluster.store.delete("pods", "default", name, grace_period=0)
        elif held.dev_pods:
            cluster.store.delete("pods", "default", held.dev_pods.popleft(), grace_period=0)
            if not held.places():  # nobody waits: another server takes the GPU (the baseline)
                held.filler()
        moves += 1
    return moves


async def measure(cluster: Any, pid: int, url: str, way: str, held: Held, seconds: float) -> dict:
    until = time.perf_counter() + seconds
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    moves, times = await asyncio.gather(
        mover(cluster, way, held, until, held.args.every), asked_by_bob(url, seconds)
    )
    cpu = cpu_seconds(pid) - cpu
    wall = time.perf_counter() - started
    times.sort()
    return {
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 1),
        "bob_p50_ms": round(percentile(times, 0.5), 1),
        "bob_p99_ms": round(percentile(times, 0.99), 1),
        "moves": moves,
    }


async def run(args: Any) -> dict[str, Any]:
    from jupyter_gpupool.sim import SimCluster
    from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

    work = Path(tempfile.mkdtemp(prefix="bench-held-"))
    pools_dir = work / "pools"
    shutil.copytree(ROOT / "examples" / "pools", pools_dir)
    cluster = SimCluster(example_cluster_spec(), kubeconfig=work / "kubeconfig", start_delay=0)
    await cluster.start()
    hub_api = start_hub_stub(
        {
            SPAWNER: {"kind": "service", "name": "spawner", "scopes": ["custom:gpupool:admin"]},
            BOB: {
                "kind": "user",
                "name": "bob",
                "groups": [],
                "admin": False,
                "scopes": ["custom:gpupool:use"],
            },
        }
    )
    out: dict[str, Any] = {"held": args.held, "askers": args.askers, "every_s": args.every}
    proc = held = None
    tasks: list[asyncio.Future[Any]] = []
    askers: list[GPUPoolClient] = []
    try:
        proc, url = start_service(cluster.kubeconfig, pools_dir, hub_api)
        await wait_answering(proc, answers_ok(url + "api/v1/pools", SPAWNER), timeout=60)
        held = Held(cluster, url, args)
        while len(held.dev_pods) < 4:  # dev-pool full
            held.filler()
        await quiet(proc.pid)
        for way in ("elsewhere", "head"):
            out[f"{way}_none"] = await measure(cluster, proc.pid, url, way, held, args.seconds)
        await asyncio.sleep(0.5)  # the service has seen dev-pool full
        t = time.perf_counter()
        await held.fill()
        out["fill_s"] = round(time.perf_counter() - t, 1)
        out["places"] = held.places()
        askers = [GPUPoolClient(url, SPAWNER) for _ in range(args.askers)]
        tasks = [asyncio.ensure_future(held.ask(k, c)) for k, c in enumerate(askers)]
        await asyncio.sleep(1.0)  # the questions asked and held
        for way in ("elsewhere", "head"):
            out[f"{way}_held"] = await measure(cluster, proc.pid, url, way, held, args.seconds)
        out["admitted_from_line"] = held.admitted
        out["refused"] = held.refused
        out["refusal"] = held.refusal
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for c in askers:
            await c.close()
        if proc is not None:
            stop_service(proc)
        if held is not None:
            await held.admin.close()
        await cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    for way in ("elsewhere", "head"):
        none, full = out[f"{way}_none"], out[f"{way}_held"]
        out[f"{way}_cpu_held_x_none"] = round(full["cpu_s"] / max(none["cpu_s"], 0.01), 1)
        out[f"{way}_p99_held_x_none"] = round(full["bob_p99_ms"] / max(none["bob_p99_ms"], 0.1), 1)
    return out


if __name__ == "__main__":  # bob, in a process of his own: URL SECONDS
    print(json.dumps(asyncio.run(bystander(sys.argv[1], float(sys.argv[2])))))
