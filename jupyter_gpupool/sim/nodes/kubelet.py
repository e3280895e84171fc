"""The simulated kubelet: runs the pods the scheduler bound.

By default a bound pod is marked Running with a pod IP and ready containers after
``start_delay`` seconds. With ``run_processes`` the first container's command runs as a local
process (:mod:`.podprocess`), so a real single-user server answers; the process's exit becomes the
pod's phase (Succeeded for 0, Failed otherwise). Every pod gets its own loopback address
(127.N.0.2, 127.N.0.3, … with N random per cluster, in the range ``GPUPOOL_SIM_POD_NETS`` gives:
:class:`IPAllocator`).

The kubelet gives pods their GPUs as the device manager does (:mod:`.gpudevices`), and reads and
writes pods through a :class:`~.podhost.PodHost` (:mod:`.podhost`): the simulator's store in this
process, or a real API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import ipaddress
import logging
import os
import random
import signal
from collections.abc import Mapping
from typing import Any

from ..objects.defaults import now_iso
from ..objects.store import Store
from .gpudevices import GPUDevices, store_gpu_capacity
from .partitions import Layout
from .podhost import PodHost, StoreHost
from .podprocess import PodProcesses, argv

log = logging.getLogger(__name__)


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


class Kubelet:
    def __init__(
        self,
        host: Store | PodHost,
        *,
        run_processes: bool = False,
        start_delay: float = 0.0,
        workdir: str | None = None,
        layouts: Mapping[str, Layout] | None = None,
    ):
        self.host: PodHost = StoreHost(host) if isinstance(host, Store) else host
        # On the simulator's store, a node's GPUs are its allocatable nvidia.com/gpu; on another
        # API server the kubelet does not read nodes, and hands out indices without a bound.
        # Partitioned nodes (MIG, shared GPUs, HAMi) hand out the units of their ``layouts``.
        self.devices = GPUDevices(
            store_gpu_capacity(host) if isinstance(host, Store) else None, layouts
        )
        self.run_processes = run_processes
        self.start_delay = start_delay
        self.ips = IPAllocator()
        self.processes = PodProcesses(self.host, self.devices, workdir)
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

    def read_log(self, pod: Mapping[str, Any]) -> str:
        """What the pod's process wrote ("" when it has none)."""
        return self.processes.read_log(pod)

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
        if self.run_processes and argv(first := _containers(pod)[0]):
            try:
                proc = await self.processes.start(pod, first, ip)
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
