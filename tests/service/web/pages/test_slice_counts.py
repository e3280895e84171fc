"""A MIG instance and a time-sliced replica counted the same on every surface (issue 40): the
API's pool, node and server rows, the admission's message, the CLI's tables, the pages, the
magics' pool table, the LaunchPanel's bar and the quota line.

On the demo cluster (examples/cluster.yaml) alice runs a MIG 1g.10gb of gpu-node-mig-1's A100
and bob one replica of gpu-node-shared-1's A10, time-sliced in 4. The truth is the simulated
API server's node and pod objects, counted here by NVIDIA's conventions, not by the service's
code: a MIG device of the mixed strategy is ``nvidia.com/mig-<g>g.<gb>gb``, ``g`` of the A100's
7 compute slices; on a time-sliced node ``nvidia.com/gpu`` counts GPUs x replicas
(``nvidia.com/gpu.replicas``), so each unit is 1/replicas of a GPU.
"""

from __future__ import annotations

import re
import time
from fractions import Fraction
from typing import Any

from gpu_truth import cell, node_gpus, number, pods_gpus
from service_kit import start_pod
from test_pages import Browser, text

from jupyter_gpupool.commands.describe import format_pool
from jupyter_gpupool.commands.get import NODE_COLUMNS, POOL_COLUMNS, job_columns
from jupyter_gpupool.commands.output import render
from jupyter_gpupool.core.words.launch_options import Catalog, quota_text
from jupyter_gpupool.notebook.magics.render import pool_rows
from jupyter_gpupool.notebook.magics.where import where_words
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE


def node_truth(cluster: Any, name: str) -> tuple[Fraction, Fraction]:
    """``(GPUs, GPUs used)`` of a node, from the API server's node and pod objects."""
    node = cluster.store.get("nodes", None, name)
    return node_gpus(node), pods_gpus(node, cluster.store.list("pods", None)[0])


def pool_truth(cluster: Any, pool: str) -> tuple[Fraction, Fraction]:
    total = used = Fraction(0)
    for node in cluster.store.list("nodes", None)[0]:
        if (node["metadata"].get("labels") or {}).get("runwhere.ai/pool") == pool:
            t, u = node_truth(cluster, node["metadata"]["name"])
            total, used = total + t, used + u
    return total, used


def row_text(html: str, table_id: str, key: str) -> str:
    table = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html, re.S)
    assert table, f"no table #{table_id}"
    row = re.search(rf'<tr data-key="{re.escape(key)}">(.*?)</tr>', table.group(0), re.S)
    assert row, f"no row {key} in #{table_id}: {text(table.group(0))[:600]}"
    return text(row.group(1)).strip()


