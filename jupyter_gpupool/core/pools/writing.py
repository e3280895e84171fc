"""Back to documents: a loaded :class:`~jupyter_gpupool.core.pools.model.Pool`, quota or booking as the
document that loads into an equal one (the service echoes pools, the pages and the CLI show them).

Extensions are written only where a pool has them, so a plain gpuctl pool comes back as gpuctl
wrote it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ..accounting.budgets import Budget
from ..time.bookings import WEEKDAYS, Booking
from ..time.idle import IdlePolicy
from ..time.runtime import RuntimeLimit
from .document_spec import BOOKING_KIND, QUOTA_KIND, VERSION
from .model import (
    Defaults,
    Pool,
    PoolQuota,
    QuotaDocument,
    QuotaEntry,
    Registry,
    ResourceCap,
    ShapeRule,
)
from .recut_policy import recut_to_dict


def _entry_doc(e: QuotaEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"guaranteed": e.guaranteed}
    if e.limit is not None:
        out["limit"] = e.limit
    return out


def pool_quota_to_dict(q: PoolQuota) -> dict[str, Any]:
    out: dict[str, Any] = {"borrowing": q.borrowing}
    if q.user_default is not None:
        out["user-default"] = _entry_doc(q.user_default)
    if q.groups:
        out["groups"] = {k: _entry_doc(v) for k, v in q.groups.items()}
    if q.users:
        out["users"] = {k: _entry_doc(v) for k, v in q.users.items()}
    return out


def _defaults_doc(d: Defaults) -> dict[str, Any]:
    pairs = (
        ("cpu", d.cpu),
        ("memory", d.memory),
        ("cpu-per-gpu", d.cpu_per_gpu),
        ("memory-per-gpu", d.memory_per_gpu),
    )
    return {k: v for k, v in pairs if v is not None}


def _shape_rule_doc(r: ShapeRule) -> dict[str, Any]:
    out: dict[str, Any] = {"id": r.id}
    if r.name is not None:
        out["name"] = r.name
    if r.max_per_user is not None:
        out["max-per-user"] = r.max_per_user
    if r.max_runtime is not None:
        out["max-runtime"] = runtime_to_dict(r.max_runtime)
    return out


def pool_to_document(pool: Pool) -> dict[str, Any]:
    """The pool as a gpuctl ``kind: pool`` document; extensions only where the pool has them.

    Loading the result gives an equal :class:`Pool` (the service echoes pools this way). gpuctl's
    ``gpuType`` spelling comes back as ``gpu-type``.
    """
    doc: dict[str, Any] = {"kind": "pool", "version": VERSION, "pool": {"name": pool.name}}
    if pool.description is not None:
        doc["pool"]["description"] = pool.description
    doc["nodes"] = {host: {"gpu-type": t} for host, t in pool.nodes.items()}
    if pool.selector:
        doc["selector"] = dict(pool.selector)
    if pool.access is not None:
        doc["access"] = {"users": list(pool.access.users), "groups": list(pool.access.groups)}
    if pool.quota is not None:
        doc["quota"] = pool_quota_to_dict(pool.quota)
    if defaults := _defaults_doc(pool.defaults):
        doc["defaults"] = defaults
    if pool.shapes:
        doc["shapes"] = [_shape_rule_doc(r) for r in pool.shapes]
    limits: dict[str, Any] = {}
    if pool.limits.max_gpus is not None:
        limits["max-gpus"] = pool.limits.max_gpus
    if pool.limits.min_gpus:
        limits["min-gpus"] = pool.limits.min_gpus
    if pool.limits.allowed_gpus:
        limits["allowed-gpus"] = list(pool.limits.allowed_gpus)
    if limits:
        doc["limits"] = limits
    if pool.platforms:
        platforms: dict[str, Any] = {}
        for name, p in pool.platforms.items():
            pd: dict[str, Any] = {"gpu-type": p.gpu_type}
            if p.description is not None:
                pd["description"] = p.description
            if p.defaults is not None:
                pd["defaults"] = _defaults_doc(p.defaults)
            if p.template:
                pd["template"] = _plain(p.template)
            platforms[name] = pd
        doc["platforms"] = platforms
    if pool.default_platform is not None:
        doc["default-platform"] = pool.default_platform
    if pool.template:
        doc["template"] = _plain(pool.template)
    if pool.placement != "binpack":
        doc["placement"] = pool.placement
    if pool.idle is not None:
        doc["idle"] = idle_to_dict(pool.idle)
    if pool.max_runtime is not None:
        doc["max-runtime"] = runtime_to_dict(pool.max_runtime)
    if pool.recut is not None:
        doc["recut"] = recut_to_dict(pool.recut)
    return doc


def _cap_doc(cap: ResourceCap) -> dict[str, Any]:
    pairs = (("cpu", cap.cpu), ("memory", cap.memory), ("gpu", cap.gpu))
    return {k: v for k, v in pairs if v is not None}


def quota_to_document(q: QuotaDocument) -> dict[str, Any]:
    """The quota document as gpuctl's ``kind: quota`` plus our extensions where set."""
    doc: dict[str, Any] = {"kind": QUOTA_KIND, "version": VERSION, "quota": {"name": q.name}}
    if q.description is not None:
        doc["quota"]["description"] = q.description
    if q.namespaces:
        doc["namespace"] = {k: _cap_doc(v) for k, v in q.namespaces.items()}
    if q.users:
        doc["users"] = {k: _cap_doc(v) for k, v in q.users.items()}
    if q.default is not None:
        doc["default"] = _cap_doc(q.default)
    if q.pools:
        doc["pools"] = {k: pool_quota_to_dict(v) for k, v in q.pools.items()}
    if q.default_pools is not None:
        dp: dict[str, Any] = {}
        if q.default_pools.groups:
            dp["groups"] = {g: list(p) for g, p in q.default_pools.groups.items()}
        if q.default_pools.fallback:
            dp["fallback"] = list(q.default_pools.fallback)
        doc["default-pools"] = dp
    if q.budgets:
        doc["budgets"] = [_budget_doc(b) for b in q.budgets]
    return doc


