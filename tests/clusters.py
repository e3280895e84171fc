"""The two clusters the same scenarios run on: ``simulated`` (jupyter_gpupool.sim, in this process)
and ``real`` (the control plane of ../shared/realk8s: kube-apiserver, kube-scheduler and
kube-controller-manager v1.25, with the simulator's nodes and kubelet registered on it by
``jupyter_gpupool.sim.remote``, so pods really start as local processes).

A scenario takes the ``cluster`` fixture (tests/conftest.py), parametrized over both, and does
everything through the Kubernetes API with :class:`Cluster`'s helpers, the same calls on both;
only starting the cluster and restarting its API server differ. The real control plane is started
once per test run and emptied between tests (:meth:`RemoteNodes.reset`).

- ``CLUSTERS``: the pytest params, "simulated" and "real" (marked ``realk8s``);
- ``open_cluster(kind, ...)``: the cluster, its kubelet running pods as local processes or not;
- ``open_demo(kind, state, ...)``: ``gpupool demo`` (hub, proxy, service) on it;
- ``demo_on(kind, state, ...)``: the same for synchronous tests, held on a thread's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client, config

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.demo.run import Demo, DemoOptions, free_port
from jupyter_gpupool.demo.testing import DemoProcess
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import ClusterSpec, example_cluster_spec
from jupyter_gpupool.sim.remote import MERGE_PATCH, RemoteError, RemoteNodes, api_json

CLUSTERS = [
    pytest.param("simulated", id="simulated"),
    pytest.param("real", id="real", marks=pytest.mark.realk8s),
]


class Cluster:
    """One cluster under test, driven through its Kubernetes API."""

    def __init__(self, kind: str, kubeconfig: str, api: client.ApiClient):
        self.kind = kind
        self.kubeconfig = kubeconfig
        self.api = api
        self.v1 = client.CoreV1Api(api)
        self.sim: SimCluster | None = None  # the simulated cluster, in this process
        self.nodes: RemoteNodes | None = None  # the real one's nodes and kubelet
        self.realk8s_dir: Path | None = None
        self.authz = ""

    @property
    def real(self) -> bool:
        return self.kind == "real"

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """An API call as plain JSON; :class:`RemoteError` (``.status``) on an error status."""
        return await api_json(fn, *args, **kwargs)

    # --- reading -------------------------------------------------------------------------------

    async def list_pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            return (await self.call(self.v1.list_pod_for_all_namespaces))["items"]
        return (await self.call(self.v1.list_namespaced_pod, namespace))["items"]

    async def list_nodes(self) -> list[dict[str, Any]]:
        return (await self.call(self.v1.list_node))["items"]

    async def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.call(self.v1.read_namespaced_pod, name, namespace)  # type: ignore[no-any-return]
        except RemoteError as e:
            if e.status == 404:
                return None
            raise

    async def node(self, name: str) -> dict[str, Any]:
        return await self.call(self.v1.read_node, name)  # type: ignore[no-any-return]

    async def events_for(self, namespace: str, pod: str) -> list[dict[str, Any]]:
        sel = f"involvedObject.name={pod}"
        data = await self.call(self.v1.list_namespaced_event, namespace, field_selector=sel)
        return data["items"]

    async def truth(self) -> UsageIndex:
        """A usage index built from a fresh list of nodes and pods: what the cluster says."""
        index = UsageIndex()
        index.reset(nodes=await self.list_nodes(), pods=await self.list_pods())
        return index

    # --- changing nodes, as an admin (kubectl) would ------------------------------------------

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return await self.call(  # type: ignore[no-any-return]
            self.v1.patch_node, name, dict(patch), _content_type=MERGE_PATCH
        )

    async def cordon(self, name: str, unschedulable: bool = True) -> None:
        await self.patch_node(name, {"spec": {"unschedulable": unschedulable or None}})

    async def add_taint(self, name: str, taint: Mapping[str, str]) -> None:
        taints = list(((await self.node(name)).get("spec") or {}).get("taints") or [])
        await self.patch_node(name, {"spec": {"taints": [*taints, dict(taint)]}})

    async def remove_taint(self, name: str, key: str) -> None:
        taints = ((await self.node(name)).get("spec") or {}).get("taints") or []
        keep = [t for t in taints if t.get("key") != key]
        await self.patch_node(name, {"spec": {"taints": keep or None}})

    async def label(self, name: str, key: str, value: str | None) -> None:
        await self.patch_node(name, {"metadata": {"labels": {key: value}}})

    async def create_pod(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.call(self.v1.create_namespaced_pod, namespace, dict(body))  # type: ignore[no-any-return]

    async def delete_pod(self, namespace: str, name: str, grace: int | None = None) -> None:
        kwargs = {} if grace is None else {"grace_period_seconds": grace}
        with contextlib.suppress(RemoteError):
            await self.call(self.v1.delete_namespaced_pod, name, namespace, **kwargs)

    async def wait_gone(self, namespace: str, name: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while await self.pod(namespace, name) is not None:
            if time.monotonic() > deadline:
                raise AssertionError(f"pod {namespace}/{name} still there after {timeout}s")
            await asyncio.sleep(0.1)

    # --- the API server going away ------------------------------------------------------------

    async def restart_apiserver(self) -> None:
        """Restart the API server: every watch breaks, and old resource versions may be gone.

        Real: ``up DIR restart-apiserver`` (the same etcd). Simulated: the watches are cut and
        the history they would resume from is expired, so a watch from an old resource version
        gets 410 Gone, as after a compaction."""
        if self.sim is not None:
            self.sim.faults.expire_history()
            self.sim.faults.cut_watches()
            return
        assert self.realk8s_dir is not None
        import realk8s

        await asyncio.to_thread(realk8s.restart_apiserver, self.realk8s_dir, self.authz)


async def _api(kubeconfig: str) -> client.ApiClient:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return client.ApiClient(configuration=cfg)


@contextlib.asynccontextmanager
async def open_cluster(
    kind: str,
    *,
    realk8s_kubeconfig: Path | None = None,
    spec: ClusterSpec | None = None,
    run_processes: bool = False,
    authz: str = "",
) -> AsyncIterator[Cluster]:
    """The cluster ``kind`` with the nodes of ``spec`` (examples/cluster.yaml's by default), its
    kubelet running pods as local processes when ``run_processes``."""
    spec = spec or example_cluster_spec()
    if kind == "simulated":
        async with SimCluster(spec, run_processes=run_processes) as sim:
            api = await _api(sim.kubeconfig)
            cluster = Cluster(kind, sim.kubeconfig, api)
            cluster.sim = sim
            try:
                yield cluster
            finally:
                await api.close()
        return
    assert realk8s_kubeconfig is not None, "the real cluster needs the realk8s fixture"
    nodes = RemoteNodes(str(realk8s_kubeconfig), spec, run_processes=run_processes)
    await nodes.start(reset=True)
    api = await _api(str(realk8s_kubeconfig))
    cluster = Cluster(kind, str(realk8s_kubeconfig), api)
    cluster.nodes = nodes
    cluster.realk8s_dir = realk8s_kubeconfig.parent
    cluster.authz = authz
    try:
        yield cluster
    finally:
        # the kubelet stops the pods' processes; the next test's reset deletes their objects
        await nodes.stop()
        await api.close()


@contextlib.asynccontextmanager
async def open_demo(
    kind: str,
    state: Path,
    *,
    realk8s_kubeconfig: Path | None = None,
    extra_config: str = "",
) -> AsyncIterator[tuple[Cluster, Demo]]:
    """``gpupool demo`` (JupyterHub, its proxy and the gpupool service, as child processes) on
    the cluster ``kind``, whose kubelet runs the single-user servers as local processes.
    ``extra_config``: JupyterHub config loaded after the demo's (e.g. shorter timeouts)."""
    async with open_cluster(
        kind, realk8s_kubeconfig=realk8s_kubeconfig, run_processes=True
    ) as cluster:
        state.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - a test's own directory
        extra = None
        if extra_config:
            extra = state / "extra_config.py"
            extra.write_text(extra_config)
        opts = DemoOptions(
            port=free_port(),
            state_dir=state,
            extra_config=extra,
            kubeconfig=Path(cluster.kubeconfig),
        )
        demo = Demo(opts)
        try:
            await demo.start()
            yield cluster, demo
        finally:
            await demo.stop()


# --- the demo for synchronous tests ----------------------------------------------------------------
# A synchronous test (the CLI runs an event loop of its own, so does a kernel client) holds the
# demo and its cluster (the simulated one in this process, or the real one's kubelet) on an event
# loop in a thread of their own; DemoOn.run runs a Cluster call there.

T = TypeVar("T")


@dataclass(repr=False)
class DemoOn(DemoProcess):
    """The demo (``api``, ``start_server``, ``url``, ``state``, ``token`` as DemoProcess) on the
    cluster ``kind``, whose Kubernetes API ``cluster`` reads and changes."""

    kind: str
    cluster: Cluster
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``coro`` (e.g. a :class:`Cluster` call) on the demo's event loop; its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __repr__(self) -> str:
        return f"<demo on the {self.kind} cluster, {self.url}>"


def demo_on(kind: str, state: Path, realk8s_kubeconfig: Path | None) -> Iterator[DemoOn]:
    """``open_demo(kind, state)`` held open on an event loop in a thread of its own."""
    opened: concurrent.futures.Future[tuple[DemoOn, asyncio.Event]] = concurrent.futures.Future()
    failed: list[BaseException] = []

    async def hold() -> None:
        stop = asyncio.Event()
        async with open_demo(kind, state, realk8s_kubeconfig=realk8s_kubeconfig) as (c, d):
            assert d.hub is not None
            loop = asyncio.get_running_loop()
            on = DemoOn(d.hub, d.url, d.state, d.admin_token, kind, c, loop)
            opened.set_result((on, stop))
            await stop.wait()

    def serve() -> None:
        try:
            asyncio.run(hold())
        except BaseException as e:
            if opened.done():
                failed.append(e)  # on the way out: raised at teardown
            else:
                opened.set_exception(e)  # on the way in: raised at setup

    thread = threading.Thread(target=serve, name=f"demo-{kind}", daemon=True)
    thread.start()
    on, stop = opened.result(timeout=240)
    try:
        yield on
    finally:
        on.loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=120)
    assert not thread.is_alive(), f"the {kind} demo did not stop within 120 s"
    if failed:
        raise failed[0]
