"""Benchmark of GPUPoolSpawner against plain KubeSpawner on the same simulated cluster.

The demo's cluster (examples/cluster.yaml) runs in this process, with a kubelet that marks a
bound pod Running after ``--start-delay`` seconds (a container starting); the gpupool service
runs as its own process (``python -m jupyter_gpupool.service``, the demo's pools and quotas) with
a stub of JupyterHub's token check; the spawners run in this process, as in the hub.

1. Spawn time: ``await spawner.start()`` until the server's URL is known, for KubeSpawner
   (node selector and GPU limit of training-pool set by hand) and GPUPoolSpawner (the same
   pod through the form's options: launch options, admission, pod), interleaved, ``--spawns``
   each after one warm-up; medians, and ``spawn_gpupool_x_kubespawner``, GPUPoolSpawner's
   median over KubeSpawner's (the cost of admission; above 1). Target: <= 1.05.
2. First pool full: both training-pool nodes are taken by other pods; GPUPoolSpawner is asked
   for ``["training-pool", "inference-pool"]``; the time from ``start()`` to its pod existing.
   Target: < 1 s. KubeSpawner pointed at the full pool waits out its ``start_timeout``
   (``--kube-timeout``, measured too).

Prints one JSON line. Run::

    python benchmarks/bench_spawn.py
    python benchmarks/bench_spawn.py --spawns 3 --start-delay 0 --kube-timeout 2   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tornado.httpclient  # noqa: E402
from service_process import (  # noqa: E402
    answers_ok,
    start_hub_stub,
    start_service,
    wait_answering,
)

SPAWNER_TOKEN = "bench-spawner-token"


class User:
    """The parts of a JupyterHub user a spawner reads."""

    def __init__(self, name: str, groups: list[str]):
        self.name = self.escaped_name = name
        self.id = abs(hash(name)) % 100000
        self.url = f"/user/{name}/"
        self.groups = [type("Group", (), {"name": g})() for g in groups]
        self.spawners: dict[str, Any] = {}


async def start_gpupool_service(
    kubeconfig: str, pools_dir: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """The service, answering the spawner's token (or SystemExit within 60 s)."""
    hub_api = start_hub_stub(
        {
            SPAWNER_TOKEN: {
                "kind": "service",
                "name": "gpupool-spawner",
                "scopes": ["custom:gpupool:admin"],
            }
        }
    )
    proc, url = start_service(kubeconfig, pools_dir, hub_api)
    try:
        await wait_answering(proc, answers_ok(url + "api/v1/pools", SPAWNER_TOKEN), timeout=60)
    except SystemExit:
        proc.kill()
        raise
    return proc, url


def make(cls: type, user: User, **config: Any) -> Any:
    from jupyterhub.objects import Hub, Server

    settings = {
        "namespace": "default",
        "image": "quay.io/jupyter/base-notebook",
        "cmd": ["jupyterhub-singleuser"],
        "start_timeout": 60,
        "http_timeout": 30,
        **config,
    }
    spawner = cls(
        hub=Hub(),
        user=user,
        api_token="bench-token",
        oauth_client_id=f"jupyterhub-user-{user.name}",
        **settings,
    )
    spawner.server = Server(base_url=f"/user/{user.name}/")
    return spawner


async def timed_start(spawner: Any, seed: int = 0) -> float:
    # KubeSpawner polls for the running pod with exponential_backoff's random waits: the same
    # seed for both spawners gives both the same waits, so only the work differs.
    random.seed(seed)
    started = time.perf_counter()
    await spawner.start()
    elapsed = time.perf_counter() - started
    await spawner.stop(now=True)
    return elapsed


async def spawn_times(service_url: str, n: int) -> tuple[list[float], list[float]]:
    from kubespawner import KubeSpawner

    from jupyter_gpupool.spawner import GPUPoolSpawner

    def kube() -> Any:
        return make(
            KubeSpawner,
            User("kube", ["ml-research"]),
            node_selector={"runwhere.ai/pool": "training-pool"},
            extra_resource_limits={"nvidia.com/gpu": "1"},
            extra_resource_guarantees={"nvidia.com/gpu": "1"},
        )

    def gpupool() -> Any:
        spawner = make(
            GPUPoolSpawner,
            User("pool", ["ml-research"]),
            service_url=service_url,
            service_token=SPAWNER_TOKEN,
        )
        spawner.user_options = {"pools": ["training-pool"], "gpus": 1}
        return spawner

    await timed_start(kube())  # warm-up: reflectors, clients, connections
    await timed_start(gpupool())
    kube_s, pool_s = [], []
    for i in range(n):
        kube_s.append(await timed_start(kube(), seed=i))
        pool_s.append(await timed_start(gpupool(), seed=i))
    return kube_s, pool_s


