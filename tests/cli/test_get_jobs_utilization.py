"""What each server's GPUs do, as ``gpupool get jobs -o wide`` and ``%gpupool status`` show it
(issue 17), from a real service polling the simulated cluster's DCGM exporter.

The test sets each pod's GPU utilization in the simulator; the exporter reports GPU memory used
as that share of each GPU's memory, which the test reads from the pod's node (its
``nvidia.com/gpu.memory`` label, as NVIDIA's GPU Feature Discovery sets it). Simulated cluster
only: the real control plane has no exporter to read.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from IPython.core.interactiveshell import InteractiveShell
from service_kit import HubStub, Running, service_config, start_pod
from waiting import async_wait_for

from jupyter_gpupool.cli import main
from jupyter_gpupool.core.pools.placement import Placement
from jupyter_gpupool.notebook.magics.magic import GPUPoolMagics
from jupyter_gpupool.notebook.magics.render import status_fields
from jupyter_gpupool.notebook.session import UserSession
from jupyter_gpupool.service import GPUPoolService
from jupyter_gpupool.sim import SimCluster

TEST_POOLS = Path(__file__).resolve().parents[1] / "service" / "pools"
DCGM = {
    "utilization_source": "dcgm",
    "dcgm_urls": ["/sim/v1/dcgm/metrics"],
    "utilization_interval": 0.1,
}
#: The test's settings: each server's GPUs, and the utilization its GPUs report.
ALICE_GPUS, ALICE_PERCENT = 2, 80
BOB_GPUS, BOB_PERCENT = 1, 30


@pytest_asyncio.fixture
async def start_service(
    sim_cluster: SimCluster, tmp_path: Path
) -> AsyncIterator[tuple[Any, HubStub]]:
    """``await start(**traits)``: the service in this process on the simulated cluster, with a
    stub of the hub's API and a copy of the tests' pools."""
    hub = await HubStub().start()
    pools = tmp_path / "pools"
    shutil.copytree(TEST_POOLS, pools)
    running: list[Running] = []

    async def start(**traits: Any) -> Running:
        app = GPUPoolService(config=service_config(sim_cluster.kubeconfig, hub, pools, **traits))
        app.initialize([])
        await app.start_service()

        async def no_truth() -> Any:
            raise NotImplementedError

        running.append(Running(app, hub, sim_cluster, no_truth))
        return running[-1]

    yield start, hub
    for r in running:
        await r.stop()
    await hub.stop()


async def gpupool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``gpupool ARGV``: (exit status, stdout, stderr). The CLI runs its own event loop, so it
    runs in a thread while the service answers on this one."""
    status = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def table(text: str) -> list[dict[str, str]]:
    """A gpuctl table's rows as ``{header: cell}`` (columns are two or more spaces apart)."""
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    return [dict(zip(header, row, strict=True)) for row in rows]


async def start_alice_and_bob(service: Running, cluster: SimCluster) -> dict[str, Any]:
    """Alice's and bob's servers in training-pool, their GPUs set to the test's percents; their
    pods by user."""
    admin, pods = service.admin(), {}
    for user, gpus, percent in (
        ("alice", ALICE_GPUS, ALICE_PERCENT),
        ("bob", BOB_GPUS, BOB_PERCENT),
    ):
        a = await admin.admit(user=user, groups=["ml-research"], pools=["training-pool"], gpus=gpus)
        pods[user] = await start_pod(cluster, a, f"{user}-nb")
        cluster.set_gpu_utilization("default", f"{user}-nb", percent)
    return pods


def gpu_memory_mib(cluster: SimCluster, pod: dict[str, Any]) -> int:
    """The memory of one GPU of the pod's node (MiB): its ``nvidia.com/gpu.memory`` label."""
    node = cluster.store.find("nodes", None, pod["spec"]["nodeName"])
    assert node is not None
    return int(node["metadata"]["labels"]["nvidia.com/gpu.memory"])


def has_words(cluster: SimCluster, pod: dict[str, Any], gpus: int) -> str:
    """What the server has, as every surface says it: ``2 \u00d7 A100-80G``, its node's type."""
    node = cluster.store.get("nodes", None, pod["spec"]["nodeName"])
    return f"{gpus} \u00d7 {node['metadata']['labels']['runwhere.ai/gpu-type']}"


