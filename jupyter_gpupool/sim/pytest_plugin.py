"""pytest fixtures for a running simulated cluster.

Enable with ``pytest_plugins = ["jupyter_gpupool.sim.pytest_plugin"]`` in a ``conftest.py``.

- ``sim_cluster_file``: the cluster file to serve (the demo's ``examples/cluster.yaml`` layout by
  default; override the fixture to use another).
- ``sim_cluster``: a started :class:`~jupyter_gpupool.sim.SimCluster` (function scope).
- ``sim_kubeconfig``: the path of its kubeconfig.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from .cluster import SimCluster
from .nodes.spec import ClusterSpec, example_cluster_spec


@pytest.fixture
def sim_cluster_spec() -> ClusterSpec:
    return example_cluster_spec()


@pytest_asyncio.fixture
async def sim_cluster(sim_cluster_spec: ClusterSpec) -> AsyncIterator[SimCluster]:
    async with SimCluster(sim_cluster_spec) as cluster:
        yield cluster


@pytest.fixture
def sim_kubeconfig(sim_cluster: SimCluster) -> str:
    return sim_cluster.kubeconfig
