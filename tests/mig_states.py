"""What a client following a node's re-cut sees: a watch on one node through the Kubernetes API
(tests/clusters.py's ``Cluster``), recording each value ``nvidia.com/mig.config.state`` takes,
in order, as the service would follow it.

::

    async with watch_node(cluster, "gpu-node-2") as seen:
        await cluster.label("gpu-node-2", "nvidia.com/mig.config", "all-1g.10gb")
        await seen.until("success")
    seen.states  # ["pending", "rebooting", "pending", "success"]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from clusters import Cluster
from waiting import async_wait_for

from jupyter_gpupool.sim.nodes.migplan import STATE_LABEL
from jupyter_gpupool.sim.remote import api_json

__all__ = ["NodeStates", "device_resources", "gpu_labels", "watch_node"]


class NodeStates:
    """The states a watch saw (a value repeated by the next update counted once), and how many
    node updates it saw."""

    def __init__(self) -> None:
        self.states: list[str] = []
        self.updates = 0
        self._last: str | None = None

    def saw(self, node: dict[str, Any]) -> None:
        self.updates += 1
        state = (node["metadata"].get("labels") or {}).get(STATE_LABEL)
        if state and state != self._last:
            self.states.append(state)
        self._last = state

    async def until(self, *ends: str, timeout: float = 30) -> list[str]:
        """The states seen, once the last is one of ``ends`` (``success`` and ``failed``)."""
        ends = ends or ("success", "failed")
        await async_wait_for(
            lambda: self.states and self.states[-1] in ends,
            what=f"the state to become one of {ends} (seen {self.states})",
            timeout=timeout,
        )
        return self.states

    def clear(self) -> None:
        """Forget the states seen (the next update repeating the last one is not a new one)."""
        self.states.clear()


@contextlib.asynccontextmanager
async def watch_node(cluster: Cluster, name: str) -> AsyncIterator[NodeStates]:
    """Watch node ``name`` from now on (its changes only) while inside ``async with``."""
    seen = NodeStates()
    data = await api_json(cluster.v1.list_node, field_selector=f"metadata.name={name}")
    rv = str(data["metadata"]["resourceVersion"])
    resp: Any = await cluster.v1.list_node(
        watch=True,
        field_selector=f"metadata.name={name}",
        resource_version=rv,
        timeout_seconds=300,
        _preload_content=False,
        _request_timeout=330,
    )

    async def read() -> None:
        async for line in resp.content:
            if line.strip():
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    seen.saw(event["object"])

    task = asyncio.create_task(read())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        resp.release()


def device_resources(node: dict[str, Any]) -> dict[str, str]:
    """The node's allocatable NVIDIA device resources."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")}


def gpu_labels(node: dict[str, Any]) -> dict[str, str]:
    """The node's ``nvidia.com/`` labels (GFD's and the MIG manager's)."""
    labels = node["metadata"].get("labels") or {}
    return {k: v for k, v in labels.items() if k.startswith("nvidia.com/")}
