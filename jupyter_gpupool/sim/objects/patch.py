"""The three PATCH content types of the Kubernetes API, applied to plain JSON-like objects.

* ``application/merge-patch+json`` — RFC 7386 JSON merge patch;
* ``application/json-patch+json`` — RFC 6902 JSON patch (delegated to the ``jsonpatch`` library);
* ``application/strategic-merge-patch+json`` — Kubernetes strategic merge patch (what
  ``kubectl patch`` sends by default and what the Python clients send for dict bodies).

Every function returns a new object and never mutates (or aliases) its inputs, so the caller can
keep the stored object if the patch fails.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

import jsonpatch

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "SUPPORTED_PATCH_TYPES",
    "PatchError",
    "UnsupportedPatchType",
    "apply_patch",
    "json_patch",
    "list_strategy",
    "merge_patch",
    "strategic_merge_patch",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
SUPPORTED_PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


class PatchError(ValueError):
    """A patch that cannot be applied (malformed, failed ``test`` op, bad directive, ...)."""


class UnsupportedPatchType(PatchError):
    """The request's Content-Type is not a patch type the server accepts (HTTP 415)."""


# --------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch
# --------------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch.

    Objects merge recursively, a ``null`` value deletes the key, and anything that is not an
    object (lists included) replaces the target value wholesale. A patch that is not an object
    replaces the whole target.
    """
    return _merge(copy.deepcopy(target), patch)


def _merge(target: Any, patch: Any) -> Any:
    # ``target`` is already a private copy; ``patch`` is only ever read and copied from.
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# --------------------------------------------------------------------------------------------
# RFC 6902 JSON patch
# --------------------------------------------------------------------------------------------


def json_patch(target: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of ``add``/``remove``/``replace``/``move``/``copy``/
    ``test`` operations) using the ``jsonpatch`` library.

    Every failure, including a malformed operation list and a failed ``test``, becomes a
    PatchError carrying the library's message.
    """
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    for i, op in enumerate(ops):
        if not isinstance(op, Mapping):
            raise PatchError(f"JSON patch operation {i} is not an object: {op!r}")
    try:
        # The library inserts operation values into the result as they are; copying the ops
        # keeps the result from aliasing the caller's patch body.
        patch = jsonpatch.JsonPatch(copy.deepcopy(ops))
        return patch.apply(target, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
        raise PatchError(str(e)) from None
    except (TypeError, KeyError, IndexError, AttributeError, ValueError) as e:
        # The library lets a few of these escape for odd documents (e.g. a "path" into a string).
        raise PatchError(f"invalid JSON patch: {e}") from None


# --------------------------------------------------------------------------------------------
# Strategic merge patch
# --------------------------------------------------------------------------------------------

# How a list at a given path is patched. A merge key name means "merge items that have the same
# value for this key"; PRIMITIVE_SET merges a list of scalars as a set; ATOMIC (and any path not
# in the table) replaces the list wholesale. These mirror the ``patchStrategy``/``patchMergeKey``
# struct tags of k8s.io/api/core/v1. ATOMIC entries are redundant but spell out the lists users
# are most often surprised by.
PRIMITIVE_SET: Final = "<primitive set>"
ATOMIC: Final = "<atomic>"

_OBJECT_META = {
    "metadata.ownerReferences": "uid",
    "metadata.finalizers": PRIMITIVE_SET,
}

_CONTAINER_LISTS = {
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "envFrom": ATOMIC,
}

_POD = {
    **_OBJECT_META,
    "spec.containers": "name",
    "spec.initContainers": "name",
    "spec.ephemeralContainers": "name",
    **{
        f"spec.{containers}[*].{field}": strategy
        for containers in ("containers", "initContainers", "ephemeralContainers")
        for field, strategy in _CONTAINER_LISTS.items()
    },
    "spec.volumes": "name",
    "spec.imagePullSecrets": "name",
    "spec.hostAliases": "ip",
    "spec.topologySpreadConstraints": "topologyKey",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    "spec.tolerations": ATOMIC,
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
    "status.containerStatuses": ATOMIC,
    "status.initContainerStatuses": ATOMIC,
    "status.ephemeralContainerStatuses": ATOMIC,
}

_NODE = {
    **_OBJECT_META,
    "spec.podCIDRs": PRIMITIVE_SET,
    "spec.taints": ATOMIC,
    "status.conditions": "type",
    "status.addresses": "type",
    "status.images": ATOMIC,
}

_STRATEGIES_BY_PATH: dict[str, dict[str, str]] = {
    "Pod": _POD,
    "Node": _NODE,
    "Namespace": {**_OBJECT_META, "status.conditions": "type"},
    "Service": {**_OBJECT_META, "spec.ports": "port", "status.conditions": "type"},
    "ConfigMap": dict(_OBJECT_META),
    "Secret": dict(_OBJECT_META),
    "PersistentVolumeClaim": {**_OBJECT_META, "status.conditions": "type"},
    "Event": dict(_OBJECT_META),
}

Path = tuple[str, ...]  # map keys, with "*" standing for "an item of the list"


def _split_path(pattern: str) -> Path:
    """``"spec.containers[*].env"`` -> ``("spec", "containers", "*", "env")``."""
    return tuple(pattern.replace("[*]", ".*").split("."))


def _show_path(path: Path) -> str:
    return ".".join(path).replace(".*", "[*]") or "<root>"


_STRATEGIES: dict[str, dict[Path, str]] = {
    kind: {_split_path(p): s for p, s in table.items()}
    for kind, table in _STRATEGIES_BY_PATH.items()
}


def list_strategy(kind: str, path: str) -> str:
    """The strategic-merge strategy of the list at ``path`` (e.g. ``"spec.containers[*].env"``)
    in ``kind``: its merge key, ``PRIMITIVE_SET`` or ``ATOMIC``. Unknown kinds and paths are
    ``ATOMIC``."""
    return _STRATEGIES.get(kind, {}).get(_split_path(path), ATOMIC)


_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
_SET_ELEMENT_ORDER = "$setElementOrder/"


class _Deleted:
    """Returned instead of a map when the patch said ``$patch: delete`` for it."""


_DELETED: Final = _Deleted()
_NOT_AN_OBJECT: Final = object()  # identity of a non-object item in a list merged by key


def strategic_merge_patch(target: Any, patch: Any, kind: str) -> Any:
    """Apply a Kubernetes strategic merge patch to an object of ``kind``.

    Maps merge recursively and ``null`` deletes a key. A list is replaced by the patch's list
    unless its path has a merge strategy (see ``list_strategy``): lists of objects then merge
    item by item on the merge key (matching items merge recursively, new items are appended in
    patch order) and lists of scalars merge as a set. Supported directives:

    * ``$patch: replace`` in a map replaces the whole map; as a list item it makes the list the
      other items of the patch list;
    * ``$patch: delete`` in a map deletes that map; as a list item (with the merge key) it
      deletes the matching item;
    * ``$deleteFromPrimitiveList/<field>: [...]`` removes those values from a scalar list;
    * ``$setElementOrder/<field>: [...]`` orders the merged list (listed items in that order,
      others keep their relative positions, as in Kubernetes);
    * ``$retainKeys: [...]`` drops every key of the target map that is not listed.

    Directives never survive into the result. Kinds without a table only merge maps.
    """
    if not isinstance(patch, Mapping):
        raise PatchError("a strategic merge patch must be a JSON object")
    table = _STRATEGIES.get(kind, {})
    original = copy.deepcopy(target) if isinstance(target, dict) else {}
    result = _smp_map(original, copy.deepcopy(dict(patch)), (), table)
    return {} if result is _DELETED else result


def _smp_value(patch: Any, path: Path, table: Mapping[Path, str]) -> Any:
    """A patch value that has nothing to merge with: process it against an empty value so that
    nulls and directives inside it do not leak into the object (Kubernetes discards them too)."""
    if isinstance(patch, dict):
        return _smp_map({}, patch, path, table)
    if isinstance(patch, list):
        return _smp_list([], patch, path, table)
    return patch


def _smp_map(
    original: dict[str, Any], patch: dict[str, Any], path: Path, table: Mapping[Path, str]
) -> dict[str, Any] | _Deleted:
    # Both arguments are private copies, so they are updated in place.
    if _DIRECTIVE in patch:
        directive = patch.pop(_DIRECTIVE)
        if directive == "replace":
            return _smp_map({}, patch, path, table)
        if directive == "delete":
            return _DELETED
        raise PatchError(
            f"{_show_path(path)}: invalid $patch directive {directive!r} in a map "
            "(expected 'replace' or 'delete')"
        )

    if _RETAIN_KEYS in patch:
        _retain_keys(original, patch, path)

    orders: dict[str, Any] = {}
    for key in [k for k in patch if k.startswith("$")]:
        value = patch.pop(key)
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = key[len(_DELETE_FROM_PRIMITIVE_LIST) :]
            if not isinstance(value, list):
                raise PatchError(f"{_show_path(path)}: {key} must be a list")
            # Deletions are applied before the field's own patch (which can only add).
            if isinstance(original.get(field), list):
                original[field] = [item for item in original[field] if item not in value]
        elif key.startswith(_SET_ELEMENT_ORDER):
            if not isinstance(value, list):
                raise PatchError(f"{_show_path(path)}: {key} must be a list")
            orders[key[len(_SET_ELEMENT_ORDER) :]] = value
        else:
            raise PatchError(f"{_show_path(path)}: unknown strategic merge patch directive {key!r}")

    before = {field: original.get(field) for field in orders}
    for key, value in patch.items():
        sub = (*path, key)
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        merged: Any
        if isinstance(current, dict) and isinstance(value, dict):
            merged = _smp_map(current, value, sub, table)
        elif isinstance(current, list) and isinstance(value, list):
            merged = _smp_list(current, value, sub, table)
        else:
            # Absent, or a different JSON type: the patch value wins.
            merged = _smp_value(value, sub, table)
        if merged is _DELETED:
            original.pop(key, None)
        else:
            original[key] = merged

    for field, order in orders.items():
        strategy = table.get((*path, field), ATOMIC)
        if strategy != ATOMIC and isinstance(original.get(field), list):
            prior_value = before[field]
            prior = prior_value if isinstance(prior_value, list) else []
            merge_key = None if strategy == PRIMITIVE_SET else strategy
            original[field] = _apply_element_order(original[field], order, prior, merge_key)
    return original


def _retain_keys(original: dict[str, Any], patch: dict[str, Any], path: Path) -> None:
    """``$retainKeys``: keep only the listed keys of the original map. As in Kubernetes, every
    key the patch sets must be listed too."""
    keep = patch.pop(_RETAIN_KEYS)
    if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
        raise PatchError(f"{_show_path(path)}: $retainKeys must be a list of field names")
    for key, value in patch.items():
        if value is None or key.startswith("$"):
            continue
        if key not in keep:
            raise PatchError(
                f"{_show_path(path)}: $retainKeys does not list {key!r}, which the patch sets"
            )
    for key in [k for k in original if k not in keep]:
        del original[key]


def _smp_list(
    original: list[Any], patch: list[Any], path: Path, table: Mapping[Path, str]
) -> list[Any]:
    strategy = table.get(path, ATOMIC)
    item_path = (*path, "*")
    replace = False
    items: list[Any] = []
    for item in patch:
        if isinstance(item, dict) and _DIRECTIVE in item:
            directive = item[_DIRECTIVE]
            if directive == "replace":
                replace = True
            elif directive != "delete":
                raise PatchError(
                    f"{_show_path(path)}: invalid $patch directive {directive!r} in a list item "
                    "(expected 'replace' or 'delete')"
                )
            elif strategy not in (ATOMIC, PRIMITIVE_SET):
                if strategy not in item:
                    raise PatchError(
                        f"{_show_path(path)}: $patch: delete item {item!r} lacks the merge key "
                        f"{strategy!r}"
                    )
                original = [
                    o
                    for o in original
                    if not (isinstance(o, dict) and o.get(strategy) == item[strategy])
                ]
            # In an atomic list a delete directive has nothing to delete; it is just dropped.
        else:
            items.append(item)

    if strategy == ATOMIC:
        return [_smp_value(item, item_path, table) for item in items]

    base = [] if replace else list(original)
    if strategy == PRIMITIVE_SET:
        for item in items:
            if item not in base:
                base.append(item)
        return base

    merge_key = strategy
    for item in items:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(
                f"{_show_path(path)}: item {item!r} does not contain the merge key {merge_key!r}"
            )
        index = next(
            (
                i
                for i, o in enumerate(base)
                if isinstance(o, dict) and o.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if index is None:
            new = _smp_map({}, item, item_path, table)
            if new is not _DELETED:
                base.append(new)
        else:
            merged = _smp_map(base[index], item, item_path, table)
            if merged is _DELETED:
                del base[index]
            else:
                base[index] = merged
    return base


def _apply_element_order(
    merged: list[Any], order: list[Any], prior: list[Any], merge_key: str | None
) -> list[Any]:
    """``$setElementOrder``: items named in ``order`` come in that order; the other items keep
    their relative order and are interleaved where they sat in the ``prior`` (pre-patch) list,
    following ``mergeSortedSlice`` in k8s.io/apimachinery/pkg/util/strategicpatch."""

    def ident(item: Any) -> Any:
        if merge_key is None:
            return item
        return item.get(merge_key) if isinstance(item, dict) else _NOT_AN_OBJECT

    wanted = [ident(o) for o in order]
    listed = sorted(
        (item for item in merged if ident(item) in wanted), key=lambda i: wanted.index(ident(i))
    )
    others = [item for item in merged if ident(item) not in wanted]
    prior_ids = [ident(p) for p in prior]

    def prior_index(item: Any) -> int:
        return prior_ids.index(ident(item)) if ident(item) in prior_ids else -1

    out: list[Any] = []
    i = j = 0
    while i < len(others) or j < len(listed):
        if j >= len(listed):
            out.append(others[i])
            i += 1
        elif i >= len(others):
            out.append(listed[j])
            j += 1
        else:
            left, right = prior_index(others[i]), prior_index(listed[j])
            if left >= 0 and right >= 0 and left < right:
                out.append(others[i])
                i += 1
            else:
                out.append(listed[j])
                j += 1
    return out


# --------------------------------------------------------------------------------------------
# Dispatch on Content-Type
# --------------------------------------------------------------------------------------------


def apply_patch(target: Any, body: Any, content_type: str, kind: str) -> Any:
    """Apply an already-parsed PATCH ``body`` according to its ``content_type``.

    Parameters such as ``; charset=utf-8`` are ignored. Any other media type (including
    server-side apply's ``application/apply-patch+yaml``) raises UnsupportedPatchType, a
    PatchError whose message starts with "unsupported media type" for a 415 response.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == MERGE_PATCH:
        return merge_patch(target, body)
    if media_type == JSON_PATCH:
        return json_patch(target, body)
    if media_type == STRATEGIC_MERGE_PATCH:
        return strategic_merge_patch(target, body, kind)
    raise UnsupportedPatchType(
        f"unsupported media type {content_type!r}: the body of the request was in an unknown "
        f"format - accepted media types include: {', '.join(SUPPORTED_PATCH_TYPES)}"
    )
