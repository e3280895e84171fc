"""From an admission's pod overrides to KubeSpawner trait values, for one spawn attempt.

The service answers an admission with ``overrides`` in pod-template terms (``nodeSelector``,
``tolerations``, ``affinity``, ``labels``, ``annotations``, ``env``, ``image``, ``resources``).
KubeSpawner builds its pod from traits, and its own overrides (``profile_list``) change traits in
place, merging dicts — so a value set for one attempt would survive into the next attempt, the
next pool or the next start (GPU limits surviving a failed spawn is a known KubeSpawner
complaint). Hence every attempt computes ALL of :data:`POOL_TRAITS` anew with
:func:`pool_trait_values`, from the values configured (and a profile's overrides) plus this
admission's overrides, and sets them all.

Values from the admission are literal: KubeSpawner expands ``{username}``-style templates in
labels, annotations and environment values, so braces in them (a user name such as ``a{b}``) are
escaped here. Configured values keep their templates.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.kube.quantities import memory_bytes, parse_quantity
from ..core.usage.labels import (
    GPU_RESOURCE,
    POD_ADMISSION,
    POD_GPUS,
    POD_OVER_QUOTA,
    POD_POOL,
    POD_RUNWHERE_POOL,
    POD_SERVER,
    POD_USER,
    safe_label_value,
)

#: gpuctl's job kind label on pods: ``gpuctl get jobs`` shows it as KIND, and its values are
#: ``training``, ``inference``, ``notebook`` and ``compute`` (gpuctl's architecture docs, "Label
#: System"). Every server pod is a notebook.
JOB_TYPE_LABEL = "runwhere.ai/job-type"
NOTEBOOK_JOB_TYPE = "notebook"

#: Every KubeSpawner trait an admission may change; each attempt sets all of them.
POOL_TRAITS = (
    "node_selector",
    "tolerations",
    "node_affinity_required",
    "node_affinity_preferred",
    "extra_labels",
    "extra_annotations",
    "environment",
    "image",
    "cpu_guarantee",
    "cpu_limit",
    "mem_guarantee",
    "mem_limit",
    "extra_resource_guarantees",
    "extra_resource_limits",
)


def escape_template(value: Any) -> Any:
    """``value`` with ``{`` and ``}`` doubled in every string, so KubeSpawner's ``str.format``
    expansion gives it back unchanged."""
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, Mapping):
        return {k: escape_template(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escape_template(v) for v in value]
    return value


def as_list(value: Any) -> list[Any]:
    """A KubeSpawner list-or-dict trait (``tolerations``, affinities) as a list: a dict's values
    sorted by key, as KubeSpawner itself orders them."""
    if not value:
        return []
    if isinstance(value, Mapping):
        return [copy.deepcopy(value[k]) for k in sorted(value)]
    return [copy.deepcopy(v) for v in value]


def _and_terms(base: list[Any], ours: list[Any]) -> list[Any]:
    """Required node selector terms are ORed, their expressions ANDed: the pool's requirement
    must hold in every configured term, so ours are added to each (all pairs when both have
    several)."""
    if not ours:
        return base
    if not base:
        return [copy.deepcopy(t) for t in ours]
    out = []
    for b in base:
        for o in ours:
            term = copy.deepcopy(dict(b))
            for key in ("matchExpressions", "matchFields"):
                if o.get(key):
                    term[key] = list(term.get(key) or []) + copy.deepcopy(list(o[key]))
            out.append(term)
    return out


def _without_gpus(resources: Mapping[str, Any] | None) -> dict[str, Any]:
    # GPUs are gpupool's to give: whatever is configured, a server gets what it was admitted.
    return {k: v for k, v in (resources or {}).items() if k != GPU_RESOURCE}


def _split_resources(
    values: Mapping[str, Any], extra: Mapping[str, Any]
) -> tuple[float | None, int | None, dict[str, Any]]:
    """``(cpu cores, memory bytes, other resources)``; cpu and memory go to KubeSpawner's own
    traits so that the server's ``CPU_GUARANTEE``/``MEM_LIMIT``... variables say the same."""
    cpu = mem = None
    other = dict(extra)
    for name, quantity in values.items():
        if name == "cpu":
            cpu = float(parse_quantity(quantity))
        elif name == "memory":
            mem = memory_bytes(quantity)
        else:
            other[name] = str(quantity)
    return cpu, mem, other


