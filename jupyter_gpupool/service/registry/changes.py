"""Changing pools, quotas and node labels: all checks first, then Kubernetes, then the store.

Each change runs under one lock, re-reads the store (someone may have edited the files), computes
the new documents (:mod:`.layout`), checks everything that could refuse it, and only then acts:

1. node labels, as gpuctl sets them (``runwhere.ai/pool`` and ``runwhere.ai/gpu-type`` for the
   nodes a pool lists, the type label written even when it is ``""``; the pool label removed from
   nodes a pool no longer lists or that belonged to a deleted pool); if a label write fails, the
   ones already made are put back;
2. the store (files or ConfigMap); if that fails, the labels are put back;
3. the new registry is put in force, at once, for the next admission.

So a refused or failed change leaves nothing half done. Deleting a pool never stops a server: the
answer lists the servers still running there.

Parsing and checking documents, and reading and writing the store, run in threads: a change of a
thousand pools takes a fraction of a second of CPU, during which admissions are answered. A
change may not make more than ``max_pools`` pools (``c.GPUPoolService.max_pools``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.documents.yaml_reader import DocumentError
from ...core.usage.labels import GPU_TYPE_LABEL, is_label_value
from .. import views
from ..bodies import LabelPatch
from ..cluster.kube import Kube, KubeError
from ..errors import ApiError
from ..loops import Loop
from ..state import ServiceState
from . import documents as layouts
from .store import RegistryStore

log = logging.getLogger(__name__)


def problems_error(status: int, message: str, e: DocumentError) -> ApiError:
    problems = [str(p) for p in e.problems]
    return ApiError(status, message + ":\n" + "\n".join(problems), problems=problems)


@dataclass(frozen=True)
class LabelChange:
    node: str
    new: Mapping[str, str | None]  # what to write
    old: Mapping[str, str | None]  # what to put back


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


#: ``c.GPUPoolService.max_pools``' default.
DEFAULT_MAX_POOLS = 1000


class PoolManager:
    def __init__(
        self,
        state: ServiceState,
        store: RegistryStore,
        kube: Kube | None,
        max_pools: int = DEFAULT_MAX_POOLS,
    ):
        self.state = state
        self.store = store
        self.kube = kube
        self.max_pools = max_pools
        self.lock = asyncio.Lock()
        self._fingerprint: Hashable = None
        self._bad_fingerprint: Hashable = None

    def reloader(self, interval: float) -> Loop:
        """The loop that picks up changes made outside the service every ``interval`` s."""

        async def reload() -> None:
            await self.reload_if_changed()

        return Loop("registry.reload", interval, reload)

    @property
    def pool_label(self) -> str:
        return self.state.pool_label

    def _kube(self) -> Kube:
        if self.kube is None:  # pragma: no cover - the service always has one
            raise ApiError(503, "the service has no Kubernetes client")
        return self.kube

    # --- loading ---------------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the store and put its registry in force (raises DocumentError)."""
        fingerprint = await self.store.fingerprint()
        current = await self.store.read()
        self._fingerprint = fingerprint
        self.state.set_registry(current.registry)

    async def reload_if_changed(self) -> bool:
        """Pick up changes made outside the service; a store that does not load is ignored
        (logged once) and the registry in force stays."""
        try:
            fingerprint = await self.store.fingerprint()
        except ApiError as e:  # the API server is away: try again next time
            log.warning("Cannot check %s for changes: %s", self.store.description, e.message)
            return False
        if fingerprint == self._fingerprint:
            return False
        async with self.lock:
            try:
                current = await self.store.read()
            except ApiError as e:
                log.warning("Cannot reload %s: %s", self.store.description, e.message)
                return False
            except DocumentError as e:
                if fingerprint != self._bad_fingerprint:
                    self._bad_fingerprint = fingerprint
                    log.error(
                        "%s changed but does not load; keeping the pools in force:\n%s",
                        self.store.description,
                        e,
                    )
                return False
            self._fingerprint = fingerprint
            if current.registry == self.state.registry:
                return False
            self.state.set_registry(current.registry)
            log.info("Reloaded pools and quotas from %s", self.store.description)
            return True

    async def _current(self) -> layouts.Layout:
        last = self.store.last
        if last is not None and await self.store.fingerprint() == self._fingerprint:
            return last  # nobody changed the store since it was last read or written here
        try:
            return await self.store.read()
        except DocumentError as e:
            raise problems_error(
                409, f"{self.store.description} has problems; fix them before changing pools", e
            ) from e

    async def _commit(self, edit: layouts.Edit, labels: Sequence[LabelChange]) -> None:
        applied = await self._apply_labels(labels)
        try:
            if edit.changed:
                await self.store.write(edit)
        except BaseException:
            await self._revert(applied)
            raise
        self._fingerprint = await self.store.fingerprint()
        self.state.set_registry(edit.after.registry)

    # --- node labels -----------------------------------------------------------------------------

    async def _patch(
        self,
        node: str,
        labels: Mapping[str, str | None],
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Patch a node's labels and show the result to the usage index at once, so the next
        request already sees the node in its new pool (the watch brings the same event later)."""
        patched = await self._kube().patch_node_labels(node, labels, resource_version)
        if isinstance(patched, dict) and patched.get("metadata"):
            self.state.index.apply_node("MODIFIED", patched)
        return patched

    async def _apply_labels(self, changes: Sequence[LabelChange]) -> list[LabelChange]:
        done: list[LabelChange] = []
        for change in changes:
            try:
                await self._patch(change.node, change.new)
            except KubeError as e:
                await self._revert(done)
                raise ApiError(
                    503, f"cannot label node {change.node}: {e.message}; nothing was changed"
                ) from e
            done.append(change)
        return done

    async def _revert(self, done: Sequence[LabelChange]) -> None:
        for change in reversed(done):
            try:
                await self._patch(change.node, change.old)
            except KubeError as e:  # pragma: no cover - the API failed twice in a row
                log.error("Could not put back the labels of node %s: %s", change.node, e)

    async def _nodes(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        kube = self._kube()
        try:
            found = await asyncio.gather(*(kube.get_node(n) for n in names))
        except KubeError as e:
            raise ApiError(503, f"cannot read nodes: {e.message}") from e
        missing = [n for n, node in zip(names, found, strict=True) if node is None]
        if missing:
            raise ApiError(
                400,
                f"node{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"{'do' if len(missing) > 1 else 'does'} not exist in the cluster; nothing was changed",
            )
        return {n: node for n, node in zip(names, found, strict=True) if node is not None}

    async def _labeled(self, pool: str) -> list[dict[str, Any]]:
        if not is_label_value(pool):
            return []
        try:
            return await self._kube().list_nodes(label_selector=f"{self.pool_label}={pool}")
        except KubeError as e:
            raise ApiError(503, f"cannot list nodes: {e.message}") from e

    async def _pool_label_changes(self, edit: layouts.Edit) -> list[LabelChange]:
        """gpuctl's labels for the nodes each created or replaced pool lists."""
        before, after = edit.before.registry, edit.after.registry
        wanted: dict[str, dict[str, str | None]] = {}
        for name in (*edit.created, *edit.replaced):
            pool = after.pools[name]
            for host, gpu_type in pool.nodes.items():
                # "" is written too, as gpuctl does: a node listed as CPU-only must not keep
                # the GPU type it had before
                wanted[host] = {self.pool_label: name, GPU_TYPE_LABEL: gpu_type}
        dropped: dict[str, str] = {}  # node -> pool it leaves
        for name in edit.replaced:
            old = before.pools.get(name)
            if old is not None:
                for host in old.nodes:
                    if host not in after.pools[name].nodes and host not in wanted:
                        dropped[host] = name
        nodes = await self._nodes(list(wanted))
        changes = []
        for host, labels in wanted.items():
            current = _labels(nodes[host])
            new = {k: v for k, v in labels.items() if current.get(k) != v}
            if new:
                changes.append(LabelChange(host, new, {k: current.get(k) for k in new}))
        if dropped:
            current_nodes = await asyncio.gather(*(self._kube().get_node(h) for h in dropped))
            for host, node in zip(dropped, current_nodes, strict=True):
                if node is not None and _labels(node).get(self.pool_label) == dropped[host]:
                    changes.append(
                        LabelChange(host, {self.pool_label: None}, {self.pool_label: dropped[host]})
                    )
        return changes

    # --- the changes -----------------------------------------------------------------------------

    async def apply_pools(self, body: str) -> dict[str, Any]:
        """``POST api/v1/pools``: create or replace the body's pools and label their nodes."""
        async with self.lock:
            current = await self._current()
            try:
                edit = await asyncio.to_thread(
                    layouts.upsert_pools, current, body, self.store.key_for, self.max_pools
                )
            except DocumentError as e:
                raise problems_error(400, "the pool documents have problems", e) from e
            labels = await self._pool_label_changes(edit)
            await self._commit(edit, labels)
        labeled = sorted({c.node for c in labels if c.new.get(self.pool_label)})
        unlabeled = sorted({c.node for c in labels if self.pool_label in c.new} - set(labeled))
        names = (*edit.created, *edit.replaced)
        log.info(
            "Pools created: %s; replaced: %s; nodes labelled: %s; unlabelled: %s",
            list(edit.created),
            list(edit.replaced),
            labeled,
            unlabeled,
        )
        return {
            "created": list(edit.created),
            "replaced": list(edit.replaced),
            "labeled_nodes": labeled,
            "unlabeled_nodes": unlabeled,
            "pools": [self.state.pool_summary(n) for n in names],
        }

    async def delete_pool(self, name: str) -> dict[str, Any]:
        """``DELETE api/v1/pools/{name}``: remove the document and the nodes' pool label."""
        async with self.lock:
            current = await self._current()
            defined = name in current.registry.pools
            labeled = await self._labeled(name)
            if not defined and not labeled:
                raise ApiError(404, f"no pool named {name!r}")
            if defined:
                try:
                    edit = await asyncio.to_thread(
                        layouts.delete_pool, current, name, self.store.key_for
                    )
                except DocumentError as e:
                    raise problems_error(
                        409, f"pool {name!r} is still referenced, so it was not deleted", e
                    ) from e
            else:
                edit = layouts.Edit(before=current, after=current)
            changes = [
                LabelChange(n["metadata"]["name"], {self.pool_label: None}, {self.pool_label: name})
                for n in labeled
            ]
            servers = self.state.index.servers(pool=name)
            await self._commit(edit, changes)
        message = f"pool {name} deleted"
        if servers:
            message += (
                f"; {len(servers)} server{'s' if len(servers) != 1 else ''} still "
                "running there (deleting a pool never stops servers)"
            )
        log.info("Pool %s deleted; unlabelled nodes: %s", name, [c.node for c in changes])
        return {
            "deleted": name,
            "unlabeled_nodes": sorted(c.node for c in changes),
            "servers_still_running": [views.server_row(s, self.state.index) for s in servers],
            "message": message,
        }

    async def put_quotas(self, body: str) -> None:
        """``PUT api/v1/quotas``: the body's quota documents replace all quota documents."""
        async with self.lock:
            current = await self._current()
            try:
                edit = await asyncio.to_thread(
                    layouts.replace_quotas, current, body, self.store.key_for, self.max_pools
                )
            except DocumentError as e:
                raise problems_error(400, "the quota documents have problems", e) from e
            await self._commit(edit, [])
        log.info("Quotas replaced: %s", list(edit.created) + list(edit.replaced))

    async def label_node(self, name: str, patch: LabelPatch) -> dict[str, Any]:
        """``PATCH api/v1/nodes/{name}/labels`` with ``gpuctl label node``'s rules: a label
        that already has another value is only changed with ``overwrite``."""
        kube = self._kube()
        try:
            node = await kube.get_node(name)
        except KubeError as e:
            raise ApiError(503, f"cannot read node {name}: {e.message}") from e
        if node is None:
            raise ApiError(404, f"node {name!r} not found")
        current = _labels(node)
        if not patch.overwrite:
            for key, value in patch.labels.items():
                if value is not None and key in current and current[key] != value:
                    raise ApiError(
                        409,
                        f"'{key}' already has a value ({current[key]}), and --overwrite is false",
                    )
        new = {k: v for k, v in patch.labels.items() if current.get(k) != v}
        if new:
            rv = (node.get("metadata") or {}).get("resourceVersion")
            try:
                node = await self._patch(name, new, resource_version=rv)
            except KubeError as e:
                if e.status == 409:
                    raise ApiError(
                        409, f"node {name} changed while its labels were set; try again"
                    ) from e
                raise ApiError(503, f"cannot label node {name}: {e.message}") from e
        return {
            "node": name,
            "labels": _labels(node),
            "changed": {k: v for k, v in new.items()},
        }
