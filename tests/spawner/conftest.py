"""Fixtures for GPUPoolSpawner in this process: the simulated cluster, a stand-in for the gpupool
service whose answers the service's own views build (tests/real_answers.py; each test chooses the
pools that are full or down), and spawners built like JupyterHub builds them. The tests against the real hub and service are in test_spawner_demo.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio
from jupyterhub.objects import Hub, Server
from spawner_fakes import TOKEN, FakeService, FakeUser

from jupyter_gpupool.sim.testing import reset_kubespawner, use_kubeconfig
from jupyter_gpupool.spawner import GPUPoolSpawner


@pytest_asyncio.fixture
async def fake_service() -> AsyncIterator[FakeService]:
    service = await FakeService().start()
    yield service
    await service.stop()


SpawnerFactory = Callable[..., GPUPoolSpawner]


@pytest_asyncio.fixture
async def make_spawner(sim_cluster, fake_service) -> AsyncIterator[SpawnerFactory]:
    """``make_spawner(**config)``: a GPUPoolSpawner for alice on the simulated cluster."""
    use_kubeconfig(sim_cluster.kubeconfig)
    made: list[GPUPoolSpawner] = []

    def make(user: FakeUser | None = None, **config: Any) -> GPUPoolSpawner:
        user = user or FakeUser()
        settings = {
            "namespace": "default",
            "image": "quay.io/jupyter/base-notebook",
            "cmd": ["jupyterhub-singleuser"],
            "start_timeout": 20,
            "http_timeout": 20,
            "service_url": fake_service.url,
            "service_token": TOKEN,
            "pool_schedule_timeout": 0.5,
            **config,
        }
        spawner = GPUPoolSpawner(
            hub=Hub(),
            user=user,
            api_token="secret-token",
            oauth_client_id=f"jupyterhub-user-{user.name}",
            **settings,
        )
        spawner.server = Server(base_url=f"/user/{user.name}/")
        made.append(spawner)
        return spawner

    yield make
    for spawner in made:
        if spawner._start_future is not None and not spawner._start_future.done():
            spawner._start_future.cancel()
    await reset_kubespawner(GPUPoolSpawner)


@pytest_asyncio.fixture
async def spawner(make_spawner) -> GPUPoolSpawner:
    return make_spawner()  # KubeSpawner makes its API client in the running loop
