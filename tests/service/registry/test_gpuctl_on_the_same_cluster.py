"""gpuctl and gpupool on one cluster: node labels as gpuctl writes them, pools whose labels
gpuctl removed behind gpupool's back, and where gpuctl's cpu and memory quotas are shown.

The truth is read from the simulated cluster's API with the `kubernetes` client (a fresh GET, not
the service's index), and labels are removed through that API the way gpuctl removes them.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from html import unescape
from typing import Any

import kubernetes
import pytest
import tornado.httpclient
import yaml
from waiting import async_wait_for

from jupyter_gpupool.service.web.auth import ADMIN_SCOPE

POOL_LABEL = "runwhere.ai/pool"
GPU_TYPE_LABEL = "runwhere.ai/gpu-type"

T4_POOL = """kind: pool
version: v0.1
pool:
  name: t4-pool
  description: "T4s for teaching"
nodes:
  node-6:
    gpu-type: {gpu_type}
"""


@pytest.fixture
def core(sim_cluster) -> Iterator[Any]:
    """The sync `kubernetes` client on the simulated cluster (what gpuctl's scripts use)."""
    api = kubernetes.config.new_client_from_config(config_file=sim_cluster.kubeconfig)
    yield kubernetes.client.CoreV1Api(api)
    api.close()


async def labels_from_api(core: Any, node: str) -> dict[str, str]:
    """The node's labels, read fresh from the cluster's API (blocking client: in a thread)."""
    read = await asyncio.to_thread(core.read_node, node)
    return dict(read.metadata.labels or {})


async def gpupool(service: Any, token: str, *args: str) -> tuple[int, str, str]:
    """The ``gpupool`` command, run as a program against the in-process service."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "jupyter_gpupool",
        *args,
        "--url",
        service.url,
        "--token",
        token,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_an_empty_gpu_type_writes_an_empty_type_label_as_gpuctl_does(service, core):
    admin = service.admin()
    await admin.apply_pools(T4_POOL.format(gpu_type="T4-16G"))
    assert (await labels_from_api(core, "node-6"))[GPU_TYPE_LABEL] == "T4-16G"

    result = await admin.apply_pools(T4_POOL.format(gpu_type='""'))
    assert result["replaced"] == ["t4-pool"]
    labels = await labels_from_api(core, "node-6")
    assert labels[POOL_LABEL] == "t4-pool"
    assert GPU_TYPE_LABEL in labels and labels[GPU_TYPE_LABEL] == ""


async def test_a_pool_whose_labels_gpuctl_removed_says_so(service, core):
    admin = service.admin()
    await admin.apply_pools(T4_POOL.format(gpu_type="T4-16G"))
    assert (await labels_from_api(core, "node-6"))[POOL_LABEL] == "t4-pool"
    row = next(p for p in await admin.pools() if p["name"] == "t4-pool")
    assert (row["status"], row["nodes_taken_out"]) == ("active", [])

    # `gpuctl delete pool t4-pool`: the label goes, gpupool's document stays
    await asyncio.to_thread(core.patch_node, "node-6", {"metadata": {"labels": {POOL_LABEL: None}}})
    assert POOL_LABEL not in await labels_from_api(core, "node-6")

    async def t4_row() -> dict[str, Any] | None:
        row = next(p for p in await admin.pools() if p["name"] == "t4-pool")
        return row if row["status"] != "active" else None

    row = await async_wait_for(t4_row, what="t4-pool's row to change after the label went")
    assert row["status"] == "unlabeled" and row["node_count"] == 0
    assert row["nodes_taken_out"] == [{"name": "node-6", "pool": "default"}]
    detail = await admin.pool("t4-pool")
    assert detail["nodes_taken_out"] == [{"name": "node-6", "pool": "default"}]

    token = service.hub.admin()
    status, out, err = await gpupool(service, token, "get", "pools")
    assert status == 0, err
    rows = {r[0]: r for r in (re.split(r"\s{2,}", line.strip()) for line in out.splitlines())}
    assert rows["t4-pool"][1:3] == ["unlabeled", "0"]

    status, out, err = await gpupool(service, token, "describe", "pool", "t4-pool")
    assert status == 0, err
    assert re.search(r"^Status:\s+unlabeled$", out, re.M)
    assert "Nodes taken out outside gpupool:" in out
    assert re.search(r"^\s+node-6\s+default$", out, re.M)
    assert "gpupool create -f FILE" in out and "gpupool delete pool t4-pool" in out
    assert "\nNodes:\n  (none)\n" in out  # not a table of headers only

    # what the note says to do works: applying the file again labels the node again
    await admin.apply_pools(T4_POOL.format(gpu_type="T4-16G"))
    assert (await labels_from_api(core, "node-6"))[POOL_LABEL] == "t4-pool"
    row = next(p for p in await admin.pools() if p["name"] == "t4-pool")
    assert (row["status"], row["nodes_taken_out"]) == ("active", [])


async def test_a_node_moved_to_another_pool_outside_gpupool_is_named(service, core):
    admin = service.admin()
    await admin.apply_pools(T4_POOL.format(gpu_type="T4-16G"))
    # `gpuctl label node node-6 runwhere.ai/pool=scratch --overwrite`
    await asyncio.to_thread(
        core.patch_node, "node-6", {"metadata": {"labels": {POOL_LABEL: "scratch"}}}
    )

    async def taken_out() -> list[Any]:
        detail = await admin.pool("t4-pool")
        return detail["nodes_taken_out"]

    moved = await async_wait_for(taken_out, what="node-6 to be named as taken out of t4-pool")
    assert moved == [{"name": "node-6", "pool": "scratch"}]


async def page(service: Any, token: str, path: str) -> str:
    """A service page as a signed-in browser gets it (the token stands for the hub's cookie)."""
    http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
    try:
        resp = await http.fetch(service.url + path, headers={"Authorization": f"token {token}"})
    finally:
        http.close()
    return resp.body.decode()


async def test_cpu_and_memory_quotas_are_shown_where_pools_md_says(service):
    """docs/pools.md: gpuctl's cpu and memory caps are shown as written in the quota documents,
    to admins only (``get quotas -o yaml``, the admin page), and nowhere that counts GPUs."""
    written = {"cpu": 256, "memory": "2048Gi", "gpu": 20}  # tests/service/pools/quotas.yaml
    answer = await service.admin().quotas()
    [document] = answer["documents"]
    assert document["namespace"]["ml-research"] == written
    assert set(answer["caps"]["groups"]["ml-research"]) == {"gpu", "used", "reserved"}
    mine = await service.user("alice", ["ml-research"]).quotas()
    assert "documents" not in mine and "2048Gi" not in json.dumps(mine)

    token = service.hub.admin()
    status, out, err = await gpupool(service, token, "get", "quotas", "-o", "yaml")
    assert status == 0, err
    assert yaml.safe_load(out)["documents"][0]["namespace"]["ml-research"] == written
    for args in (("get", "quotas"), ("describe", "pool", "training-pool")):
        status, out, err = await gpupool(service, token, *args)
        assert status == 0 and "2048Gi" not in out, (args, err)

    admin_token = service.hub.user("admin", [], [ADMIN_SCOPE])
    assert "memory: 2048Gi" in unescape(await page(service, admin_token, "admin"))
    assert "2048Gi" not in await page(service, admin_token, "quotas")