async def slices_running(service: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    admin = service.admin()
    mig = await admin.admit(
        user="alice", pools=[{"pool": "training-pool", "shape": "mig-1g.10gb"}], gpus=1
    )
    await start_pod(service.cluster, mig, "alice-mig")
    shared = await admin.admit(
        user="bob", pools=[{"pool": "inference-pool", "shape": "shared-4"}], gpus=1
    )
    await start_pod(service.cluster, shared, "bob-shared")
    await service.settled()
    return mig, shared


async def test_the_api_counts_a_mig_instance_and_a_replica_as_the_nodes_objects_do(service):
    mig, shared = await slices_running(service)
    cluster, admin = service.cluster, service.admin()
    # the admission says what the server got, not "1 A100-80G GPU"
    assert mig["message"] == "training-pool: admitted (MIG 1g.10gb of an A100-80G, within quota)"
    assert "admitted (A10-24G shared ¼ (time-sliced), within quota)" in shared["message"]

    nodes = {n["name"]: n for n in (await admin.nodes())}
    for name in ("gpu-node-mig-1", "gpu-node-shared-1", "gpu-node-1"):
        total, used = node_truth(cluster, name)
        row = nodes[name]
        assert (row["gpu_total"], row["gpu_used"], row["gpu_free"]) == (
            number(total),
            number(used),
            number(total - used),
        ), name
    assert (node_truth(cluster, "gpu-node-mig-1")) == (1, Fraction(1, 7))
    assert (node_truth(cluster, "gpu-node-shared-1")) == (1, Fraction(1, 4))
    # the device plugin's own units beside them: 4 replicas on the A10, none on the MIG A100
    assert nodes["gpu-node-shared-1"]["gpu_units"] == {"total": 4, "used": 1, "free": 3}
    assert nodes["gpu-node-mig-1"]["gpu_units"] == {"total": 0, "used": 0, "free": 0}
    assert nodes["gpu-node-mig-1"]["gpus_text"] == "1 in MIG instances: 3 of 4 instances free"
    assert nodes["gpu-node-shared-1"]["gpus_text"] == "1 time-sliced in 4: 3 of 4 replicas free"

    pools = {p["name"]: p for p in await admin.pools()}
    for name in ("training-pool", "inference-pool"):
        total, used = pool_truth(cluster, name)
        row = pools[name]
        assert (row["gpu_total"], row["gpu_used"]) == (number(total), number(used)), name
        # the pool is the sum of its nodes' rows
        mine = [n for n in nodes.values() if n["pool"] == name]
        assert row["gpu_total"] == sum(n["gpu_total"] for n in mine)
    assert pools["training-pool"]["gpu_total"] == 17  # 16 whole A100s + the MIG A100
    assert pools["inference-pool"]["gpu_total"] == 9  # 8 whole A10s + the time-sliced A10
    assert pools["training-pool"]["whole_gpus"] == {"total": 16, "used": 0, "free": 16}
    assert pools["training-pool"]["gpus_text"] == (
        "16 whole + 1 in MIG instances: 3 of 4 instances free"
    )

    servers = {s["name"]: s for s in await admin.servers()}
    assert servers["alice-mig"]["shape_text"] == "MIG 1g.10gb of an A100-80G"
    assert servers["alice-mig"]["gpu_equivalents"] == "1/7"
    assert servers["bob-shared"]["shape_text"] == "A10-24G shared ¼ (time-sliced)"
    assert servers["bob-shared"]["gpu_equivalents"] == "1/4"
    # the magics' "where": a server on a MIG instance has a GPU, though no nvidia.com/gpu
    assert where_words(servers["alice-mig"]) == "in training-pool, within quota"


async def test_the_cli_tables_count_slices_as_the_api_does(service):
    await slices_running(service)
    cluster, admin = service.cluster, service.admin()
    total, used = pool_truth(cluster, "training-pool")
    pools = render("table", await admin.pools(), POOL_COLUMNS).splitlines()
    training = next(line.split() for line in pools if line.startswith("training-pool"))
    assert training[2:5] == [cell(total), cell(used), cell(total - used)]  # 17 0.14 16.86

    detail = await admin.pool("training-pool")
    described = dict(
        line.split(":", 1)
        for line in format_pool(detail, time.time()).split("\n\n")[0].splitlines()
    )
    assert described["GPU Total"].strip() == (
        "17 (16 whole + 1 in MIG instances: 3 of 4 instances free)"
    )
    assert described["GPU Used"].strip() == cell(used)
    described = format_pool(detail, time.time())
    mig_total, mig_used = node_truth(cluster, "gpu-node-mig-1")
    node_line = next(line for line in described.splitlines() if "gpu-node-mig-1" in line)
    assert node_line.split()[2:5] == [cell(mig_total), cell(mig_used), cell(mig_total - mig_used)]
    jobs = render("table", detail["servers"], job_columns(time.time()))
    assert "MIG 1g.10gb of an A100-80G" in jobs.splitlines()[1]

    inference = await admin.pool("inference-pool")
    nodes = render("table", inference["nodes"], NODE_COLUMNS).splitlines()
    shared = next(line.split() for line in nodes if line.startswith("gpu-node-shared-1"))
    t, u = node_truth(cluster, "gpu-node-shared-1")
    assert shared[2:5] == [cell(t), cell(u), cell(t - u)]  # 1 0.25 0.75, not 4 1 3
    wide = render("wide", detail["servers"], job_columns(time.time())).splitlines()
    assert "GPU-EQUIV." in wide[0] and " 0.14 " in wide[1]  # 1/7


async def test_the_pages_count_slices_as_the_api_does(service):
    await slices_running(service)
    cluster = service.cluster
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    try:
        status, html, _ = await admin.get("pools")
        assert status == 200
        total, used = pool_truth(cluster, "training-pool")
        row = row_text(html, "pools", "training-pool")
        assert f" {cell(total)} {cell(used)} {cell(total - used)} " in f" {row} ", row
        status, html, _ = await admin.get("nodes")
        assert status == 200
        for name in ("gpu-node-mig-1", "gpu-node-shared-1"):
            t, u = node_truth(cluster, name)
            row = row_text(html, "node-table", name)
            assert f" {cell(t)} {cell(u)} {cell(t - u)} " in f" {row} ", row
    finally:
        admin.http.close()


async def test_the_magics_and_the_quota_line_count_a_slice_in_gpu_equivalents(service):
    await slices_running(service)
    alice = service.user("alice")
    options = await alice.launch_options()
    rows = {r[0]: r for r in pool_rows(options)}
    # free now: the 16 whole A100s and the MIG A100's 3 free instances (3/7 + 2/7 + 1/7)
    assert rows["training-pool"][2] == f"{cell(16 + Fraction(6, 7))} / 17"
    catalog = Catalog.from_json(options)
    training = catalog.pool("training-pool")
    assert training is not None
    # alice's own guarantee is 2 (tests/service/pools/quotas.yaml): 1 whole GPU still fits it
    # with her 1/7, and 13/7 GPU-equivalents do
    assert training.within_quota == 1
    assert quota_text(training).startswith("1.86 (1 whole) within quota, ")

    # the LaunchPanel's bar for the pool: the same figures, as a bar of GPU-equivalents
    from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm

    from jupyter_gpupool.notebook.widgets.panel import PoolBar

    setup_test_comm()
    try:
        bar = PoolBar("training-pool")
        bar.show(training)
        assert bar._words.value.startswith(f"{cell(16 + Fraction(6, 7))} of 17 GPUs free · ")
        assert (bar._bar.max, round(bar._bar.value, 3)) == (17, round(1 / 7, 3))
        bar.close()
    finally:
        teardown_test_comm()
