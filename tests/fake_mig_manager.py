"""A fake of NVIDIA's MIG manager (with the device plugin and GFD it restarts) for the real control
plane, whose nodes are the simulator's (``jupyter_gpupool.sim.remote.RemoteNodes``): nothing
runs a MIG manager there.

Like mig-parted's ``cmd/nvidia-mig-manager/main.go`` it watches the nodes and acts when a node's
``nvidia.com/mig.config`` label changes value (the latest value, once the change under way is
done); what it does is the simulator's plan (``sim/nodes/migplan.py``, from mig-parted's
``pkg/mig/reconfigure/reconfigure.go``), written through the API server as the real components
write it:

- the MIG manager: ``nvidia.com/mig.config.state`` by merge patches of the node's labels,
  ``delay`` seconds apart;
- then the device plugin, through the kubelet: ``status.capacity`` and ``status.allocatable``
  (the status subresource), a resource it no longer has at ``0``;
- then GFD: its ``nvidia.com/`` labels for the new layout (a merge patch; labels it no longer
  writes removed).

The GPUs in use are the RemoteNodes kubelet's (its device table); the new layout is given to
that kubelet, which hands out the new devices.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from jupyter_gpupool.core.documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from jupyter_gpupool.sim.nodes.migplan import (
    CONFIG_LABEL,
    STATE_LABEL,
    node_labels,
    node_resources,
    plan,
)
from jupyter_gpupool.sim.remote import MERGE_PATCH, RemoteError, RemoteNodes, api_json

log = logging.getLogger(__name__)


class FakeMigManager:
    """The MIG manager of every node of ``nodes`` (started), while inside ``async with``."""

    def __init__(self, nodes: RemoteNodes, configs: MigConfigs | None = None, delay: float = 0.05):
        self.nodes = nodes
        self.configs = DEFAULT_CONFIGS if configs is None else configs
        self.delay = delay
        self.specs = {n.name: n for n in nodes.spec.nodes}
        self._seen: dict[str, str] = {}  # each node's label as the watch last saw it
        self._current: dict[str, str] = {}  # the value to take up (mig-parted's ``current``)
        self._taken: dict[str, str] = {}  # the value taken up last (``lastRead``)
        self._wake: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> FakeMigManager:
        data = await api_json(self.nodes.v1.list_node)
        for node in data["items"]:
            name = node["metadata"]["name"]
            value = (node["metadata"].get("labels") or {}).get(CONFIG_LABEL, "")
            # the nodes start as their cluster file cuts them: the label they carry is applied
            self._seen[name] = self._current[name] = self._taken[name] = value
        rv = str(data["metadata"]["resourceVersion"])
        self._tasks.append(asyncio.create_task(self._follow(rv), name="fake-mig-manager"))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the label -----------------------------------------------------------------------------

    async def _follow(self, rv: str) -> None:
        while True:
            try:
                rv = await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a broken watch: list again
                log.info("node watch ended (%s); listing again", e)
                await asyncio.sleep(0.2)
                with contextlib.suppress(Exception):
                    data = await api_json(self.nodes.v1.list_node)
                    for node in data["items"]:
                        self._saw(node)
                    rv = str(data["metadata"]["resourceVersion"])

    async def _watch(self, rv: str) -> str:
        resp: Any = await self.nodes.v1.list_node(
            watch=True,
            resource_version=rv,
            timeout_seconds=300,
            _preload_content=False,
            _request_timeout=330,
        )
        try:
            if resp.status >= 400:
                raise RemoteError(resp.status, (await resp.read())[:200].decode())
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise RemoteError(int(obj.get("code") or 0), str(obj.get("message")))
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._saw(obj)
        finally:
            resp.release()
        return rv

    def _saw(self, node: dict[str, Any]) -> None:
        """The informer's UpdateFunc: a changed, non-empty value is the one to take up."""
        name = node["metadata"]["name"]
        value = (node["metadata"].get("labels") or {}).get(CONFIG_LABEL, "")
        if name not in self.specs or value == self._seen.get(name):
            return
        self._seen[name] = value
        if not value:
            return
        self._current[name] = value
        if name not in self._wake:
            self._wake[name] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._work(name), name=f"mig-{name}"))
        self._wake[name].set()

    async def _work(self, name: str) -> None:
        """One node's manager: takes up the latest value, one change at a time."""
        wake = self._wake[name]
        while True:
            await wake.wait()
            wake.clear()
            config = self._current[name]
            if config == self._taken.get(name):
                continue
            self._taken[name] = config
            try:
                await self._reconfigure(name, config)
            except RemoteError as e:
                log.warning("node %s: the fake MIG manager's write failed: %s", name, e)

    # --- what the MIG manager, the device plugin and GFD write ----------------------------------

    async def _reconfigure(self, name: str, config: str) -> None:
        spec = self.specs[name]
        devices = self.nodes.kubelet.devices if self.nodes.kubelet else None
        p = plan(spec, config, self.configs)
        if not p.steps:
            await self._state(name, p.end)
            return
        if devices is not None and devices.pods_on(name, p.touched):
            await self._state(name, "pending")
            await self._state(name, "failed")
            return
        for state in p.steps:
            await self._state(name, state)
            await asyncio.sleep(self.delay)
        busy = devices.pods_on(name, p.touched) if devices is not None else []
        if busy or p.end == "failed":
            await self._state(name, "failed")
            return
        await self._state(name, "success")
        if p.new is None:
            return
        new = p.new
        old_layout, new_layout = self.nodes.layouts.get(name), new.gpu.layout()
        if devices is not None:
            devices.relayout(name, old_layout, new_layout)
        if new_layout is None:
            self.nodes.layouts.pop(name, None)
        else:
            self.nodes.layouts[name] = new_layout
        self.specs[name] = new
        v1 = self.nodes.v1
        node = await api_json(v1.read_node, name)
        status = node.get("status") or {}
        room = {k: node_resources(status.get(k) or {}, new) for k in ("capacity", "allocatable")}
        await api_json(v1.patch_node_status, name, {"status": room}, _content_type=MERGE_PATCH)
        labels = node["metadata"].get("labels") or {}
        after = node_labels(labels, spec, new)
        patch: dict[str, str | None] = {k: v for k, v in after.items() if labels.get(k) != v}
        patch.update({k: None for k in labels if k not in after})
        if patch:
            body = {"metadata": {"labels": patch}}
            await api_json(v1.patch_node, name, body, _content_type=MERGE_PATCH)

    async def _state(self, name: str, state: str) -> None:
        body = {"metadata": {"labels": {STATE_LABEL: state}}}
        await api_json(self.nodes.v1.patch_node, name, body, _content_type=MERGE_PATCH)
