"""The Events cluster components write about a pod, in the shape each one's recorder gives them.

The simulator's store records them (:meth:`.store.Store.record_pod_event`), and so does the
kubelet on a real API server (:class:`~.remote.ApiHost`).
"""

from __future__ import annotations

import socket

from .defaults import micro_iso, now_iso
from .listwatch import Obj

#: Components that record through ``events.k8s.io/v1`` and the ``action`` of each reason.
EVENTS_API_ACTIONS: dict[str, dict[str, str]] = {
    "default-scheduler": {"Scheduled": "Binding", "FailedScheduling": "Scheduling"},
}


def pod_event(
    pod: Obj,
    etype: str,
    reason: str,
    message: str,
    component: str,
    host: str | None,
    now: float,
    stamp: int,
) -> Obj:
    """The core/v1 Event ``component`` writes about ``pod`` at ``now`` (``stamp``: nanoseconds
    naming it), in the shape of its recorder (see :meth:`.store.Store.record_pod_event`)."""
    md = pod["metadata"]
    event: Obj = {
        # "<pod>.<hex nanoseconds>", as both recorders name events
        "metadata": {"name": f"{md['name']}.{stamp:x}"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": md["namespace"],
            "name": md["name"],
            "uid": md["uid"],
            "apiVersion": "v1",
            "resourceVersion": md.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": etype,
    }
    actions = EVENTS_API_ACTIONS.get(component)
    if actions is not None:
        event |= {
            "eventTime": micro_iso(now),
            "action": actions.get(reason, reason),
            "reportingComponent": component,
            "reportingInstance": f"{component}-{socket.gethostname()}",
        }
    else:
        ts = now_iso(now)
        source = {"component": component, **({"host": host} if host else {})}
        event |= {"source": source, "firstTimestamp": ts, "lastTimestamp": ts, "count": 1}
    return event
