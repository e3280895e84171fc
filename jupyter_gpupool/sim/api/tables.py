"""Server-side printing: the ``Table`` objects kubectl asks for (``Accept: …;as=Table``).

kubectl prints what the server's table says, so ``kubectl get nodes`` shows STATUS and AGE
columns computed here the way the real API server's printers compute them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core.words.tables import age

Obj = Mapping[str, Any]


def _age(ts: str | None, now: float) -> str:
    # the API server's printers: HumanDuration since the time, "<unknown>" without one
    return age(ts, now, unknown="<unknown>")


def _col(name: str, priority: int = 0, fmt: str = "", typ: str = "string") -> dict[str, Any]:
    return {"name": name, "type": typ, "format": fmt, "description": name, "priority": priority}


def _node_row(o: Obj, now: float) -> list[Any]:
    conds = {
        c.get("type"): c.get("status") for c in (o.get("status") or {}).get("conditions") or []
    }
    status = {"True": "Ready", "False": "NotReady"}.get(conds.get("Ready", ""), "Unknown")
    if (o.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = (o.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    info = (o.get("status") or {}).get("nodeInfo") or {}
    addrs = {
        a.get("type"): a.get("address") for a in (o.get("status") or {}).get("addresses") or []
    }
    return [
        o["metadata"]["name"],
        status,
        ",".join(roles) or "<none>",
        _age(o["metadata"].get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addrs.get("InternalIP", "<none>"),
        info.get("osImage", ""),
    ]


def _pod_status(o: Obj) -> str:
    st = o.get("status") or {}
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "terminated" in state:
            return state["terminated"].get("reason") or "Terminated"
        if "waiting" in state and state["waiting"].get("reason"):
            return state["waiting"]["reason"]
    return st.get("reason") or st.get("phase") or "Unknown"


def _pod_row(o: Obj, now: float) -> list[Any]:
    st = o.get("status") or {}
    statuses = st.get("containerStatuses") or []
    total = len((o.get("spec") or {}).get("containers") or [])
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount", 0)) for cs in statuses)
    return [
        o["metadata"]["name"],
        f"{ready}/{total}",
        _pod_status(o),
        restarts,
        _age(o["metadata"].get("creationTimestamp"), now),
        st.get("podIP") or "<none>",
        (o.get("spec") or {}).get("nodeName") or "<none>",
    ]


def _event_row(o: Obj, now: float) -> list[Any]:
    io = o.get("involvedObject") or {}
    return [
        _age(o.get("lastTimestamp") or o["metadata"].get("creationTimestamp"), now),
        o.get("type", ""),
        o.get("reason", ""),
        f"{(io.get('kind') or '').lower()}/{io.get('name', '')}",
        o.get("message", ""),
    ]


def _ns_row(o: Obj, now: float) -> list[Any]:
    return [
        o["metadata"]["name"],
        (o.get("status") or {}).get("phase", ""),
        _age(o["metadata"].get("creationTimestamp"), now),
    ]


def _default_row(o: Obj, now: float) -> list[Any]:
    return [o["metadata"]["name"], _age(o["metadata"].get("creationTimestamp"), now)]


_TABLES: dict[str, tuple[list[dict[str, Any]], Callable[[Obj, float], list[Any]]]] = {
    "Node": (
        [
            _col("Name", fmt="name"),
            _col("Status"),
            _col("Roles"),
            _col("Age"),
            _col("Version"),
            _col("Internal-IP", 1),
            _col("OS-Image", 1),
        ],
        _node_row,
    ),
    "Pod": (
        [
            _col("Name", fmt="name"),
            _col("Ready"),
            _col("Status"),
            _col("Restarts", typ="integer"),
            _col("Age"),
            _col("IP", 1),
            _col("Node", 1),
        ],
        _pod_row,
    ),
    "Event": (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_row,
    ),
    "Namespace": ([_col("Name", fmt="name"), _col("Status"), _col("Age")], _ns_row),
}


def to_table(kind: str, items: Sequence[Obj], rv: str, include: str = "Metadata") -> dict[str, Any]:
    cols, row = _TABLES.get(kind, ([_col("Name", fmt="name"), _col("Age")], _default_row))
    now = time.time()
    rows = []
    for o in items:
        if include == "Object":
            obj: Any = o
        elif include == "None":
            obj = None
        else:
            obj = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata", {}),
            }
        r: dict[str, Any] = {"cells": row(o, now)}
        if obj is not None:
            r["object"] = obj
        rows.append(r)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": cols,
        "rows": rows,
    }
