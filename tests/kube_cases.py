"""Kubernetes' rules for label syntax and tolerations, as tables the core, the simulator and a real
control plane are all held to.

Where the expected answers come from:

- label keys and values: "Syntax and character set" in the Kubernetes labels concept page
  (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/): a key is an
  optional DNS-subdomain prefix (at most 253 characters) and ``/``, then a name of at most 63
  characters, alphanumeric at both ends with ``-``, ``_``, ``.`` between; a value is empty or
  the same as a name;
- tolerations: the Toleration API reference
  (https://kubernetes.io/docs/reference/kubernetes-api/definitions/toleration-v1/): an empty
  effect matches all effects, an empty key matches all keys and then requires ``Exists``,
  ``Equal`` is the default and compares values, ``Exists`` must have no value, effects are
  NoSchedule, PreferNoSchedule and NoExecute, ``tolerationSeconds`` belongs to NoExecute;
- the exact refusals (field and first words of each cause) were read from kube-apiserver v1.25
  (``../shared/realk8s``), and ``tests/sim/test_kube_rules.py`` checks them there again.
"""

from __future__ import annotations

from typing import Any

# (key, valid)
LABEL_KEYS: list[tuple[str, bool]] = [
    ("app", True),
    ("runwhere.ai/pool", True),
    ("kubernetes.io/hostname", True),
    ("MyName", True),
    ("my.name_with-all", True),
    ("a" * 63, True),
    ("a" * 64, False),  # name part longer than 63
    ("example.com/" + "a" * 63, True),
    (("a" * 63 + ".") * 3 + "a" * 61 + "/x", True),  # prefix of exactly 253
    (("a" * 63 + ".") * 3 + "a" * 62 + "/x", False),  # prefix of 254
    ("", False),
    ("/x", False),  # empty prefix
    ("x/", False),  # empty name
    ("a/b/c", False),
    ("Bad.Prefix/x", False),  # prefix must be lowercase
    ("-app", False),
    ("app-", False),
    ("has space", False),
    ("alice@example.org", False),
]

# (value, valid)
LABEL_VALUES: list[tuple[str, bool]] = [
    ("", True),
    ("A100-80G", True),
    ("v1.2_3", True),
    ("a" * 63, True),
    ("a" * 64, False),
    ("-a", False),
    ("a.", False),
    ("a b", False),
    ("alice@example.org", False),
]

# (toleration, [(field, start of message)]); no causes means the API server accepts it.
TOLERATION_CHECKS: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    ({"operator": "Exists"}, []),
    ({"key": "k"}, []),  # Equal by default, empty value
    ({"key": "k", "operator": "Equal", "value": "v"}, []),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}, []),
    (
        {"key": "k", "operator": "Gt", "value": "5"},  # alpha in later releases, refused by default
        [("operator", 'Unsupported value: "Gt": supported values: "Equal", "Exists"')],
    ),
    (
        {"key": "k", "operator": "exists"},  # operators are case-sensitive
        [("operator", 'Unsupported value: "exists"')],
    ),
    (
        {"operator": "Equal", "value": "x"},
        [("operator", 'Invalid value: "Equal": operator must be Exists when `key` is empty')],
    ),
    (
        {"value": ""},
        [("operator", 'Invalid value: "": operator must be Exists when `key` is empty')],
    ),
    (
        {"key": "k", "operator": "Exists", "value": "v"},
        [("operator", "Invalid value: ")],  # "...: value must be empty when `operator` is 'Exists'"
    ),
    ({"key": "Bad Key", "operator": "Exists"}, [("key", 'Invalid value: "Bad Key"')]),
    (
        {"key": "k", "operator": "Exists", "effect": "Sometimes"},
        [("effect", 'Unsupported value: "Sometimes"')],
    ),
    (
        {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
        [("effect", "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when")],
    ),
    ({"key": "k", "operator": "Equal", "value": "a b"}, [("operator", 'Invalid value: "a b"')]),
]

#: The taint of GPU nodes, which the matching cases are tried against.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}

# (toleration, tolerates GPU_TAINT); every toleration here is valid.
TOLERATION_MATCHES: list[tuple[dict[str, Any], bool]] = [
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),  # empty key + Exists: every taint
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),  # Equal is the default
    ({"key": "nvidia.com/gpu", "value": "other"}, False),
    ({"key": "nvidia.com/gpu"}, False),  # Equal with the empty value
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"operator": "Exists", "effect": "NoSchedule"}, True),  # every key, one effect
    ({"operator": "Exists", "effect": "PreferNoSchedule"}, False),
    ({"key": "dedicated", "operator": "Exists"}, False),
]


def pod(
    name: str,
    tolerations: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A minimal pod with these tolerations and labels."""
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    if tolerations is not None:
        body["spec"]["tolerations"] = tolerations
    return body
