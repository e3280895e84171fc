"""What the simulated API server refuses: 422 Invalid, with the API server's causes.

Names, label keys and values and tolerations are checked with the core's Kubernetes rules
(:mod:`jupyter_gpupool.core.kube`), so the simulator refuses exactly what the product's own
checks and a real cluster refuse.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.kube.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    label_key_problem,
)
from ...core.kube.quantities import parse_quantity
from ...core.kube.tolerations import tolerations_problems
from .errors import invalid
from .resources import Resource

Obj = dict[str, Any]

_EVENT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# Pod spec fields an update may change (everything else is immutable, as in Kubernetes).
_POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "schedulingGates")


def validate(res: Resource, obj: Obj) -> None:
    """Raise 422 Invalid for what kube-apiserver's validation refuses in ``obj`` (as far as
    the simulator models it: names, labels, annotations, and pods' containers, resources and
    tolerations)."""
    md = obj.get("metadata") or {}
    name = md.get("name", "")
    causes: list[tuple[str, str]] = []
    if res.kind == "Event":
        # Event names are "<pod>.<hex>": subdomain characters, dots anywhere.
        bad_name = not _EVENT_NAME.match(name) or len(name) > 253
    else:
        bad_name = not (is_dns1123_label if res.label_names else is_dns1123_subdomain)(name)
    if bad_name:
        causes.append(
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 '
                f"{'label' if res.label_names else 'subdomain'} must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        )
    for key, value in (md.get("labels") or {}).items():
        problem = label_key_problem(key)
        if problem:
            causes.append(("metadata.labels", f'Invalid value: "{key}": {problem}'))
        if not isinstance(value, str) or not is_label_value(value):
            causes.append(
                (
                    "metadata.labels",
                    f'Invalid value: "{value}": a valid label must be an empty string or '
                    "consist of alphanumeric characters, '-', '_' or '.', and must start and "
                    "end with an alphanumeric character (at most 63 characters)",
                )
            )
    for key, value in (md.get("annotations") or {}).items():
        if not isinstance(value, str):
            causes.append((f"metadata.annotations.{key}", "Invalid value: must be a string"))
    if res.kind == "Pod":
        causes.extend(pod_causes(obj))
    if causes:
        raise invalid(res, name, causes)


def pod_causes(pod: Obj) -> list[tuple[str, str]]:
    causes: list[tuple[str, str]] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [("spec.containers", "Required value")]
    names = set()
    for i, c in enumerate(containers):
        path = f"spec.containers[{i}]"
        if not isinstance(c, dict):
            causes.append((path, "Invalid value: must be an object"))
            continue
        cname = c.get("name")
        if not cname:
            causes.append((f"{path}.name", "Required value"))
        elif not is_dns1123_label(str(cname)):
            causes.append((f"{path}.name", f'Invalid value: "{cname}": must be a DNS-1123 label'))
        elif cname in names:
            causes.append((f"{path}.name", f'Duplicate value: "{cname}"'))
        names.add(cname)
        if not c.get("image"):
            causes.append((f"{path}.image", "Required value"))
        for kind in ("requests", "limits"):
            for rname, q in ((c.get("resources") or {}).get(kind) or {}).items():
                try:
                    if parse_quantity(q) < 0:
                        raise ValueError
                except (ValueError, TypeError):
                    causes.append(
                        (
                            f"{path}.resources.{kind}[{rname}]",
                            f'Invalid value: "{q}": must be a quantity',
                        )
                    )
                    continue
                if rname == "nvidia.com/gpu" and parse_quantity(q) != int(parse_quantity(q)):
                    causes.append(
                        (
                            f"{path}.resources.{kind}[{rname}]",
                            f'Invalid value: "{q}": must be an integer',
                        )
                    )
        lim = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        req = ((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu")
        if req is not None and lim is None:
            causes.append(
                (
                    f"{path}.resources.limits",
                    "Required value: Limit must be set for non overcommitable resources",
                )
            )
        elif req is not None and lim is not None and str(req) != str(lim):
            causes.append(
                (
                    f"{path}.resources.requests",
                    f'Invalid value: "{req}": must be equal to nvidia.com/gpu limit of {lim}',
                )
            )
    causes.extend(tolerations_problems(spec.get("tolerations")))
    return causes


def check_pod_update(res: Resource, old: Obj, new: Obj) -> None:
    """Refuse a pod update that changes an immutable field, as kube-apiserver does."""

    def strip(spec: Obj) -> Obj:
        s = {k: v for k, v in (spec or {}).items() if k not in _POD_MUTABLE_SPEC}
        s["containers"] = [
            {k: v for k, v in c.items() if k != "image"} for c in s.get("containers") or []
        ]
        return s

    if strip(old.get("spec", {})) != strip(new.get("spec", {})):
        raise invalid(
            res,
            old["metadata"]["name"],
            [
                (
                    "spec",
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                    "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                    "tolerations) or `spec.schedulingGates`",
                )
            ],
        )
    old_node = old.get("spec", {}).get("nodeName")
    if old_node and new.get("spec", {}).get("nodeName") != old_node:
        raise invalid(
            res, old["metadata"]["name"], [("spec.nodeName", "Forbidden: field is immutable")]
        )
