"""The simulated kubelet: runs the pods the scheduler bound.

By default a bound pod is marked Running with a pod IP and ready containers after
``start_delay`` seconds. With ``run_processes`` the first container's command runs as a local
process with the pod's environment, so a real single-user server answers (a container without
command or args, which would run its image's default command, just keeps running). Every pod gets
its own loopback address (127.N.0.2, 127.N.0.3, … with N random per cluster, see
``GPUPOOL_SIM_POD_NETS``): a pod has its own network namespace in Kubernetes, so
a server binding ``0.0.0.0:8888`` in two pods is fine there; here ``0.0.0.0`` in the command and
environment is replaced by the pod's address, so several servers run side by side. The process's
exit becomes the pod's phase (Succeeded for 0, Failed otherwise); its output is the pod's log.

GPUs: as the kubelet's device manager with NVIDIA's device plugin, :class:`GPUDevices` gives each
container that asks for ``nvidia.com/gpu`` whole GPUs of its node when the kubelet admits the pod
(the lowest free indices, in the order pods are bound), and takes them back when the pod finishes
or goes away. A process gets ``NVIDIA_VISIBLE_DEVICES`` with their UUIDs, as the device plugin's
default ``envvar`` strategy sets it; the simulated DCGM exporter (:mod:`.dcgm`) reads the same
table, as the real one asks the kubelet's pod-resources API.

The kubelet reads and writes pods through a :class:`PodHost`: the simulator's store in this
process (:class:`StoreHost`), or a real API server (:mod:`.remote`), so that the same kubelet runs
the single-user servers a real control plane schedules.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import ipaddress
import logging
import os
import random
import signal
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.quantities import parse_quantity
from .defaults import now_iso
from .resources import RESOURCES
from .store import Store
from .watches import WatchEvent

log = logging.getLogger(__name__)

# Variables of the simulator's own environment that must not leak into pods.
_DROP_ENV_PREFIXES = ("JUPYTERHUB_", "KUBERNETES_", "KUBECONFIG", "JPY_", "CONFIGPROXY_")


#: ``LOW-HIGH``: the N of the pods' 127.N.0.M addresses is picked in this range (default 1-254).
#: Clusters that pick N at random from the same range may pick the same one; clusters given
#: ranges of their own cannot (the test suite gives each of its parallel workers one).
POD_NETS_ENV = "GPUPOOL_SIM_POD_NETS"


def pod_nets() -> tuple[int, int]:
    """The range N is picked in: 1-254, or what ``$GPUPOOL_SIM_POD_NETS`` says (ValueError if it
    is not ``LOW-HIGH`` with 1 <= LOW <= HIGH <= 254)."""
    raw = os.environ.get(POD_NETS_ENV, "").strip()
    if not raw:
        return (1, 254)
    low, sep, high = raw.partition("-")
    try:
        bounds = (int(low), int(high))
    except ValueError:
        bounds = (0, -1)
    if not sep or not 1 <= bounds[0] <= bounds[1] <= 254:
        raise ValueError(f"{POD_NETS_ENV}={raw!r}: expected LOW-HIGH within 1-254, e.g. 1-63")
    return bounds


class IPAllocator:
    """Hands out loopback addresses, reusing freed ones.

    Each simulated cluster starts at a random 127.N.0.2 (N from :func:`pod_nets`), so that two
    clusters on one machine (two demos, or tests running beside a demo) don't give their pods the
    same address.
    """

    def __init__(self, first: str | None = None):
        if first is None:
            first = f"127.{random.randint(*pod_nets())}.0.2"
        self._next = int(ipaddress.IPv4Address(first))
        self._last = int(ipaddress.IPv4Address("127.255.255.254"))
        self._free: list[int] = []

    def allocate(self) -> str:
        if self._free:
            return str(ipaddress.IPv4Address(self._free.pop(0)))
        if self._next > self._last:
            raise RuntimeError("out of loopback addresses")
        ip = self._next
        self._next += 1
        return str(ipaddress.IPv4Address(ip))

    def release(self, ip: str) -> None:
        self._free.append(int(ipaddress.IPv4Address(ip)))
        self._free.sort()


GPU_RESOURCE = "nvidia.com/gpu"
_GPU_UUIDS = uuid.UUID("5d0c3a4e-7a0b-4c55-9a43-2f6a0d1e8b17")  # a fixed namespace for uuid5


def gpu_uuid(node: str, index: int) -> str:
    """The UUID of GPU ``index`` of ``node``, as NVML names GPUs (``GPU-`` + a UUID): stable for a
    node name and index, so the same GPU keeps its UUID across restarts of the simulator."""
    return f"GPU-{uuid.uuid5(_GPU_UUIDS, f'{node}/{index}')}"


def container_gpus(container: Mapping[str, Any]) -> int:
    """How many ``nvidia.com/gpu`` a container asks for (its limit; requests equal limits)."""
    res = container.get("resources") or {}
    want = (res.get("limits") or {}).get(
        GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE)
    )
    return int(parse_quantity(want)) if want is not None else 0


@dataclass(frozen=True)
class GPUHolder:
    """Who holds a GPU: the pod (by uid, namespace and name) and its container."""

    uid: str
    namespace: str
    pod: str
    container: str


class GPUDevices:
    """The kubelet's device manager for ``nvidia.com/gpu``: which GPUs of each node each container
    holds.

    A pod's containers get the lowest free indices of its node, in container order, when the
    kubelet first sees the pod bound (admission); pods are seen in the order they are bound. The
    GPUs are freed when the pod reaches Succeeded or Failed or is deleted. Init containers get none
    (the real device manager lends theirs to the app containers afterwards). ``capacity(node)`` is
    the node's allocatable ``nvidia.com/gpu`` (None: unknown, no bound); a pod that asks for more
    than are free is logged and holds none, where the real kubelet would reject it
    (``UnexpectedAdmissionError``).
    """

    def __init__(self, capacity: Callable[[str], int | None] | None = None):
        self._capacity = capacity or (lambda node: None)
        self._nodes: dict[str, dict[int, GPUHolder]] = {}
        self._pods: dict[str, str] = {}  # pod uid -> node

    def allocate(self, pod: Mapping[str, Any]) -> dict[str, list[int]]:
        """Give the bound ``pod``'s containers their GPUs (once): ``{container: [index, ...]}``."""
        md = pod["metadata"]
        uid = md["uid"]
        if uid in self._pods:
            return self.of_pod(uid)
        node = (pod.get("spec") or {}).get("nodeName")
        wants = [(c["name"], container_gpus(c)) for c in _containers(pod)]
        wants = [(name, n) for name, n in wants if n > 0]
        if not node or not wants:
            return {}
        held = self._nodes.setdefault(node, {})
        total = sum(n for _, n in wants)
        capacity = self._capacity(node)
        bound = capacity if capacity is not None else len(held) + total
        free = [i for i in range(bound) if i not in held]
        if len(free) < total:
            log.warning(
                "pod %s/%s asks for %d %s on node %s, which has %d free: it holds none",
                md.get("namespace"),
                md.get("name"),
                total,
                GPU_RESOURCE,
                node,
                len(free),
            )
            return {}
        self._pods[uid] = node
        out = {}
        for name, n in wants:
            take, free = free[:n], free[n:]
            for i in take:
                held[i] = GPUHolder(uid, md.get("namespace", ""), md.get("name", ""), name)
            out[name] = take
        return out

    def release(self, uid: str) -> None:
        """The pod is done with its GPUs (finished or deleted)."""
        node = self._pods.pop(uid, None)
        if node is not None:
            held = self._nodes.get(node, {})
            for i in [i for i, h in held.items() if h.uid == uid]:
                del held[i]

    def of_pod(self, uid: str) -> dict[str, list[int]]:
        """The GPU indices each container of the pod holds (empty when it holds none)."""
        node = self._pods.get(uid)
        out: dict[str, list[int]] = {}
        for i, h in sorted(self._nodes.get(node or "", {}).items()):
            if h.uid == uid:
                out.setdefault(h.container, []).append(i)
        return out

    def node_of(self, uid: str) -> str | None:
        """The node whose GPUs the pod holds, or None."""
        return self._pods.get(uid)

    def holders(self, node: str) -> dict[int, GPUHolder]:
        """The GPUs of ``node`` that are held, by index."""
        return dict(self._nodes.get(node, {}))


