"""Label keys, label values and DNS-1123 names, as ``k8s.io/apimachinery/pkg/util/validation``.

The API server rejects an object whose labels break these rules (422 Invalid) and a selector
that names such a key (400), so the pool documents, the CLI and the service check with the same
functions before they write anything, and the simulator answers with them.
"""

from __future__ import annotations

import re

#: The name part of a qualified name, and a non-empty label value.
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)

NAME_MAX = 63
SUBDOMAIN_MAX = 253


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``), or None when it is one.

    The prefix must be a DNS-1123 subdomain (at most 253 characters), the name at most 63
    alphanumerics, ``-``, ``_`` or ``.`` with an alphanumeric at both ends (``IsQualifiedName``).
    """
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"prefix part of key {key!r} must be non-empty"
        if len(prefix) > SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.match(prefix):
            return (
                f"prefix part of key {key!r} must be a DNS-1123 subdomain "
                "(lowercase alphanumerics, '-' and '.', at most 253 characters)"
            )
    if not name:
        return f"name part of key {key!r} must be non-empty"
    if len(name) > NAME_MAX:
        return f"name part of key {key!r} must be no more than 63 characters"
    if not _NAME.match(name):
        return (
            f"name part of key {key!r} must consist of alphanumerics, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a label value, or None when it is one (``""`` is one)."""
    if value == "":
        return None
    if len(value) > NAME_MAX:
        return f"label value {value!r} must be no more than 63 characters"
    if not _NAME.match(value):
        return (
            f"label value {value!r} must consist of alphanumerics, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def is_label_key(key: str) -> bool:
    """True for ``name`` or ``prefix/name`` with a DNS-subdomain prefix, as Kubernetes checks."""
    return label_key_problem(key) is None


def is_label_value(value: str) -> bool:
    """True when ``value`` may be used as a Kubernetes label value (``""`` included)."""
    return label_value_problem(value) is None


def is_dns1123_label(name: str) -> bool:
    """True for a DNS-1123 label: the syntax of namespace, service and container names."""
    return len(name) <= NAME_MAX and bool(_DNS1123_LABEL.match(name))


def is_dns1123_subdomain(name: str) -> bool:
    """True for a DNS-1123 subdomain: the syntax of node, pod and most other object names."""
    return 0 < len(name) <= SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN.match(name))


def is_node_name(name: str) -> bool:
    """True for a DNS-1123 subdomain, the syntax of node names."""
    return is_dns1123_subdomain(name)