def idle_to_dict(p: IdlePolicy) -> dict[str, Any]:
    """An idle policy as a pool file writes it."""
    out: dict[str, Any] = {
        "below_percent": int(p.below_percent) if p.below_percent.is_integer() else p.below_percent,
        "after": p.after,
        "action": p.action,
    }
    if p.warn:
        out["warn"] = p.warn
    exempt = {k: list(v) for k, v in (("users", p.exempt_users), ("groups", p.exempt_groups)) if v}
    if exempt:
        out["exempt"] = exempt
    return out


def runtime_to_dict(limit: RuntimeLimit) -> dict[str, Any]:
    """A runtime limit as a pool file writes it."""
    out: dict[str, Any] = {"after": limit.after}
    if limit.warn:
        out["warn"] = limit.warn
    pairs = (("users", limit.exempt_users), ("groups", limit.exempt_groups))
    exempt = {k: list(v) for k, v in pairs if v}
    if exempt:
        out["exempt"] = exempt
    return out


def _budget_doc(b: Budget) -> dict[str, Any]:
    hours = int(b.gpu_hours) if float(b.gpu_hours).is_integer() else b.gpu_hours
    out: dict[str, Any] = {b.kind: b.name, "gpu_hours": hours, "window": b.window}
    if b.pools:
        out["pools"] = list(b.pools)
    if b.on_exhausted is not None:
        out["on_exhausted"] = b.on_exhausted
    if b.warn_percent is not None:
        pct = b.warn_percent
        out["warn_percent"] = int(pct) if float(pct).is_integer() else pct
    return out


def local_text(t: dt.datetime) -> str:
    """``2027-01-12T10:00`` (``:30`` more when it has seconds)."""
    return f"{t:%Y-%m-%dT%H:%M:%S}" if t.second else f"{t:%Y-%m-%dT%H:%M}"


def booking_to_document(b: Booking) -> dict[str, Any]:
    """A booking as its ``kind: booking`` document (dates and times as strings, so the result
    is JSON too; loading it gives an equal booking)."""
    meta: dict[str, Any] = {"name": b.name}
    if b.description is not None:
        meta["description"] = b.description
    doc: dict[str, Any] = {
        "kind": BOOKING_KIND,
        "version": VERSION,
        "booking": meta,
        "pool": b.pool,
        "shape": b.shape,
        "gpus": b.gpus,
    }
    if b.groups:
        doc["groups"] = list(b.groups)
    if b.users:
        doc["users"] = list(b.users)
    window: dict[str, Any] = {}
    if b.window.once is not None:
        window["once"] = {
            "start": local_text(b.window.once.start),
            "end": local_text(b.window.once.end),
        }
    if (w := b.window.weekly) is not None:
        window["weekly"] = {
            "days": [WEEKDAYS[d] for d in w.days],
            "start": f"{w.start:%H:%M}",
            "end": f"{w.end:%H:%M}",
        }
        window["from"] = w.first.isoformat()
        window["until"] = w.last.isoformat()
    window["timezone"] = b.window.timezone
    doc["window"] = window
    return doc


def registry_to_documents(registry: Registry) -> list[dict[str, Any]]:
    """Every pool, quota and booking document of the registry, in load order."""
    return (
        [pool_to_document(p) for p in registry.pools.values()]
        + [quota_to_document(q) for q in registry.quota_documents]
        + [booking_to_document(b) for b in registry.bookings]
    )


def _plain(value: Any) -> Any:
    """A JSON-ready deep copy (mappings to dicts, sequences to lists)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
