"""A pool file's time limits, checked beyond their shapes: ``idle`` and ``max-runtime`` (of a
pool or of one of its shapes); each rule between fields is a problem at its line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..documents.durations import duration_seconds
from ..documents.spec import Checker
from ..documents.yaml_reader import PathElem
from ..time.idle import IdlePolicy, policy_from_mapping
from ..time.runtime import RuntimeLimit, limit_from_mapping
from .model import Source


def read_idle(c: Checker, data: Mapping[str, Any], path: tuple[PathElem, ...]) -> IdlePolicy | None:
    """A checked ``idle`` section; its rules between fields are problems at their lines."""
    policy = policy_from_mapping(data)
    ok = True
    if policy.below_percent > 100:
        c.add((*path, "below_percent"), f"must be at most 100, not {policy.below_percent:g}")
        ok = False
    try:
        if policy.warn and duration_seconds(policy.warn) > duration_seconds(policy.after):
            c.add(
                (*path, "warn"),
                f"the warning ({policy.warn}) must not come before the idle time starts: "
                f"it is longer than 'after' ({policy.after})",
            )
            ok = False
    except ValueError:
        ok = False  # already reported by the shape
    if not ok:
        return None
    return replace(policy, source=Source(c.doc.file, c.doc.line_of(path)))


def read_max_runtime(
    c: Checker, data: Mapping[str, Any], path: tuple[PathElem, ...]
) -> RuntimeLimit | None:
    """A checked ``max-runtime`` section (of a pool or of a shape)."""
    if "after" not in data:
        return None  # reported by the shape
    limit = limit_from_mapping(data)
    try:
        if limit.warn and duration_seconds(limit.warn) > limit.after_seconds:
            c.add(
                (*path, "warn"),
                f"the warning ({limit.warn}) must not come before the server starts: "
                f"it is longer than 'after' ({limit.after})",
            )
            return None
        if limit.after_seconds <= 0:
            c.add((*path, "after"), f"a runtime limit must be longer than 0, not {limit.after!r}")
            return None
    except ValueError:
        return None  # already reported by the shape
    return replace(limit, source=Source(c.doc.file, c.doc.line_of(path)))
