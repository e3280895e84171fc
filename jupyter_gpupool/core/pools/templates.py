"""Merging pod templates: pool template, then platform template, then what admission adds.

Admins write partial pod settings at several levels (as OSMO's pod templates), and a server gets
their merge, later layers winning:

- mappings merge key by key, recursively (``nodeSelector``, ``labels``, ``resources.limits``);
- lists whose items are all mappings with a ``name`` (``env``) merge by name: an item of a later
  layer replaces the earlier item of that name in place, new names are appended;
- other lists (``tolerations``) are concatenated, leaving out items equal to one already there;
- anything else is replaced; ``None`` in a later layer removes the key.

Replacing a named item whole (instead of merging its fields) is deliberate: merging
``{name: X, value: 1}`` with ``{name: X, valueFrom: ...}`` would give an env var with both.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def merge_templates(
    *layers: Mapping[str, Any] | None, owned: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Merge ``layers`` in order, later wins; inputs are never modified or aliased. ``owned``:
    a last layer the caller built for this merge alone and gives up (an admission's own
    terms), whose values are taken as they are rather than copied (the copies were a third of
    building a pod's overrides)."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            _merge_into(out, layer, _copy)
    if owned:
        _merge_into(out, owned, _taken)
    return out


_ATOMS = (str, int, float, bool, type(None))


def _copy(value: Any) -> Any:
    """``copy.deepcopy`` for the JSON-like values templates are made of, without its memo and
    dispatch (a deep copy per leaf of a pod's overrides was a twentieth of an admission)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return copy.deepcopy(value)


def _taken(value: Any) -> Any:
    """A value of an ``owned`` layer: nobody else holds it."""
    return value


def _merge_into(base: dict[str, Any], over: Mapping[str, Any], copy: Callable[[Any], Any]) -> None:
    for key, value in over.items():
        if value is None:
            base.pop(key, None)
            continue
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _merge_into(current, value, copy)
        elif isinstance(value, list) and isinstance(current, list):
            base[key] = merge_lists(current, value)
        else:
            base[key] = copy(value)


def _is_named_list(items: Sequence[Any]) -> bool:
    return all(isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items)


def merge_lists(base: Sequence[Any], over: Sequence[Any]) -> list[Any]:
    """Merge two lists by the rules in the module docstring."""
    if base and over and _is_named_list(base) and _is_named_list(over):
        out = [_copy(i) for i in base]
        where = {item["name"]: n for n, item in enumerate(out)}
        for item in over:
            if item["name"] in where:
                out[where[item["name"]]] = _copy(item)
            else:
                where[item["name"]] = len(out)
                out.append(_copy(item))
        return out
    out = [_copy(i) for i in base]
    for item in over:
        if item not in out:
            out.append(_copy(item))
    return out