def _store_gpu_capacity(store: Store) -> Callable[[str], int | None]:
    def capacity(node: str) -> int | None:
        obj = store.find("nodes", None, node)
        if obj is None:
            return 0
        alloc = (obj.get("status") or {}).get("allocatable") or {}
        return int(parse_quantity(alloc.get(GPU_RESOURCE, "0")))

    return capacity


#: What the kubelet is told of a pod: ``(type, pod)``, type ADDED, MODIFIED or DELETED.
PodListener = Callable[[str, dict[str, Any]], None]


class PodHost(Protocol):
    """Where the kubelet finds its pods and reports what it does with them."""

    def clock(self) -> float: ...

    def pods(self) -> Iterable[dict[str, Any]]:
        """The pods known now."""

    def current(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        """The pod as known now, or None when it is gone (or replaced: another uid)."""

    def listen(self, listener: PodListener) -> None: ...

    def unlisten(self, listener: PodListener) -> None: ...

    async def lookup(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A secret or config map the pod's environment refers to."""

    async def write_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None: ...

    async def record_event(
        self, pod: Mapping[str, Any], etype: str, reason: str, message: str, host: str
    ) -> None: ...

    async def finish_deletion(self, pod: Mapping[str, Any]) -> None:
        """The pod's containers have stopped: its object goes away."""


class StoreHost:
    """The simulator's store, in this process: every write is done when the call returns."""

    def __init__(self, store: Store):
        self.store = store
        self._listeners: dict[PodListener, Callable[[WatchEvent], None]] = {}

    def clock(self) -> float:
        return self.store.clock()

    def pods(self) -> Iterable[dict[str, Any]]:
        return list(self.store.iter("pods"))

    def current(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        md = pod["metadata"]
        cur = self.store.find("pods", md["namespace"], md["name"])
        if cur is None or cur["metadata"]["uid"] != md["uid"]:
            return None
        return cur

    def listen(self, listener: PodListener) -> None:
        def on_event(ev: WatchEvent) -> None:
            if ev.resource == "pods":
                listener(ev.type, ev.obj)

        self._listeners[listener] = on_event
        self.store.listeners.append(on_event)

    def unlisten(self, listener: PodListener) -> None:
        on_event = self._listeners.pop(listener, None)
        with contextlib.suppress(ValueError):
            self.store.listeners.remove(on_event)  # type: ignore[arg-type]

    async def lookup(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.find(plural, namespace, name)

    async def write_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None:
        cur = self.current(pod)
        if cur is None:
            return
        new = copy.deepcopy(cur)
        new["status"] = status
        md = cur["metadata"]
        self.store.write_internal(RESOURCES["pods"], (md["namespace"], md["name"]), cur, new)

    async def record_event(
        self, pod: Mapping[str, Any], etype: str, reason: str, message: str, host: str
    ) -> None:
        self.store.record_pod_event(dict(pod), etype, reason, message, "kubelet", host)

    async def finish_deletion(self, pod: Mapping[str, Any]) -> None:
        if self.current(pod) is not None:
            md = pod["metadata"]
            self.store.finish_pod_deletion(md["namespace"], md["name"])


class Kubelet:
    def __init__(
        self,
        host: Store | PodHost,
        *,
        run_processes: bool = False,
        start_delay: float = 0.0,
        workdir: str | None = None,
    ):
        self.host: PodHost = StoreHost(host) if isinstance(host, Store) else host
        # On the simulator's store, a node's GPUs are its allocatable nvidia.com/gpu; on another
        # API server the kubelet does not read nodes, and hands out indices without a bound.
        self.devices = GPUDevices(_store_gpu_capacity(host) if isinstance(host, Store) else None)
        self.run_processes = run_processes
        self.start_delay = start_delay
        self.ips = IPAllocator()
        self._workdir = Path(workdir or tempfile.mkdtemp(prefix="gpupool-sim-pods-"))
        self._tasks: dict[str, asyncio.Task] = {}  # pod uid -> task running it
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._ips: dict[str, str] = {}
        self._stopping: set[str] = set()

    def start(self) -> None:
        self.host.listen(self._on_event)
        for pod in list(self.host.pods()):
            self._consider(pod)

    async def stop(self) -> None:
        self.host.unlisten(self._on_event)
        for proc in list(self._procs.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in list(self._procs.values()):
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        for task in list(self._tasks.values()):
            task.cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def log_path(self, pod: Mapping[str, Any]) -> Path:
        return self._workdir / pod["metadata"]["uid"] / "log"

    def read_log(self, pod: Mapping[str, Any]) -> str:
        p = self.log_path(pod)
        if p.exists():
            return p.read_text(errors="replace")
        return ""

    # ---- reacting to the store -------------------------------------------------------------

    def _on_event(self, etype: str, pod: dict[str, Any]) -> None:
        if etype != "DELETED":
            self._consider(pod)
        else:
            self.devices.release(pod["metadata"]["uid"])
            ip = self._ips.pop(pod["metadata"]["uid"], None)
            if ip:
                self.ips.release(ip)

    def _consider(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        if pod["metadata"].get("deletionTimestamp"):
            if uid not in self._stopping:
                self._stopping.add(uid)
                self._spawn(self._terminate(pod), f"kubelet-stop-{uid}")
            return
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase in ("Succeeded", "Failed"):
            self.devices.release(uid)
            return
        self.devices.allocate(pod)  # admission: the GPUs are the pod's from now on
        if phase == "Pending" and uid not in self._tasks:
            self._tasks[uid] = self._spawn(self._run_pod(pod), f"kubelet-run-{uid}")

    def _spawn(self, coro: Any, name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        task.add_done_callback(self._task_done)
        return task

    @staticmethod
    def _task_done(task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("kubelet task %s failed", task.get_name(), exc_info=task.exception())

    def _current(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.host.current(pod)

    # ---- running a pod ---------------------------------------------------------------------

    async def _run_pod(self, pod: dict[str, Any]) -> None:
        if self.start_delay:
            await asyncio.sleep(self.start_delay)
        pod = self._current(pod) or {}
        if not pod or pod["metadata"].get("deletionTimestamp"):
            return
        uid = pod["metadata"]["uid"]
        ip = self.ips.allocate()
        self._ips[uid] = ip
        started = now_iso(self.host.clock())
        for c in _containers(pod):
            await self._image_events(pod, c)
            await self._event(pod, "Normal", "Created", f"Created container {c['name']}")
        proc = None
        if self.run_processes and _argv(_containers(pod)[0]):
            try:
                proc = await self._start_process(pod, ip)
            except (OSError, ValueError) as e:
                await self._finish(pod, 128, f"StartError: {e}", started, ip)
                return
            self._procs[uid] = proc
        await self.host.write_status(pod, self._running_status(pod, ip, started))
        for c in _containers(pod):
            await self._event(pod, "Normal", "Started", f"Started container {c['name']}")
        if proc is None:
            return
        code = await proc.wait()
        self._procs.pop(uid, None)
        if uid in self._stopping:
            return  # deletion in progress: the object goes away instead
        await self._finish(pod, code, "Completed" if code == 0 else "Error", started, ip)

    def _running_status(self, pod: Mapping[str, Any], ip: str, started: str) -> dict[str, Any]:
        status = copy.deepcopy(pod.get("status") or {})
        ts = now_iso(self.host.clock())
        conds = {c["type"]: c for c in status.get("conditions") or []}
        for ctype in ("Initialized", "Ready", "ContainersReady", "PodScheduled"):
            conds[ctype] = {"type": ctype, "status": "True", "lastTransitionTime": ts}
        status.update(
            phase="Running",
            podIP=ip,
            podIPs=[{"ip": ip}],
            hostIP="127.0.0.1",
            startTime=started,
            conditions=list(conds.values()),
            containerStatuses=[
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"sim://{c.get('image', '')}",
                    "containerID": f"sim://{pod['metadata']['uid']}/{c['name']}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started}},
                }
                for c in _containers(pod)
            ],
        )
        return status

    async def _finish(
        self, pod: Mapping[str, Any], code: int, reason: str, started: str, ip: str
    ) -> None:
        cur = self._current(pod)
        if cur is None:
            return
        status = copy.deepcopy(cur.get("status") or {})
        ts = now_iso(self.host.clock())
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status.setdefault("podIP", ip)
        status.setdefault("startTime", started)
        conds = {c["type"]: c for c in status.get("conditions") or []}
        for ctype in ("Ready", "ContainersReady"):
            conds[ctype] = {
                "type": ctype,
                "status": "False",
                "reason": "PodCompleted" if code == 0 else "PodFailed",
                "lastTransitionTime": ts,
            }
        status["conditions"] = list(conds.values())
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"sim://{c.get('image', '')}",
                "containerID": f"sim://{cur['metadata']['uid']}/{c['name']}",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": reason,
                        "startedAt": started,
                        "finishedAt": ts,
                    }
                },
            }
            for c in _containers(cur)
        ]
        await self.host.write_status(cur, status)

    async def _terminate(self, pod: Mapping[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        task = self._tasks.get(uid)
        proc = self._procs.pop(uid, None)
        grace = pod["metadata"].get("deletionGracePeriodSeconds", 30) or 0
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), max(grace, 0.1))
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if task is not None and not task.done():
            task.cancel()
        self._tasks.pop(uid, None)
        self._stopping.discard(uid)
        await self.host.finish_deletion(pod)

    async def _start_process(self, pod: Mapping[str, Any], ip: str) -> asyncio.subprocess.Process:
        c = _containers(pod)[0]
        argv = [a.replace("0.0.0.0", ip) for a in _argv(c)]
        poddir = self._workdir / pod["metadata"]["uid"]
        poddir.mkdir(parents=True, exist_ok=True)
        cwd = poddir / "home"
        cwd.mkdir(exist_ok=True)
        # The host's environment stands in for the image's (PATH, locale …), but each pod has a
        # home of its own, as a container would, so servers don't share runtime files.
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV_PREFIXES)}
        env["HOME"] = str(cwd)
        # The device plugin's variables come first: the pod's own env wins, as in a container.
        env.update(self.device_env(pod, c))
        pod_env = await self.pod_env(pod, c, ip)
        env.update({k: v.replace("0.0.0.0", ip) for k, v in pod_env.items()})
        # A local file opened once per pod start; handed to the child as its stdout.
        logf = open(self.log_path(pod), "ab")  # noqa: SIM115, ASYNC230
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=str(cwd),
                stdout=logf,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            logf.close()

    def device_env(self, pod: Mapping[str, Any], c: Mapping[str, Any]) -> dict[str, str]:
        """What NVIDIA's device plugin adds to a container holding GPUs: ``NVIDIA_VISIBLE_DEVICES``,
        their UUIDs (comma-separated); nothing for a container without GPUs."""
        md = pod["metadata"]
        node = self.devices.node_of(md["uid"])
        indices = self.devices.of_pod(md["uid"]).get(c.get("name", ""), [])
        if node is None or not indices:
            return {}
        return {"NVIDIA_VISIBLE_DEVICES": ",".join(gpu_uuid(node, i) for i in indices)}

    async def pod_env(
        self, pod: Mapping[str, Any], c: Mapping[str, Any], ip: str
    ) -> dict[str, str]:
        """The container's environment: envFrom, then env, with valueFrom resolved."""
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for src in c.get("envFrom") or []:
            prefix = src.get("prefix", "")
            for kind, plural in (("secretRef", "secrets"), ("configMapRef", "configmaps")):
                ref = src.get(kind)
                if ref:
                    obj = await self.host.lookup(plural, ns, ref.get("name", ""))
                    for k, v in ((obj or {}).get("data") or {}).items():
                        env[prefix + k] = _decode(plural, v)
        for item in c.get("env") or []:
            name = item.get("name")
            if not name:
                continue
            if "value" in item:
                env[name] = str(item["value"])
                continue
            vf = item.get("valueFrom") or {}
            if "fieldRef" in vf:
                path = vf["fieldRef"].get("fieldPath", "")
                env[name] = {
                    "status.podIP": ip,
                    "metadata.name": pod["metadata"]["name"],
                    "metadata.namespace": ns,
                    "spec.nodeName": pod["spec"].get("nodeName", ""),
                    "status.hostIP": "127.0.0.1",
                }.get(path, "")
            for kind, plural in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
                ref = vf.get(kind)
                if ref:
                    obj = await self.host.lookup(plural, ns, ref.get("name", ""))
                    data = (obj or {}).get("data") or {}
                    if ref.get("key") in data:
                        env[name] = _decode(plural, data[ref["key"]])
        return env

    async def _image_events(self, pod: dict[str, Any], container: Mapping[str, Any]) -> None:
        """v1.25's image manager: ``Always`` pulls (instantly here), otherwise the image is
        taken as present."""
        image = str(container.get("image") or "")
        if container.get("imagePullPolicy") == "Always":
            await self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
            await self._event(pod, "Normal", "Pulled", f'Successfully pulled image "{image}" in 0s')
        else:
            await self._event(
                pod, "Normal", "Pulled", f'Container image "{image}" already present on machine'
            )

    async def _event(self, pod: dict[str, Any], etype: str, reason: str, message: str) -> None:
        await self.host.record_event(pod, etype, reason, message, pod["spec"].get("nodeName", ""))


def _containers(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((pod.get("spec") or {}).get("containers") or [])


def _argv(c: Mapping[str, Any]) -> list[str]:
    """The container's command line; empty when it runs its image's default command, which the
    simulator has not (no images): such a container runs without a process, as without
    ``run_processes``, until its pod is deleted."""
    return [*(c.get("command") or []), *(c.get("args") or [])]


def _decode(plural: str, value: str) -> str:
    if plural == "secrets":
        try:
            return base64.b64decode(value).decode()
        except ValueError:
            return ""
    return str(value)
