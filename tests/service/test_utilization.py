"""GPU utilization in the service (issue 17): the ``dcgm`` source polls exporter pages and each
running server's row in ``GET api/v1/servers`` carries what its GPUs do; a source that stops
answering leaves the numbers to go stale (shown as none) and says why.

The exporter page is written by the test (as NVIDIA's dcgm-exporter writes it) and served from
a small HTTP server of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import tornado.httpserver
import tornado.web
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


async def _util_is(admin, value) -> bool:
    [row] = [r for r in await admin.servers() if r["name"] == "alice-nb"]
    return row["gpu_utilization"] == value


async def test_a_source_without_its_setting_stops_the_service_with_a_message(start_service):
    with pytest.raises(StartupError, match='utilization_source is "dcgm" but dcgm_urls is empty'):
        await start_service(utilization_source="dcgm")
    with pytest.raises(StartupError, match="prometheus_url is not set"):
        await start_service(utilization_source="prometheus")
