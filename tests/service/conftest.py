"""Fixtures for the service tests: a stub of JupyterHub's API, and services started in-process.

Most tests run the service in this process against the simulated cluster, with a small stub of
the three hub endpoints the service calls (``/user`` for tokens, ``/users/{name}`` for groups,
``DELETE .../server`` for reclaim); tokens are handed out by the stub. The authentication tests in
``test_hub_auth.py`` use a real JupyterHub instead.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from service_kit import HubStub, delete_pod, pod_for, start_pod  # noqa: F401 - fixtures' and tests' helpers
from traitlets.config import Config

from jupyter_gpupool.client import GPUPoolClient
from jupyter_gpupool.core.usage import UsageIndex
from jupyter_gpupool.service import GPUPoolService
from jupyter_gpupool.sim import SimCluster

REPO = Path(__file__).resolve().parents[2]
TEST_POOLS = Path(__file__).resolve().parent / "pools"


@pytest_asyncio.fixture
async def hub() -> AsyncIterator[HubStub]:
    stub = await HubStub().start()
    yield stub
    await stub.stop()


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    """A copy of the tests' pool files (the service writes back to it)."""
    target = tmp_path / "pools"
    shutil.copytree(TEST_POOLS, target)
    return target


def service_config(cluster: SimCluster, hub: HubStub, pools_dir: Path, **traits: Any) -> Config:
    c = Config()
    c.GPUPoolService.ip = "127.0.0.1"
    c.GPUPoolService.port = 0
    c.GPUPoolService.base_url = "/services/gpupool/"
    c.GPUPoolService.pools_dir = str(pools_dir)
    c.GPUPoolService.kubeconfig = cluster.kubeconfig
    c.GPUPoolService.hub_api_url = hub.url + "/hub/api"
    c.GPUPoolService.api_token = hub.SERVICE_TOKEN
    c.GPUPoolService.reload_interval = 0
    c.GPUPoolService.summary_cache_seconds = 0
    c.GPUPoolService.log_level = "WARN"
    for name, value in traits.items():
        setattr(c.GPUPoolService, name, value)
    return c


def truth(cluster: SimCluster) -> UsageIndex:
    """A fresh index from a fresh list: what the cluster says."""
    index = UsageIndex()
    index.reset(
        nodes=cluster.store.list("nodes", None)[0],
        pods=cluster.store.list("pods", None)[0],
    )
    return index


def picture(index: UsageIndex) -> dict[str, Any]:
    """Everything usage-related an index reports, in comparable form."""
    return {
        "pools": index.pools(),
        "nodes": index.nodes(),
        "users": index.usage_by_user(),
        "subjects": index.usage_by_subject(),
        "servers": [(s.namespace, s.name, s.node, s.gpus, s.state) for s in index.servers()],
    }


class Running:
    """A service started in this process, and ways to talk to it."""

    def __init__(self, app: GPUPoolService, hub: HubStub, cluster: SimCluster):
        self.app = app
        self.hub = hub
        self.cluster = cluster
        self.url = f"http://127.0.0.1:{app.port}{app.base_url}"
        self._clients: list[GPUPoolClient] = []

    @property
    def ctx(self) -> Any:
        return self.app.ctx

    async def settled(self, timeout: float = 10) -> None:
        """Wait until the service's usage index says what a fresh list of the cluster says."""
        await self.cluster.wait_for(
            lambda: picture(self.ctx.state.index) == picture(truth(self.cluster)), timeout
        )

    def client(self, token: str, **kw: Any) -> GPUPoolClient:
        c = GPUPoolClient(self.url, token, **kw)
        self._clients.append(c)
        return c

    def admin(self) -> GPUPoolClient:
        return self.client(self.hub.admin())

    def user(self, name: str, groups: list[str] = ()) -> GPUPoolClient:
        return self.client(self.hub.user(name, list(groups)))

    async def stop(self) -> None:
        for c in self._clients:
            await c.close()
        await self.app.stop_service()


ServiceFactory = Callable[..., Awaitable[Running]]


@pytest_asyncio.fixture
async def start_service(
    sim_cluster: SimCluster, hub: HubStub, pools_dir: Path
) -> AsyncIterator[ServiceFactory]:
    """``await start_service(**traits)``: a running service on the example cluster and pools."""
    running: list[Running] = []

    async def start(cluster: SimCluster | None = None, **traits: Any) -> Running:
        cluster = cluster or sim_cluster
        app = GPUPoolService(config=service_config(cluster, hub, pools_dir, **traits))
        app.initialize([])
        await app.start_service()
        r = Running(app, hub, cluster)
        running.append(r)
        return r

    yield start
    for r in running:
        await r.stop()


@pytest_asyncio.fixture
async def service(start_service: ServiceFactory) -> Running:
    return await start_service()
