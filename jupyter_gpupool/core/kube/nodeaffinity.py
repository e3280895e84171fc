"""A pod's ``nodeSelector`` and node affinity, as the scheduler evaluates them against a node
(``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .labelselectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_IN,
    Requirement,
    SelectorError,
)

_NODE_OPERATORS = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
    "Gt": GREATER_THAN,
    "Lt": LESS_THAN,
}


def _node_requirement(expr: Any) -> Requirement:
    """A ``NodeSelectorRequirement`` as a label requirement; SelectorError when malformed."""
    if not isinstance(expr, Mapping):
        raise SelectorError("node selector requirement must be a map")
    op = _NODE_OPERATORS.get(str(expr.get("operator")))
    if op is None:
        raise SelectorError(f"operator {expr.get('operator')!r} is not supported")
    key = expr.get("key")
    values = expr.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        raise SelectorError("node selector requirement needs a string key and a list of values")
    if not all(isinstance(v, str) for v in values):
        raise SelectorError("node selector requirement values must be strings")
    return Requirement.create(key, op, values)


def _field_requirement_matches(expr: Any, name: str) -> bool:
    """A ``matchFields`` item: Kubernetes only allows ``metadata.name`` with In/NotIn and exactly
    one value. Raises SelectorError for anything else."""
    if not isinstance(expr, Mapping) or expr.get("key") != "metadata.name":
        raise SelectorError("matchFields only supports the key metadata.name")
    values = expr.get("values") or []
    if not isinstance(values, list) or len(values) != 1:
        raise SelectorError("matchFields values must have exactly one element")
    if expr.get("operator") == "In":
        return name == values[0]
    if expr.get("operator") == "NotIn":
        return name != values[0]
    raise SelectorError("matchFields only supports the operators In and NotIn")


def node_selector_term_matches(
    term: Mapping[str, Any] | None, labels: Mapping[str, str] | None, name: str
) -> bool:
    """Whether a node with ``labels`` and ``name`` satisfies one ``NodeSelectorTerm``.

    All ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt against node labels) and
    all ``matchFields`` (``metadata.name`` In/NotIn) must hold. As in the scheduler, a term with
    no requirements matches nothing, and a malformed term (unknown operator, Gt with a
    non-integer, In without values, ...) also matches nothing instead of failing.
    """
    if not term:
        return False
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list) or not (exprs or fields):
        return False
    lbls: Mapping[str, str] = labels or {}
    try:
        # Parse everything before matching so a malformed requirement anywhere in the term
        # disables the term, whatever the order of evaluation.
        reqs = [_node_requirement(e) for e in exprs]
        field_results = [_field_requirement_matches(f, name) for f in fields]
    except SelectorError:
        return False
    return all(field_results) and all(r.matches(lbls) for r in reqs)


def node_selector_matches(
    node_selector: Mapping[str, str] | None, labels: Mapping[str, str] | None
) -> bool:
    """The pod's plain ``spec.nodeSelector``: every key must be a node label with that value."""
    if not node_selector:
        return True
    lbls: Mapping[str, str] = labels or {}
    return all(k in lbls and lbls[k] == v for k, v in node_selector.items())


def _node_affinity(affinity: Mapping[str, Any] | None) -> Mapping[str, Any]:
    node_affinity = (affinity or {}).get("nodeAffinity")
    return node_affinity if isinstance(node_affinity, Mapping) else {}


def required_affinity_matches(
    affinity: Mapping[str, Any] | None, labels: Mapping[str, str] | None, name: str
) -> bool:
    """``nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``: the node must match at
    least one of its ``nodeSelectorTerms`` (the terms are ORed). No required affinity means any
    node will do; a required affinity with no terms matches no node."""
    required = _node_affinity(affinity).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list):
        return False
    return any(
        isinstance(t, Mapping) and node_selector_term_matches(t, labels, name) for t in terms
    )


def preferred_affinity_score(
    affinity: Mapping[str, Any] | None, labels: Mapping[str, str] | None, name: str
) -> int:
    """Sum of the ``weight`` of every ``preferredDuringSchedulingIgnoredDuringExecution`` item
    whose ``preference`` term matches the node (the NodeAffinity score before normalisation).
    Items with weight 0 or an empty preference never count."""
    preferred = _node_affinity(affinity).get("preferredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(preferred, list):
        return 0
    score = 0
    for item in preferred:
        if not isinstance(item, Mapping):
            continue
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight == 0:
            continue
        preference = item.get("preference")
        if isinstance(preference, Mapping) and node_selector_term_matches(preference, labels, name):
            score += weight
    return score
