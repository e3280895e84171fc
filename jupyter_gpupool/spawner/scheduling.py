"""Is the server's pod scheduled, or does the scheduler refuse it? Read from what KubeSpawner's
reflectors hold (pods and events as JSON dicts), without any request.

The scheduler says no in two ways, and either may come first: the pod's ``PodScheduled``
condition turns ``False`` with reason ``Unschedulable``, and a ``FailedScheduling`` event is
recorded. Both carry its words (``0/3 nodes are available: 3 Insufficient nvidia.com/gpu.``).
Every attempt creates a pod of the same name, so events are matched by the pod's uid: the
refusals of an earlier attempt's pod do not count against this one.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Scheduling:
    """Where the pod stands with the scheduler."""

    node: str | None = None  # bound to this node
    unschedulable: bool = False
    message: str = ""  # the scheduler's reason when unschedulable

    @property
    def scheduled(self) -> bool:
        return self.node is not None


def event_time(event: Mapping[str, Any]) -> datetime.datetime:
    """When ``event`` last happened, in either shape Kubernetes writes: a legacy recorder's
    (the kubelet's: ``lastTimestamp``, whole seconds) or the events API's (kube-scheduler's:
    ``eventTime`` in microseconds, ``series.lastObservedTime`` once repeated, and null
    ``lastTimestamp``); the creation time when neither is there. Unknown: the epoch."""
    series = event.get("series") or {}
    for text in (
        series.get("lastObservedTime") if isinstance(series, Mapping) else None,
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        if text:
            try:
                when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
            except ValueError:
                continue
            return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)
    return _EPOCH


_EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


def scheduling(pod: Mapping[str, Any] | None, events: Iterable[Mapping[str, Any]]) -> Scheduling:
    """The scheduling state of ``pod`` (None: not seen yet) given the events reflected."""
    if not pod:
        return Scheduling()
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return Scheduling(node=str(spec["nodeName"]))
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Scheduling()
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return Scheduling(unschedulable=True, message=str(cond.get("message") or ""))
    uid, name = meta.get("uid"), meta.get("name")
    failed = [
        e
        for e in events
        if e.get("reason") == "FailedScheduling"
        and (e.get("involvedObject") or {}).get("name") == name
        and (e.get("involvedObject") or {}).get("uid") == uid
    ]
    if failed:
        latest = max(failed, key=event_time)
        return Scheduling(unschedulable=True, message=str(latest.get("message") or ""))
    return Scheduling()


def rotate_after(pools: list[T], pool: T) -> list[T]:
    """The pool list to try after ``pool`` failed to schedule: the pools after it, then the
    ones before it and itself last (Run:ai's wrap-around). Entries are pool names or
    ``(pool, shape)`` choices alike."""
    if pool not in pools:
        return [*pools, pool] if pools else [pool]
    i = pools.index(pool)
    return pools[i + 1 :] + pools[: i + 1]
