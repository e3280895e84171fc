"""ClusterView against the simulated cluster: sync, follow, resume, relist on 410, back off."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kubernetes_asyncio
import pytest
import pytest_asyncio
from kubernetes_asyncio.client.exceptions import ApiException

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.service.cluster.watch import ClusterView, continue_token
from jupyter_gpupool.sim import SimCluster

CLUSTER = Path(__file__).resolve().parents[3] / "examples" / "cluster.yaml"


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster.from_file(CLUSTER) as c:
        yield c


@pytest_asyncio.fixture
async def api(cluster: SimCluster) -> AsyncIterator[kubernetes_asyncio.client.ApiClient]:
    cfg = kubernetes_asyncio.client.Configuration()
    await kubernetes_asyncio.config.load_kube_config(
        config_file=cluster.kubeconfig, client_configuration=cfg
    )
    async with kubernetes_asyncio.client.ApiClient(cfg) as client:
        yield client


def gpu_pod(name: str, gpus: int, pool: str, user: str = "alice") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"gpupool.jupyter.org/pool": pool},
            "annotations": {"gpupool.jupyter.org/user": user},
        },
        "spec": {
            "nodeSelector": {"runwhere.ai/pool": pool},
            "containers": [
                {"name": "nb", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
    }


async def test_syncs_and_follows_the_cluster(cluster, api):
    index = UsageIndex()
    async with ClusterView(api, index, watch_timeout=5) as view:
        await view.wait_synced(10)
        assert view.synced
        assert [(p.name, p.gpu_total, p.node_count) for p in index.pools()] == [
            ("compute-pool", 0, 2),
            ("default", 4, 1),
            ("dev-pool", 4, 1),
            # 8 whole A10s on 2 nodes, and the time-sliced one (its replicas are not GPUs)
            ("inference-pool", 8, 3),
            ("training-pool", 16, 3),
        ]
        core = kubernetes_asyncio.client.CoreV1Api(api)
        await core.create_namespaced_pod("default", gpu_pod("nb-1", 6, "training-pool"))
        await cluster.wait_for(lambda: index.pool_usage("training-pool").gpu_used == 6)
        assert index.pool_usage("training-pool").largest_free_block == 8
        [server] = index.servers("training-pool")
        assert (server.user, server.gpus, server.state) == ("alice", 6, "running")

        cluster.cordon("gpu-node-3", True)
        cluster.set_condition("gpu-node-4", "DiskPressure", True)
        cluster.cordon("gpu-node-shared-1", True)
        await cluster.wait_for(lambda: index.pool_usage("inference-pool").status == "unavailable")
        assert index.node("gpu-node-3").reasons == ("cordoned (scheduling disabled)",)

        # a node moving pools takes its pod with it
        cluster.label_node(server.node, "runwhere.ai/pool", "dev-pool")
        await cluster.wait_for(lambda: index.pool_usage("dev-pool").gpu_used == 6)
        assert index.pool_usage("training-pool").gpu_used == 0

        await core.delete_namespaced_pod("nb-1", "default", grace_period_seconds=0)
        await cluster.wait_for(lambda: index.pool_usage("dev-pool").gpu_used == 0)
        assert view.stats["lists"] == 2 and view.stats["errors"] == 0


async def test_finished_pods_leave_the_index(cluster, api):
    """The field selector drops finished pods; the watch then says DELETED."""
    index = UsageIndex()
    async with ClusterView(api, index, watch_timeout=5) as view:
        await view.wait_synced(10)
        core = kubernetes_asyncio.client.CoreV1Api(api)
        await core.create_namespaced_pod("default", gpu_pod("job", 2, "dev-pool"))
        await cluster.wait_for(lambda: index.pool_usage("dev-pool").gpu_used == 2)
        await core.patch_namespaced_pod_status("job", "default", {"status": {"phase": "Succeeded"}})
        await cluster.wait_for(lambda: index.pool_usage("dev-pool").gpu_used == 0)
        assert index.servers() == []


async def test_resumes_after_cut_watches_without_listing_again(cluster, api):
    index = UsageIndex()
    async with ClusterView(api, index, watch_timeout=30) as view:
        await view.wait_synced(10)
        for _ in range(3):
            # once both watches (nodes, pods) are open on the server, cut them
            await cluster.wait_for(lambda: len(cluster.store.watchers) >= 2)
            before = view.stats["watches"]
            assert cluster.faults.cut_watches() == 2
            await cluster.wait_for(lambda b=before: view.stats["watches"] >= b + 2)
        cluster.add_node(
            {"name": "gpu-node-9", "labels": {"runwhere.ai/pool": "dev-pool"}, "gpu": {"count": 2}}
        )
        await cluster.wait_for(lambda: index.node("gpu-node-9") is not None)
        assert view.stats["lists"] == 2 and view.stats["relists_410"] == 0
        assert view.stats["watches"] >= 8


async def test_relists_on_410_gone(cluster, api):
    index = UsageIndex()
    view = ClusterView(api, index, watch_timeout=30)
    view.start()
    await view.wait_synced(10)
    await view.stop()
    # changes the view misses, then history it could resume from is gone
    cluster.remove_node("node-6")
    cluster.add_node({"name": "late", "labels": {"runwhere.ai/pool": "dev-pool"}})
    cluster.faults.expire_history()
    view.start()
    try:
        # a relist applies its pages as they come and drops what is gone at its end: node-6
        # leaves the index after "late" arrives (a CI run read the index between the two)
        await cluster.wait_for(
            lambda: index.node("late") is not None and index.node("node-6") is None
        )
        assert index.node("node-6") is None
        assert view.stats["relists_410"] >= 1
        assert "default" not in index.pool_names()
    finally:
        await view.stop()


async def test_backs_off_on_errors_and_recovers(cluster, api):
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0.01)

    cluster.faults.configure(error_rate=1.0, paths=["/api/v1/nodes"])
    index = UsageIndex()
    view = ClusterView(api, index, rng=lambda: 1.0, sleep=fake_sleep, backoff_cap=4.0)
    view.start()
    try:
        await cluster.wait_for(lambda: len(delays) >= 5)
        assert not view.synced
        assert delays[:5] == [0.5, 1.0, 2.0, 4.0, 4.0]  # exponential, capped
        assert "500" in (view.last_error or "")
        cluster.faults.configure(error_rate=0.0)
        await view.wait_synced(10)
        assert index.node_count == 10
    finally:
        await view.stop()


# --- against a fake API, for what the simulator cannot easily stage -----------------------------


class FakeResponse:
    def __init__(self, status: int, body: bytes, lines: list[bytes] | None = None):
        self.status = status
        self._body = body
        self.content = self
        self._lines = list(lines or [])

    async def read(self) -> bytes:
        return self._body

    async def readline(self) -> bytes:
        return self._lines.pop(0) if self._lines else b""

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_http_errors_of_raw_calls_become_api_exceptions():
    view = ClusterView(kubernetes_asyncio.client.ApiClient(), UsageIndex())
    try:

        async def list_node(**kwargs: Any) -> FakeResponse:
            assert kwargs["_preload_content"] is False
            return FakeResponse(403, b'{"kind": "Status", "message": "nodes is forbidden"}')

        view.core.list_node = list_node  # type: ignore[method-assign]
        with pytest.raises(ApiException) as err:
            await view._list("nodes")
        assert err.value.status == 403 and err.value.reason == "nodes is forbidden"
    finally:
        await view.core.api_client.close()


async def test_paginated_list_is_read_whole():
    index = UsageIndex()
    index.apply_node("ADDED", {"metadata": {"name": "gone"}})
    view = ClusterView(kubernetes_asyncio.client.ApiClient(), index, page_size=1)
    try:
        pages = [
            b'{"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t1"}}',
            b'{"items": [{"metadata": {"name": "b"}}], "metadata": {"resourceVersion": "42"}}',
        ]
        seen: list[dict[str, Any]] = []

        async def list_node(**kwargs: Any) -> FakeResponse:
            seen.append(kwargs)
            return FakeResponse(200, pages[len(seen) - 1])

        view.core.list_node = list_node  # type: ignore[method-assign]
        rv = await view._list("nodes")
        # both pages are in the index, and the node the list no longer has is gone
        assert index.node_names() == ["a", "b"] and rv == "42"
        assert seen[1]["_continue"] == "t1" and seen[0]["limit"] == 1
    finally:
        await view.core.api_client.close()


async def test_a_list_that_fails_midway_drops_nothing():
    """A list cut off after its first page leaves the nodes it did not reach in the index (it
    cannot know they are gone) and is not counted as a list."""
    index = UsageIndex()
    index.apply_node("ADDED", {"metadata": {"name": "z"}})
    view = ClusterView(kubernetes_asyncio.client.ApiClient(), index, page_size=1)
    try:
        calls = 0

        async def list_node(**kwargs: Any) -> FakeResponse:
            nonlocal calls
            calls += 1
            if calls == 1:
                return FakeResponse(
                    200, b'{"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t"}}'
                )
            return FakeResponse(500, b'{"kind": "Status", "message": "etcd is down"}')

        view.core.list_node = list_node  # type: ignore[method-assign]
        with pytest.raises(ApiException):
            await view._list("nodes")
        assert index.node_names() == ["a", "z"] and view.stats["lists"] == 0
    finally:
        await view.core.api_client.close()


def test_continue_token_is_read_off_the_head_of_a_page():
    """The fetcher asks for the next page before this one is decoded: it must find the token
    the API server writes (compact or spaced JSON), know a last page, and refuse to guess when
    the metadata comes after the items (or a pod's own annotation says "continue")."""
    assert continue_token(b'{"kind":"PodList","metadata":{"continue":"abc="},"items":[]}') == "abc="
    assert continue_token(b'{"metadata": {"continue": "t1"}, "items": [{}]}') == "t1"
    assert continue_token(b'{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[]}') == ""
    tricky = b'{"items":[{"metadata":{"annotations":{"continue":"no"}}}],"metadata":{}}'
    assert continue_token(tricky) is None
