"""Where the simulated kubelet finds its pods and reports what it does with them.

The kubelet reads and writes pods through a :class:`PodHost`: the simulator's store in this
process (:class:`StoreHost`), or a real API server (:class:`~.remote.ApiHost`), so that the
same kubelet runs the single-user servers a real control plane schedules.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ..objects.resources import RESOURCES
from ..objects.store import Store
from ..objects.watches import WatchEvent

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
