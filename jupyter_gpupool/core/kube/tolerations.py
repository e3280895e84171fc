"""Tolerations: which ones the API server accepts, and which taints they tolerate.

Validation follows ``ValidateTolerations`` (``k8s.io/kubernetes/pkg/apis/core/validation``), so
a toleration the product would write, or a pod the simulator is asked to create, is refused for
the same reasons and in the same words as on a real cluster (checked against kube-apiserver
v1.25; the ``Lt``/``Gt`` operators of later releases sit behind an alpha feature gate and are
refused here as there).

Matching follows ``Toleration.ToleratesTaint``: an empty ``effect`` matches every effect, an
empty ``key`` every key (validation only allows that with ``Exists``), ``Equal`` (the default)
compares values, ``Exists`` ignores them, and an operator validation would refuse tolerates
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .names import label_key_problem, label_value_problem

OPERATORS = ("Equal", "Exists")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_LABEL_VALUE_HELP = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', "
    " or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _supported(values: Iterable[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def toleration_problems(toleration: Any, path: str) -> list[tuple[str, str]]:
    """``(field, message)`` for everything kube-apiserver refuses in one toleration.

    ``path`` is the toleration's field path, e.g. ``spec.tolerations[0]``; the messages are the
    API server's (``Unsupported value: ...``, ``Invalid value: ...``).
    """
    if not isinstance(toleration, Mapping):
        return [(path, "Invalid value: must be an object")]
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or ""
    value = toleration.get("value") or ""
    effect = toleration.get("effect") or ""
    out: list[tuple[str, str]] = []
    if not all(isinstance(x, str) for x in (key, operator, value, effect)):
        return [(path, "Invalid value: key, operator, value and effect must be strings")]
    key_problem = label_key_problem(key) if key else None
    if key_problem:
        out.append((f"{path}.key", f'Invalid value: "{key}": {key_problem}'))
    if not key and operator != "Exists":
        out.append(
            (
                f"{path}.operator",
                f'Invalid value: "{operator}": operator must be Exists when `key` is empty, '
                'which means "match all values and all keys"',
            )
        )
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        out.append(
            (
                f"{path}.effect",
                f"Invalid value: \"{effect}\": effect must be 'NoExecute' when "
                "`tolerationSeconds` is set",
            )
        )
    if operator in ("", "Equal"):
        if label_value_problem(value):
            out.append((f"{path}.operator", f'Invalid value: "{value}": {_LABEL_VALUE_HELP}'))
    elif operator == "Exists":
        if value:
            out.append(
                (
                    f"{path}.operator",
                    f"Invalid value: \"{value}\": value must be empty when `operator` is 'Exists'",
                )
            )
    else:
        out.append(
            (
                f"{path}.operator",
                f'Unsupported value: "{operator}": supported values: {_supported(OPERATORS)}',
            )
        )
    if effect and effect not in EFFECTS:
        out.append(
            (
                f"{path}.effect",
                f'Unsupported value: "{effect}": supported values: {_supported(EFFECTS)}',
            )
        )
    return out


def tolerations_problems(tolerations: Any, path: str = "spec.tolerations") -> list[tuple[str, str]]:
    """:func:`toleration_problems` for every item of a pod's ``tolerations`` list."""
    if tolerations is None:
        return []
    if not isinstance(tolerations, list):
        return [(path, "Invalid value: must be a list")]
    out: list[tuple[str, str]] = []
    for i, t in enumerate(tolerations):
        out.extend(toleration_problems(t, f"{path}[{i}]"))
    return out


def toleration_matches(toleration: Mapping[str, Any], key: str, value: str, effect: str) -> bool:
    """``Toleration.ToleratesTaint`` for the taint ``key=value:effect``."""
    t_effect = toleration.get("effect") or ""
    if t_effect and t_effect != effect:
        return False
    t_key = toleration.get("key") or ""
    if t_key and t_key != key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == value
    return False


def tolerates(
    tolerations: Iterable[Mapping[str, Any]] | None, key: str, value: str, effect: str
) -> bool:
    """Whether any of ``tolerations`` tolerates the taint ``key=value:effect``."""
    return any(
        isinstance(t, Mapping) and toleration_matches(t, key, value, effect)
        for t in tolerations or ()
    )


def tolerates_taint(
    tolerations: Iterable[Mapping[str, Any]] | None, taint: Mapping[str, Any]
) -> bool:
    """:func:`tolerates` for a taint as the API writes it (``{key, value, effect}``)."""
    return tolerates(
        tolerations, taint.get("key") or "", taint.get("value") or "", taint.get("effect") or ""
    )