def fill_training_pool(cluster: Any) -> None:
    for node in ("gpu-node-1", "gpu-node-2"):
        cluster.store.create(
            "pods",
            "default",
            {
                "metadata": {"name": f"filler-{node}"},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        }
                    ],
                },
            },
        )


async def wait_training_full(service_url: str) -> None:
    http = tornado.httpclient.AsyncHTTPClient()
    for _ in range(200):
        resp = await http.fetch(
            service_url + "api/v1/pools", headers={"Authorization": f"token {SPAWNER_TOKEN}"}
        )
        rows = {p["name"]: p for p in json.loads(resp.body)["pools"]}
        if rows["training-pool"]["gpu_available"] == 0:
            return
        await asyncio.sleep(0.05)
    raise SystemExit("training-pool never looked full to the service")


async def first_pool_full(cluster: Any, service_url: str, kube_timeout: float) -> dict[str, Any]:
    from kubespawner import KubeSpawner

    from jupyter_gpupool.spawner import GPUPoolSpawner

    fill_training_pool(cluster)
    await wait_training_full(service_url)
    spawner = make(
        GPUPoolSpawner,
        User("full", ["ml-research"]),
        service_url=service_url,
        service_token=SPAWNER_TOKEN,
    )
    spawner.user_options = {"pools": ["training-pool", "inference-pool"], "gpus": 2}
    started = time.perf_counter()
    start = spawner.start()
    await cluster.wait_for(lambda: cluster.pod("default", spawner.pod_name), 30, interval=0.001)
    to_pod = time.perf_counter() - started
    await start
    pool = spawner.get_state()["gpupool"]["pool"]
    await spawner.stop(now=True)

    kube = make(
        KubeSpawner,
        User("kubefull", ["ml-research"]),
        node_selector={"runwhere.ai/pool": "training-pool"},
        extra_resource_limits={"nvidia.com/gpu": "2"},
        start_timeout=kube_timeout,
    )
    started = time.perf_counter()
    try:
        await kube.start()
        kube_outcome = "started"
    except TimeoutError:
        kube_outcome = "timed out"
    kube_s = time.perf_counter() - started
    await kube.stop(now=True)
    return {
        "first_pool_full_to_pod_s": round(to_pod, 4),
        "first_pool_full_started_in": pool,
        "kubespawner_full_pool_s": round(kube_s, 3),
        "kubespawner_full_pool": kube_outcome,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from jupyter_gpupool.sim import SimCluster
    from jupyter_gpupool.sim.nodes.spec import example_cluster_spec
    from jupyter_gpupool.sim.testing import reset_kubespawner, use_kubeconfig

    work = Path(tempfile.mkdtemp(prefix="bench-spawn-"))
    pools_dir = work / "pools"
    shutil.copytree(ROOT / "examples" / "pools", pools_dir)
    cluster = SimCluster(
        example_cluster_spec(), kubeconfig=work / "kubeconfig", start_delay=args.start_delay
    )
    await cluster.start()
    use_kubeconfig(cluster.kubeconfig)
    proc = None
    try:
        proc, service_url = await start_gpupool_service(cluster.kubeconfig, pools_dir)
        kube_s, pool_s = await spawn_times(service_url, args.spawns)
        full = await first_pool_full(cluster, service_url, args.kube_timeout)
    finally:
        from kubespawner import KubeSpawner

        await reset_kubespawner(KubeSpawner)
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        await cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    kube_med, pool_med = statistics.median(kube_s), statistics.median(pool_s)
    return {
        "spawns": args.spawns,
        "start_delay_s": args.start_delay,
        "kubespawner_spawn_s": round(kube_med, 4),
        "gpupool_spawn_s": round(pool_med, 4),
        "spawn_gpupool_x_kubespawner": round(pool_med / kube_med, 3),
        "kubespawner_spawn_max_s": round(max(kube_s), 4),
        "gpupool_spawn_max_s": round(max(pool_s), 4),
        **full,
        "targets": {"spawn_gpupool_x_kubespawner": 1.05, "first_pool_full_to_pod_s": 1.0},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spawns", type=int, default=10, help="timed spawns of each spawner")
    parser.add_argument(
        "--start-delay",
        type=float,
        default=0.5,
        help="seconds the simulated kubelet takes to start a bound pod",
    )
    parser.add_argument(
        "--kube-timeout",
        type=float,
        default=5.0,
        help="KubeSpawner's start_timeout for the full-pool comparison",
    )
    result = asyncio.run(main(parser.parse_args()))
    print(json.dumps(result), flush=True)
