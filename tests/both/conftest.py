"""Fixtures of the scenarios that run on both clusters (tests/clusters.py): the simulated one and
the real control plane. The ``cluster`` fixture itself is in tests/conftest.py.

``start_service(cluster, **traits)`` runs the gpupool service in this process on ``cluster``,
with a stub of JupyterHub's API (tests/service_kit.py) and a copy of the tests' pool files.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from clusters import Cluster
from service_kit import HubStub, Running, service_config

from jupyter_gpupool.service import GPUPoolService

TEST_POOLS = Path(__file__).resolve().parents[1] / "service" / "pools"


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


ServiceFactory = Callable[..., Awaitable[Running]]


@pytest_asyncio.fixture
async def start_service(hub: HubStub, pools_dir: Path) -> AsyncIterator[ServiceFactory]:
    """``await start_service(cluster, kubeconfig=None, **traits)``: a running service."""
    running: list[Running] = []

    async def start(cluster: Cluster, kubeconfig: str | None = None, **traits: Any) -> Running:
        config = service_config(kubeconfig or cluster.kubeconfig, hub, pools_dir, **traits)
        app = GPUPoolService(config=config)
        app.initialize([])
        await app.start_service()
        r = Running(app, hub, cluster, cluster.truth)
        running.append(r)
        return r

    yield start
    for r in running:
        await r.stop()
