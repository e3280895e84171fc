"""GPU utilization in the service (issue 17): the ``dcgm`` source polls exporter pages and each
running server's row in ``GET api/v1/servers`` carries what its GPUs do; a source that stops
answering leaves the numbers to go stale (shown as none) and says why.

The exporter page is written by the test (as NVIDIA's dcgm-exporter writes it) and served from
a small HTTP server of its own; the end-to-end tests set utilization in the simulated cluster and
read it through its exporter, directly or through a real Prometheus."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import tornado.httpserver
import tornado.web
from prom import Target, token_and_ca_file
from prom import running as prometheus
from service_kit import start_pod
from waiting import async_wait_for

from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.service.app import StartupError


def page(pods: dict[str, tuple[float, float]]) -> str:
    """GPU 0 and 1 of node n1 per pod: utilization of each."""
    lines = [
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    ]
    gpu = 0
    for pod, utils in pods.items():
        for u in utils:
            lines.append(
                f'DCGM_FI_DEV_GPU_UTIL{{gpu="{gpu}",UUID="GPU-{gpu}",device="nvidia{gpu}",'
                f'modelName="NVIDIA A100",Hostname="n1",container="notebook",'
                f'namespace="default",pod="{pod}"}} {u}'
            )
            gpu += 1
    return "\n".join(lines) + "\n"


class Exporter:
    def __init__(self) -> None:
        self.text = page({})
        self.status = 200
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"


@pytest_asyncio.fixture
async def exporter() -> AsyncIterator[Exporter]:
    ex = Exporter()

    class Metrics(tornado.web.RequestHandler):
        def get(self) -> None:
            self.set_status(ex.status)
            self.set_header("Content-Type", "text/plain; version=0.0.4")
            self.write(ex.text)

    server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/metrics", Metrics)]))
    server.listen(ex.port, "127.0.0.1")
    yield ex
    server.stop()


async def test_each_running_server_shows_its_gpus_utilization(start_service, exporter):
    service = await start_service(
        utilization_source="dcgm", dcgm_urls=[exporter.url], utilization_interval=0.1
    )
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    await start_pod(service.cluster, a, "alice-nb")
    exporter.text = page({"alice-nb": (90, 10), "not-a-server": (100,)})

    async def alice() -> dict | None:
        rows = await admin.servers()
        [row] = [r for r in rows if r["name"] == "alice-nb"]
        return row if row["gpu_utilization"] is not None else None

    row = await async_wait_for(alice, what="alice's utilization", timeout=10)
    assert (row["gpu_utilization"], row["gpu_utilization_max"], row["gpus_measured"]) == (
        50.0,
        90.0,
        2,
    )
    assert row["gpu_utilization_history"][-1][1] == 50.0
    # it follows the exporter
    exporter.text = page({"alice-nb": (0, 0)})
    await async_wait_for(
        lambda: _util_is(admin, 0.0), what="alice's utilization to drop to 0", timeout=10
    )
    # the exporter fails: the numbers go stale (three intervals) and the reason is given
    exporter.status = 503
    await async_wait_for(
        lambda: _util_is(admin, None), what="alice's utilization to go stale", timeout=10
    )
    answer = await admin.request("GET", "api/v1/servers")
    problem = answer.json()["utilization"]
    assert problem["source"] == "dcgm" and "HTTP 503" in problem["problem"]


async def _util_is(admin, value, name: str = "alice-nb") -> bool:
    [row] = [r for r in await admin.servers() if r["name"] == name]
    return row["gpu_utilization"] == value


async def test_a_source_without_its_setting_stops_the_service_with_a_message(start_service):
    with pytest.raises(StartupError, match='utilization_source is "dcgm" but dcgm_urls is empty'):
        await start_service(utilization_source="dcgm")
    with pytest.raises(StartupError, match="prometheus_url is not set"):
        await start_service(utilization_source="prometheus")


async def test_the_dcgm_source_reads_the_simulators_exporter_through_the_api_server(
    start_service,
):
    """The path is read from the API server with the service's kubeconfig: the simulated
    cluster's exporter, whose utilization the test sets."""
    service = await start_service(
        utilization_source="dcgm", dcgm_urls=["/sim/v1/dcgm/metrics"], utilization_interval=0.1
    )
    cluster, admin = service.cluster, service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    await start_pod(cluster, a, "alice-nb")
    b = await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=1)
    await start_pod(cluster, b, "bob-nb")
    cluster.set_gpu_utilization("default", "alice-nb", 80)
    # a poll in flight when the utilization was set may bring the page from before it: the
    # second poll counted from now began after it
    utilization = service.ctx.utilization
    after = utilization.polls + 2

    async def measured() -> dict | None:
        if utilization.polls < after:
            return None
        rows = {r["name"]: r for r in await admin.servers()}
        if rows["alice-nb"]["gpu_utilization"] is None or rows["bob-nb"]["gpus_measured"] is None:
            return None
        return rows

    rows = await async_wait_for(measured, what="both servers measured", timeout=15)
    alice, bob = rows["alice-nb"], rows["bob-nb"]
    assert (alice["gpu_utilization"], alice["gpus_measured"]) == (80.0, 2)
    assert (bob["gpu_utilization"], bob["gpus_measured"]) == (0.0, 1)  # never set: 0%
    assert alice["gpu_memory_used_mib"] > bob["gpu_memory_used_mib"] == 0


async def test_the_prometheus_source_asks_a_real_prometheus_scraping_the_simulator(
    start_service, tmp_path
):
    service = await start_service(utilization_interval=0.2)
    cluster, admin = service.cluster, service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=["training-pool"], gpus=2)
    await start_pod(cluster, a, "alice-nb")
    cluster.set_gpu_utilization("default", "alice-nb", 35)
    await service.stop()
    token, ca = token_and_ca_file(cluster.kubeconfig, tmp_path)
    target = Target(cluster.url + "/sim/v1/dcgm/metrics", token=token, ca_file=ca, job="dcgm")
    with prometheus([target]) as prom:
        await prom.async_wait_for_series(
            'DCGM_FI_DEV_GPU_UTIL{pod="alice-nb"}', what="alice's GPUs scraped", timeout=30
        )
        service = await start_service(
            utilization_source="prometheus", prometheus_url=prom.url, utilization_interval=0.2
        )
        admin = service.admin()
        row = await async_wait_for(
            lambda: _row_if_measured(admin, "alice-nb"), what="alice measured", timeout=15
        )
        assert (row["gpu_utilization"], row["gpu_utilization_max"]) == (35.0, 35.0)
        # the memory Prometheus sums over her two GPUs: used and total from the exporter
        assert row["gpu_memory_used_mib"] > 0 and row["gpu_memory_total_mib"] > 0
        cluster.set_gpu_utilization("default", "alice-nb", 5)
        await async_wait_for(
            lambda: _util_is(admin, 5.0, "alice-nb"),
            what="alice at 5% through Prometheus",
            timeout=30,
        )


async def _row_if_measured(admin, name: str) -> dict | None:
    [row] = [r for r in await admin.servers() if r["name"] == name]
    return row if row["gpu_utilization"] is not None else None
