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
from service_kit import (  # noqa: F401 - fixtures' and tests' helpers
    T0,
    HubStub,
    Running,
    delete_pod,
    picture,
    pod_for,
    service_config,
    start_pod,
)

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.service import GPUPoolService, clock
from jupyter_gpupool.sim import SimCluster

REPO = Path(__file__).resolve().parents[2]
TEST_POOLS = Path(__file__).resolve().parent / "pools"


@pytest_asyncio.fixture
async def hub() -> AsyncIterator[HubStub]:
    stub = await HubStub().start()
    yield stub
    await stub.stop()


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The service's clock (:func:`jupyter_gpupool.service.clock.now`) stopped at ``T0`` and
    moved by the test (``now[0] += 60``) instead of waited for."""
    t = [T0]
    monkeypatch.setattr(clock, "now", lambda: t[0])
    return t


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    """A copy of the tests' pool files (the service writes back to it)."""
    target = tmp_path / "pools"
    shutil.copytree(TEST_POOLS, target)
    return target


def truth(cluster: SimCluster) -> UsageIndex:
    """A fresh index from a fresh list: what the cluster says."""
    index = UsageIndex()
    index.reset(
        nodes=cluster.store.list("nodes", None)[0],
        pods=cluster.store.list("pods", None)[0],
    )
    return index


ServiceFactory = Callable[..., Awaitable[Running]]


@pytest_asyncio.fixture
async def start_service(
    sim_cluster: SimCluster, hub: HubStub, pools_dir: Path
) -> AsyncIterator[ServiceFactory]:
    """``await start_service(**traits)``: a running service on the example cluster and pools."""
    running: list[Running] = []

    async def start(cluster: SimCluster | None = None, **traits: Any) -> Running:
        cluster = cluster or sim_cluster
        app = GPUPoolService(config=service_config(cluster.kubeconfig, hub, pools_dir, **traits))
        app.initialize([])
        await app.start_service()

        async def fresh() -> UsageIndex:
            return truth(cluster)

        r = Running(app, hub, cluster, fresh)
        running.append(r)
        return r

    yield start
    for r in running:
        await r.stop()


@pytest_asyncio.fixture
async def service(start_service: ServiceFactory) -> Running:
    return await start_service()
