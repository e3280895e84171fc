"""What the simulated API server fills in on create: defaults, status, timestamps."""

from __future__ import annotations

import base64
import time
from typing import Any

from ...core.kube.quantities import canonical_quantity
from .resources import Resource

Obj = dict[str, Any]


def now_iso(ts: float | None = None) -> str:
    """A timestamp as the API server writes it (RFC 3339, seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


def canonical_quantities(res: Resource, obj: Obj) -> None:
    """Write the resource quantities of pods, nodes and claims as the API server stores them
    (``1024Gi`` becomes ``1Ti``, ``1000m`` becomes ``1``). After validation: they parse."""

    def fix(amounts: Any) -> None:
        if isinstance(amounts, dict):
            for k, v in amounts.items():
                if isinstance(v, (str, int, float)) and not isinstance(v, bool):
                    amounts[k] = canonical_quantity(v)

    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if res.kind == "Pod":
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            resources = c.get("resources") or {}
            fix(resources.get("requests"))
            fix(resources.get("limits"))
        fix(spec.get("overhead"))
    elif res.kind == "Node":
        fix(status.get("capacity"))
        fix(status.get("allocatable"))
    elif res.kind == "PersistentVolumeClaim":
        fix((spec.get("resources") or {}).get("requests"))
        fix(status.get("capacity"))


def apply_defaults(res: Resource, obj: Obj, rv: int, now: float) -> None:
    """Fill in what kube-apiserver defaults on create; ``rv`` is the store's current
    resourceVersion (it picks a service's cluster IP) and ``now`` the clock."""
    if res.kind == "Pod":
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("securityContext", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("enableServiceLinks", True)
        # The ServiceAccount admission plugin; the deprecated field mirrors the name.
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        # The Priority admission plugin (no priorityClassName: the global default, none).
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = spec.get("tolerations") or []
        if isinstance(tolerations, list):
            spec["tolerations"] = default_tolerations(tolerations)
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", pull_policy(str(c.get("image") or "")))
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
        # Nothing is defaulted; these are what the API server writes for unset fields (a null
        # time, an empty source and reporting fields), so clients find every key.
        for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
            obj.setdefault(key, None)
        obj.setdefault("source", {})
        obj.setdefault("reportingComponent", "")
        obj.setdefault("reportingInstance", "")


#: The tolerations the DefaultTolerationSeconds admission plugin adds (v1.25: 300 s).
NO_EXECUTE_DEFAULTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def default_tolerations(tolerations: list[Any]) -> list[Any]:
    """``tolerations`` and, after them, a 300 s NoExecute toleration of each of the not-ready and
    unreachable taints that none of them tolerates (an empty key or effect matches any)."""
    out = list(tolerations)
    for key in NO_EXECUTE_DEFAULTS:
        if not any(
            isinstance(t, dict)
            and t.get("key", "") in ("", key)
            and t.get("effect", "") in ("", "NoExecute")
            for t in tolerations
        ):
            out.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    return out


def pull_policy(image: str) -> str:
    """``imagePullPolicy``'s default: Always for ``:latest`` or no tag (no digest either),
    otherwise IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def micro_iso(ts: float) -> str:
    """A MicroTime as the API server writes it (``eventTime``: microseconds, UTC)."""
    whole = int(ts)
    micros = min(round((ts - whole) * 1_000_000), 999_999)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


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
