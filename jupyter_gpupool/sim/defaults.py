"""What the simulated API server fills in on create: defaults, status, timestamps."""

from __future__ import annotations

import base64
import time
from typing import Any

from .resources import Resource

Obj = dict[str, Any]


def now_iso(ts: float | None = None) -> str:
    """A timestamp as the API server writes it (RFC 3339, seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


def apply_defaults(res: Resource, obj: Obj, rv: int, now: float) -> None:
    """Fill in what kube-apiserver defaults on create; ``rv`` is the store's current
    resourceVersion (it picks a service's cluster IP) and ``now`` the clock."""
    if res.kind == "Pod":
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("priority", 0)
        spec.setdefault("tolerations", [])
        for c in spec.get("containers", []):
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            res_ = c.setdefault("resources", {})
            # Extended resources: requests default to limits (GPUs must set limits).
            lim = res_.get("limits") or {}
            if lim:
                req = res_.setdefault("requests", {})
                for k, v in lim.items():
                    req.setdefault(k, v)
        st = obj.setdefault("status", {})
        st.setdefault("phase", "Pending")
        st.setdefault("qosClass", qos_class(spec))
    elif res.kind == "Namespace":
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
    elif res.kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        if spec.get("clusterIP") != "None":
            n = rv % 65000 + 10
            spec.setdefault("clusterIP", f"10.96.{n // 256}.{n % 256}")
        obj.setdefault("status", {"loadBalancer": {}})
    elif res.kind == "PersistentVolumeClaim":
        # Dynamic provisioning is instant in the simulation.
        spec = obj.setdefault("spec", {})
        req = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        spec.setdefault("volumeName", f"pvc-{obj['metadata']['uid']}")
        obj["status"] = {
            "phase": "Bound",
            "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
            "capacity": {"storage": req},
        }
    elif res.kind == "Secret":
        obj.setdefault("type", "Opaque")
        string_data = obj.pop("stringData", None) or {}
        data = obj.setdefault("data", {}) or {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data
    elif res.kind == "Event":
        ts = now_iso(now)
        obj.setdefault("firstTimestamp", ts)
        obj.setdefault("lastTimestamp", obj["firstTimestamp"])
        obj.setdefault("count", 1)
        obj.setdefault("type", "Normal")


def qos_class(spec: Obj) -> str:
    """``status.qosClass``: Guaranteed, Burstable or BestEffort from the containers' resources."""
    containers = spec.get("containers") or []
    any_set = False
    guaranteed = bool(containers)
    for c in containers:
        r = c.get("resources") or {}
        req, lim = r.get("requests") or {}, r.get("limits") or {}
        if req or lim:
            any_set = True
        for k in ("cpu", "memory"):
            if k not in lim or req.get(k, lim.get(k)) != lim.get(k):
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if any_set else "BestEffort"
