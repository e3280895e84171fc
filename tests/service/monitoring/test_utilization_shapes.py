"""GPU utilization of every shape (issue 29) on the simulated cluster: a server on a MIG
instance reads its instance's ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0..1 ratio, shown as
percent), a server on a time-sliced GPU reads its GPU's utilization and is marked shared, and
the idle policy stops an idle MIG server and keeps a busy one.

The demo's cluster gets two nodes in dev-pool: a MIG node (mixed strategy: three 1g.10gb
instances and a 3g.40gb one) and a time-sliced A10 (4 replicas). The servers' pods ask for
``nvidia.com/mig-1g.10gb: 1`` or ``nvidia.com/gpu: 1`` as a spawner would on such nodes; the test
sets each pod's figure in the simulator's exporter and computes what to expect itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from prom import Target, token_and_ca_file
from prom import running as prometheus
from test_idle import DCGM, T0, polled_at, rows
from test_pages import Browser
from test_utilization_pages import server_cells
from waiting import async_wait_for

from jupyter_gpupool.core.usage.labels import POD_SERVER, POD_USER
from jupyter_gpupool.service import clock
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE
from jupyter_gpupool.sim.nodes.spec import EXAMPLE_CLUSTER, ClusterSpec, parse_cluster

SHAPED_NODES = """\
  - name: mig-node
    labels: {runwhere.ai/pool: dev-pool}
    gpu:
      count: 1
      product: NVIDIA-A100-SXM4-80GB
      memory: 81920
      mig: {strategy: mixed, devices: {"1g.10gb": 3, "3g.40gb": 1}}
  - name: sliced-node
    labels: {runwhere.ai/pool: dev-pool}
    gpu: {count: 1, product: NVIDIA-A10, memory: 23028,
          sharing: {strategy: time-slicing, replicas: 4}}
"""
MIG = {"nvidia.com/mig-1g.10gb": "1"}
SLICE = {"nvidia.com/gpu": "1"}


@pytest.fixture
def sim_cluster_spec() -> ClusterSpec:
    text = EXAMPLE_CLUSTER.read_text()
    assert "\nnodes:\n" in text
    return parse_cluster(text.replace("\nnodes:\n", "\nnodes:\n" + SHAPED_NODES, 1))


def server_pod(user: str, node: str, resources: dict[str, str]) -> dict[str, Any]:
    """A user's server pod on ``node``, as a spawner would make it for that shape."""
    return {
        "metadata": {
            "name": f"{user}-nb",
            "annotations": {POD_USER: user, POD_SERVER: ""},
        },
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {"name": "notebook", "image": "jupyter/base", "resources": {"limits": resources}}
            ],
        },
    }


async def start_server(cluster, user: str, node: str, resources: dict[str, str]) -> None:
    cluster.store.create("pods", "default", server_pod(user, node, resources))
    await async_wait_for(
        lambda: (
            ((cluster.pod("default", f"{user}-nb") or {}).get("status") or {}).get("phase")
            == "Running"
        ),
        what=f"{user}'s server to run",
        timeout=15,
    )


async def measured(service, want: dict[str, float]) -> dict[str, dict]:
    """The servers' rows once each reads the percent ``want`` gives it."""
    admin = service.admin()

    async def check() -> dict[str, dict] | None:
        got = {r["name"]: r for r in await admin.servers()}
        ok = all(got.get(name, {}).get("gpu_utilization") == pct for name, pct in want.items())
        return got if ok else None

    return await async_wait_for(check, what=f"servers measured at {want}", timeout=15)