def memory_words(cluster: SimCluster, pod: dict[str, Any], gpus: int, percent: int) -> str:
    """What the exporter reports for the pod's GPUs: used (``percent`` of each GPU, in whole
    MiB) of total, in GiB."""
    per_gpu = gpu_memory_mib(cluster, pod)
    used, total = gpus * (per_gpu * percent // 100), gpus * per_gpu
    return f"{used / 1024:.1f}/{total / 1024:g} GiB"


async def test_get_jobs_wide_shows_each_servers_gpu_utilization_and_memory(
    start_service, sim_cluster: SimCluster, capsys
):
    """Two servers whose GPUs the test sets to 80% and 30%: ``-o wide`` says so, with their GPU
    memory; the default table keeps gpuctl's columns."""
    start, hub = start_service
    service = await start(**DCGM)
    admin = service.admin()
    pods = await start_alice_and_bob(service, sim_cluster)

    async def both_measured() -> bool:
        # at the percents set: a first sample may be taken before the exporter has them
        rows = {r["user"]: r for r in await admin.servers()}
        return all(
            rows[u]["gpu_utilization"] == percent
            for u, percent in (("alice", ALICE_PERCENT), ("bob", BOB_PERCENT))
        )

    await async_wait_for(both_measured, what="both servers measured", timeout=15)
    connect = ("--url", service.url, "--token", hub.admin())
    status, out, err = await gpupool(capsys, "get", "jobs", "-o", "wide", *connect)
    assert status == 0, err
    rows = {r["USER"]: r for r in table(out)}
    shown = {u: (r["GPUS"], r["GPU UTIL"], r["GPU MEM"], r["IDLE"]) for u, r in rows.items()}
    assert shown == {
        "alice": (
            has_words(sim_cluster, pods["alice"], ALICE_GPUS),
            f"{ALICE_PERCENT}%",
            memory_words(sim_cluster, pods["alice"], ALICE_GPUS, ALICE_PERCENT),
            "-",  # busy GPUs are never idle
        ),
        "bob": (
            has_words(sim_cluster, pods["bob"], BOB_GPUS),
            f"{BOB_PERCENT}%",
            memory_words(sim_cluster, pods["bob"], BOB_GPUS, BOB_PERCENT),
            "-",
        ),
    }
    assert shown["alice"][2] == "128.0/160 GiB"  # two A100-80G at 80%: the words as a user reads
    assert err == ""  # measured: no note

    status, out, _ = await gpupool(capsys, "get", "jobs", *connect)
    header = re.split(r"\s{2,}", out.splitlines()[0])
    assert header == ["USER", "SERVER", "POOL", "NODE", "GPUS", "STATUS", "OVER QUOTA", "AGE"]

    status, out, _ = await gpupool(capsys, "get", "jobs", "-o", "csv", *connect)
    [alice] = [r for r in csv.DictReader(io.StringIO(out)) if r["user"] == "alice"]
    # raw numbers under the API's names, for a spreadsheet
    assert float(alice["gpu_utilization"]) == float(alice["gpu_utilization_max"]) == ALICE_PERCENT
    per_gpu = gpu_memory_mib(sim_cluster, pods["alice"])
    assert alice["gpu_memory_total_mib"] == str(ALICE_GPUS * per_gpu)
    assert alice["gpu_memory_used_mib"] == str(ALICE_GPUS * (per_gpu * ALICE_PERCENT // 100))
    assert alice["idle_since"] == ""


async def test_the_magics_status_shows_this_servers_gpus(
    start_service, sim_cluster: SimCluster, capsys, monkeypatch
):
    """``%gpupool status`` in alice's server asks the service for her rows (one request, with
    the server's token) and shows her server's GPUs: 80%, not bob's 30%."""
    start, hub = start_service
    service = await start(**DCGM)
    await start_alice_and_bob(service, sim_cluster)
    here = Placement(
        pool="training-pool",
        gpus=ALICE_GPUS,
        user="alice",
        service_url=service.url,
        token=hub.user("alice", ["ml-research"]),
    )

    async def measured() -> Any:
        async with UserSession(here) as session:
            use = await session.server_use()
        return use if use.row and use.row["gpu_utilization"] is not None else None

    await async_wait_for(measured, what="alice's server measured", timeout=15)
    for key in [k for k in os.environ if k.startswith(("JUPYTERHUB_", "GPUPOOL_"))]:
        monkeypatch.delenv(key)
    for key, value in {
        "JUPYTERHUB_USER": "alice",
        "JUPYTERHUB_API_TOKEN": here.token,
        "GPUPOOL_SERVICE_URL": service.url,
        "GPUPOOL_POOL": "training-pool",
        "GPUPOOL_GPUS": str(ALICE_GPUS),
    }.items():
        monkeypatch.setenv(key, value)
    shell = InteractiveShell.instance()
    shell.register_magics(GPUPoolMagics(shell))
    # the magic blocks its thread until the service answers, and the service answers on this
    # loop: the magic runs in a thread, as a terminal's IPython would run it
    await asyncio.to_thread(shell.run_line_magic, "gpupool", "status")
    lines = capsys.readouterr().out.splitlines()
    # two A100-80G at 80%: both GPUs alike, so no "(max ...)"
    assert "GPU utilization         80%, memory 128.0 of 160 GiB" in lines
    assert not [line for line in lines if line.startswith("warning")]  # busy: not idle


async def test_without_a_source_the_wide_table_says_why_on_stderr(
    start_service, sim_cluster: SimCluster, capsys
):
    """No utilization source: the GPU columns say ``-`` and stderr says why; the notebook's
    status line says "not measured" with the same reason."""
    start, hub = start_service
    service = await start()
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=1)
    await start_pod(sim_cluster, a, "alice-nb")
    status, out, err = await gpupool(
        capsys, "get", "jobs", "-o", "wide", "--url", service.url, "--token", hub.admin()
    )
    [row] = table(out)
    assert status == 0 and (row["GPU UTIL"], row["GPU MEM"], row["IDLE"]) == ("-", "-", "-")
    why = "no GPU utilization source is configured"
    assert err == f"gpupool: GPU utilization not measured: {why}\n"
    here = Placement(
        pool="training-pool", gpus=1, user="alice", service_url=service.url, token=hub.user("alice")
    )
    async with UserSession(here) as session:
        use = await session.server_use()
    assert dict(status_fields(here, None, use))["GPU utilization"] == f"not measured ({why})"