def _environment(base: Mapping[str, Any], env: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out = dict(base)
    for var in env:
        name = var["name"]
        if "valueFrom" in var:
            out[name] = {"name": name, "valueFrom": escape_template(var["valueFrom"])}
        else:
            out[name] = escape_template(str(var.get("value", "")))
    return out


def pool_trait_values(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Values for every trait of :data:`POOL_TRAITS`: ``base`` (what is configured, profile
    included) with an admission's ``overrides`` applied. Inputs are not modified."""
    o = overrides
    out = {name: copy.deepcopy(base.get(name)) for name in POOL_TRAITS}
    out["node_selector"] = {**(base.get("node_selector") or {}), **(o.get("nodeSelector") or {})}
    tolerations = as_list(base.get("tolerations"))
    tolerations += [copy.deepcopy(t) for t in o.get("tolerations") or () if t not in tolerations]
    out["tolerations"] = tolerations

    node_affinity = (o.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    out["node_affinity_required"] = _and_terms(
        as_list(base.get("node_affinity_required")), list(required.get("nodeSelectorTerms") or [])
    )
    out["node_affinity_preferred"] = as_list(base.get("node_affinity_preferred")) + copy.deepcopy(
        list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    )

    out["extra_labels"] = {
        **(base.get("extra_labels") or {}),
        **escape_template(dict(o.get("labels") or {})),
    }
    out["extra_annotations"] = {
        **(base.get("extra_annotations") or {}),
        **escape_template(dict(o.get("annotations") or {})),
    }
    out["environment"] = _environment(base.get("environment") or {}, o.get("env") or ())
    if o.get("image"):
        out["image"] = o["image"]

    resources = o.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    cpu, mem, out["extra_resource_guarantees"] = _split_resources(
        requests, _without_gpus(base.get("extra_resource_guarantees"))
    )
    if cpu is not None:
        out["cpu_guarantee"] = cpu
    if mem is not None:
        out["mem_guarantee"] = mem
    cpu, mem, out["extra_resource_limits"] = _split_resources(
        limits, _without_gpus(base.get("extra_resource_limits"))
    )
    if cpu is not None:
        out["cpu_limit"] = cpu
    if mem is not None:
        out["mem_limit"] = mem
    return out


def admission_labels(admission: Mapping[str, Any]) -> dict[str, str]:
    """The pod labels an admission stands for, from the answer's own fields.

    The service already puts them in ``overrides.labels`` (with the charged subject and the
    platform); these are laid underneath, so a pod always says its pool, user, server, GPU
    count, over-quota and admission id, and gpuctl's ``runwhere.ai/pool`` sees it in its pool.
    """
    labels = {
        POD_POOL: str(admission.get("pool") or ""),
        POD_RUNWHERE_POOL: str(admission.get("pool") or ""),
        POD_USER: safe_label_value(str(admission.get("user") or "")),
        POD_SERVER: safe_label_value(str(admission.get("server") or "")),
        POD_GPUS: str(int(admission.get("gpus") or 0)),
        POD_OVER_QUOTA: "true" if admission.get("over_quota") else "false",
        POD_ADMISSION: str(admission.get("id") or ""),
    }
    return {k: v for k, v in labels.items() if v or k == POD_SERVER}


def admission_overrides(admission: Mapping[str, Any]) -> dict[str, Any]:
    """The admission's ``overrides`` with :func:`admission_labels` underneath its labels."""
    overrides = dict(admission.get("overrides") or {})
    overrides["labels"] = {**admission_labels(admission), **(overrides.get("labels") or {})}
    return overrides


def with_job_type(labels: Mapping[str, Any]) -> dict[str, Any]:
    """``labels`` with gpuctl's job kind underneath (``notebook``): the admin's ``extra_labels``
    and the pool's template may still say otherwise."""
    return {JOB_TYPE_LABEL: NOTEBOOK_JOB_TYPE, **labels}