async def test_mig_and_time_sliced_servers_read_their_instance_and_their_gpu(start_service):
    service = await start_service(**DCGM)
    cluster = service.cluster
    await start_server(cluster, "carol", "mig-node", MIG)
    await start_server(cluster, "erin", "sliced-node", SLICE)
    await start_server(cluster, "finn", "sliced-node", SLICE)
    cluster.set_gpu_utilization("default", "carol-nb", 35)  # her instance: 0.35 active
    cluster.set_gpu_utilization("default", "erin-nb", 30)
    cluster.set_gpu_utilization("default", "finn-nb", 11)  # their GPU: 30 + 11
    got = await measured(service, {"carol-nb": 35.0, "erin-nb": 41.0, "finn-nb": 41.0})
    carol, erin, finn = got["carol-nb"], got["erin-nb"], got["finn-nb"]
    assert carol["gpu_utilization_field"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert carol["gpu_utilization_shared"] is False
    # her 1g.10gb instance's own memory: 9856 MiB, 35% of it used as the simulator sets it
    assert (carol["gpu_memory_used_mib"], carol["gpu_memory_total_mib"]) == (9856 * 35 // 100, 9856)
    for row in (erin, finn):
        assert (row["gpu_utilization_shared"], row["gpu_utilization_field"]) == (
            True,
            "DCGM_FI_DEV_GPU_UTIL",
        )
    # the pool page's servers table says so in words
    browser = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    status, html, _ = await browser.get("pools/dev-pool")
    assert status == 200, html
    cells = server_cells(html, "servers")
    assert cells["default/carol-nb"]["util"] == "35%"
    assert cells["default/erin-nb"]["util"] == "41% (shared GPU: all its servers)"
    assert cells["default/finn-nb"]["util"] == "41% (shared GPU: all its servers)"


IDLE = {"below_percent": 5, "after": "20s", "warn": "10s", "action": "stop"}


async def test_the_idle_policy_stops_an_idle_mig_server_and_keeps_a_busy_one(
    start_service, monkeypatch
):
    t = [T0]
    monkeypatch.setattr(clock, "now", lambda: t[0])
    service = await start_service(idle_policy=IDLE, **DCGM)
    cluster, admin = service.cluster, service.admin()

    async def stop(user: str, server: str) -> int:
        cluster.store.delete("pods", "default", f"{user}-nb")
        return 202

    service.hub.on_stop = stop
    await start_server(cluster, "carol", "mig-node", MIG)
    await start_server(cluster, "dave", "mig-node", MIG)
    # time-sliced: erin does nothing herself, but finn keeps their GPU busy
    await start_server(cluster, "erin", "sliced-node", SLICE)
    await start_server(cluster, "finn", "sliced-node", SLICE)
    cluster.set_gpu_utilization("default", "dave-nb", 60)
    cluster.set_gpu_utilization("default", "finn-nb", 50)
    await measured(service, {"carol-nb": 0.0, "dave-nb": 60.0, "erin-nb": 50.0})
    carol = await polled_at(admin, "carol-nb", T0)
    assert carol["idle"]["since"] == T0 and carol["idle"]["stops_at"] == T0 + 20

    async def busy(name: str) -> dict | None:
        row = (await rows(admin))[name]
        return row if row["gpu_utilization"] and row["idle"] is None else None

    for name in ("dave-nb", "erin-nb"):
        await async_wait_for(lambda n=name: busy(n), what=f"{name} busy, not idle", timeout=10)

    t[0] = T0 + 21  # carol's instance has been idle for the policy's 20 s
    await async_wait_for(
        lambda: cluster.pod("default", "carol-nb") is None, what="carol's MIG server stopped"
    )
    assert [u for u, _ in service.hub.stopped] == ["carol"]
    for name in ("dave-nb", "erin-nb", "finn-nb"):
        assert cluster.pod("default", name) is not None, f"{name} kept"


async def test_a_real_prometheus_gives_the_mig_and_shared_readings_too(
    start_service, sim_cluster, tmp_path
):
    """The default queries on Prometheus scraping the simulator's exporter: a MIG server's
    figure from ``mig_util``, the time-sliced ones' marked by ``shared``."""
    cluster = sim_cluster
    await start_server(cluster, "carol", "mig-node", MIG)
    await start_server(cluster, "erin", "sliced-node", SLICE)
    await start_server(cluster, "finn", "sliced-node", SLICE)
    cluster.set_gpu_utilization("default", "carol-nb", 35)
    cluster.set_gpu_utilization("default", "erin-nb", 30)
    cluster.set_gpu_utilization("default", "finn-nb", 11)
    token, ca = token_and_ca_file(cluster.kubeconfig, tmp_path)
    target = Target(cluster.url + "/sim/v1/dcgm/metrics", token=token, ca_file=ca, job="dcgm")
    with prometheus([target]) as prom:
        await prom.async_wait_for_series(
            'DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="carol-nb"}', what="carol's instance", timeout=30
        )
        service = await start_service(
            utilization_source="prometheus", prometheus_url=prom.url, utilization_interval=0.2
        )
        got = await measured(service, {"carol-nb": 35.0, "erin-nb": 41.0, "finn-nb": 41.0})
    assert (
        got["carol-nb"]["gpu_utilization_field"],
        got["carol-nb"]["gpu_utilization_shared"],
    ) == (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        False,
    )
    assert [got[n]["gpu_utilization_shared"] for n in ("erin-nb", "finn-nb")] == [True, True]
