"""Pointing in-process Kubernetes clients at a simulated cluster, and resetting them after.

Two traps make this necessary (docs/architecture.md, "Decisions"): ``kubernetes_asyncio`` reads
``KUBECONFIG`` once, when it is imported, and KubeSpawner caches its client configuration
(``load_config`` is ``lru_cache``-d) and its clients per event loop, and keeps its pod/event reflectors in a class-level
dict. A test that starts a new cluster on a new port must undo all of that.
"""

from __future__ import annotations

import os
from typing import Any


def use_kubeconfig(kubeconfig: str) -> None:
    """Make every client created from now on in this process use ``kubeconfig``."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import kube_config

    os.environ["KUBECONFIG"] = kubeconfig
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kubeconfig
    # load_kube_config() writes the default Configuration; start from a clean one.
    Configuration.set_default(Configuration())
    try:
        from kubespawner import clients
    except ImportError:  # pragma: no cover - kubespawner is a dependency
        return
    clients.load_config.cache_clear()
    clients._client_cache.clear()


async def reset_kubespawner(spawner_class: Any = None) -> None:
    """Stop KubeSpawner's class-level reflectors and forget its cached clients."""
    try:
        from kubespawner import KubeSpawner, clients
    except ImportError:  # pragma: no cover
        return
    cls = spawner_class or KubeSpawner
    await cls._stop_all_reflectors()
    for client in list(clients._client_cache.values()):
        await client.api_client.close()
    clients._client_cache.clear()
    clients.load_config.cache_clear()
