"""What the API answers: registry, usage and reservations turned into JSON values and CSV.

Pure functions over the live objects, no I/O. ``user`` arguments select the view of a caller who
only has ``custom:gpupool:use``: the pools they may use, their own servers, quota and
reservations; ``user=None`` is the admin's view of everything.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from ..core.accounting.budgets import applying, budget_rows
from ..core.admission.booking_charge import member_bookings
from ..core.admission.quota import shape_headroom
from ..core.admission.walk import (
    AdmissionState,
    Decision,
    group_subject,
    quota_headroom,
    user_subject,
)
from ..core.pools.model import Pool, QuotaEntry, Registry
from ..core.pools.writing import pool_quota_to_dict, pool_to_document, quota_to_document
from ..core.time.bookings_in_force import InForce
from ..core.usage.amounts import Amount, amount_number, amount_text
from ..core.usage.index import NodeUsage, ServerUsage, UsageIndex
from ..core.usage.reservations import Reservation, Reservations
from ..core.usage.shapes import WHOLE
from ..core.words.gpu_counts import counts_row
from ..core.words.pool_rows import pool_names, pool_or_bare
from ..core.words.recut_rows import EXPECTED_SECONDS as RECUT_SECONDS
from ..core.words.recut_rows import recut_shape_rows
from ..core.words.shape_rows import server_text
from ..core.words.tables import csv_text
from .monitoring.polling import Utilization

JSON = dict[str, Any]


def iso(ts: float) -> str:
    """Seconds since the epoch as ISO 8601 UTC (``2025-01-31T12:00:00Z``), to the second."""
    return _iso_second(math.floor(ts))


@functools.lru_cache(maxsize=256)
def _iso_second(second: int) -> str:
    # the admissions answered in the same second share their expiry's text (strftime was a
    # tenth of writing an admission's answer)
    return datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- pools ---------------------------------------------------------------------------------------


def node_row(n: NodeUsage) -> JSON:
    """A node's row: its :class:`NodeUsage` fields, its GPUs counted in GPU-equivalents as a
    pool's are (:func:`~..core.words.gpu_counts.counts_row`: a MIG A100 is 1 GPU, not the 0
    of its ``nvidia.com/gpu``; an A10 time-sliced in 4 is 1, not 4), and the device plugin's
    ``nvidia.com/gpu`` units beside them (``gpu_units``: total, used, free)."""
    row = asdict(n)
    del row["parts"]
    row["reasons"] = list(n.reasons)
    row["gpu_units"] = {"total": n.gpu_total, "used": n.gpu_used, "free": n.gpu_free}
    row.update(counts_row(n.parts))
    return row


def server_row(s: ServerUsage, index: UsageIndex) -> JSON:
    """A server's row: its :class:`ServerUsage` fields, what it has in words (``shape_text``:
    ``MIG 1g.10gb of an A100-80G``, ``2 \u00d7 A100-80G``), what it counts in GPU-equivalents
    exactly (``gpu_equivalents``: ``"1/7"``) and the GPUs cell of the pages (``gpus_text``:
    the count for whole GPUs, as before shapes, else the shape's words)."""
    row = asdict(s)
    text = server_text(index, s)
    row["shape_text"] = text
    row["gpu_equivalents"] = amount_text(s.equivalents)
    row["gpus_text"] = str(s.gpus) if s.shape is None else text
    return row


def servers_answer(
    rows: Iterable[ServerUsage],
    total: int,
    index: UsageIndex,
    utilization: Utilization,
    idle: Callable[[ServerUsage], JSON | None] = lambda s: None,
    notices: Callable[[ServerUsage], JSON] = lambda s: {"notices": [], "notice": None},
) -> JSON:
    """``GET api/v1/servers``: the rows, each with what its GPUs do (None when not measured),
    where it stands under the idle policy (``idle``, None when not idle), its warnings
    (``notices``, most urgent first, and that one: ``notice``, None without), and where the
    measurements come from."""
    return {
        "servers": [
            {
                **server_row(s, index),
                **utilization.as_json(s.namespace, s.name),
                "idle": idle(s),
                **notices(s),
            }
            for s in rows
        ],
        "total": total,
        "utilization": {"source": utilization.name, "problem": utilization.problem or None},
    }


def reservation_row(r: Reservation) -> JSON:
    return {
        "id": r.admission_id,
        "pool": r.pool,
        "node": r.node,
        "gpus": r.gpus,
        "resource": r.resource,
        "gpu_equivalents": amount_text(r.quota),
        "user": r.user,
        "charged": r.charged,
        "over_quota": r.over_quota,
        "expires_at": iso(r.expires_at),
    }


# --- quotas --------------------------------------------------------------------------------------


def _entry(e: QuotaEntry | None) -> JSON | None:
    return None if e is None else {"guaranteed": e.guaranteed, "limit": e.limit}


def _subject_usage(index: UsageIndex, reservations: Reservations, pool: str, subject: str) -> JSON:
    return {
        "used": index.subject_used(pool, subject),
        "reserved": reservations.subject_reserved(pool, subject),
    }


def pool_quota(
    registry: Registry,
    index: UsageIndex,
    reservations: Reservations,
    pool: str,
    user: str | None = None,
    groups: Sequence[str] = (),
) -> JSON | None:
    """Quota in force in ``pool`` with what each subject uses; a user sees their own part."""
    q = registry.quota(pool)
    if q is None:
        return None
    out: JSON = {"borrowing": q.borrowing, "user_default": _entry(q.user_default)}
    shown_groups = q.groups if user is None else {g: e for g, e in q.groups.items() if g in groups}
    out["groups"] = {
        g: {**(_entry(e) or {}), **_subject_usage(index, reservations, pool, group_subject(g))}
        for g, e in shown_groups.items()
    }
    names = list(q.users) if user is None else [user]
    users: JSON = {}
    for name in names:
        entry = q.user_entry(name)
        users[name] = {
            **(_entry(entry) or {"guaranteed": 0, "limit": None}),
            **_subject_usage(index, reservations, pool, user_subject(name)),
            "all_gpus": index.user_used(pool, name) + reservations.user_reserved(pool, name),
            "from_default": name not in q.users,
        }
    out["users"] = users
    return out


def quotas(
    registry: Registry,
    index: UsageIndex,
    reservations: Reservations,
    user: str | None = None,
    groups: Sequence[str] = (),
) -> JSON:
    """``GET api/v1/quotas``: per-pool quotas and gpuctl's cluster-wide caps, with usage."""
    per_pool: JSON = {}
    for name in registry.pool_quotas:
        if user is not None and not pool_or_bare(registry, name).allows(user, groups):
            continue
        per_pool[name] = pool_quota(registry, index, reservations, name, user, groups)

    def cap(gpu: int | None, used: Amount, reserved: Amount) -> JSON:
        return {"gpu": gpu, "used": used, "reserved": reserved}

    group_caps = {
        g: cap(
            c.gpu,
            index.subject_used_total(group_subject(g)),
            reservations.subject_reserved_total(group_subject(g)),
        )
        for g, c in registry.group_caps.items()
        if user is None or g in groups
    }
    if user is None:
        user_caps = {
            u: cap(c.gpu, index.user_used_total(u), reservations.user_reserved_total(u))
            for u, c in registry.user_caps.items()
        }
    else:
        user_caps = {
            user: cap(
                registry.user_cap(user, groups),
                index.user_used_total(user),
                reservations.user_reserved_total(user),
            )
        }
    out: JSON = {
        "pools": per_pool,
        "caps": {
            "groups": group_caps,
            "users": user_caps,
            "default": None
            if registry.default_user_cap is None
            else {"gpu": registry.default_user_cap.gpu},
        },
    }
    if user is None:
        out["documents"] = [quota_to_document(q) for q in registry.quota_documents]
        out["pool_sections"] = {
            p.name: pool_quota_to_dict(p.quota) for p in registry.pools.values() if p.quota
        }
    else:
        out["user"] = user
        out["groups"] = list(groups)
    return out


# --- pool detail and usage -----------------------------------------------------------------------


def pool_detail(
    pool: Pool,
    summary: JSON,
    registry: Registry,
    index: UsageIndex,
    reservations: Reservations,
    user: str | None = None,
    groups: Sequence[str] = (),
) -> JSON:
    """``GET api/v1/pools/{name}``: the summary plus nodes, servers and quota usage."""
    out = dict(summary)
    out["quota"] = pool_quota(registry, index, reservations, pool.name, user, groups)
    servers = index.servers(pool=pool.name, user=user)
    out["servers"] = [server_row(s, index) for s in servers]
    held = [r for r in reservations if r.pool == pool.name and (user is None or r.user == user)]
    out["reservations"] = [reservation_row(r) for r in held]
    if user is None:
        out["nodes"] = [node_row(n) for n in index.nodes(pool.name)]
        out["document"] = pool_to_document(pool) if pool.source is not None else None
        out["usage_by_subject"] = index.usage_by_subject(pool.name)
    return out


def usage(
    registry: Registry,
    index: UsageIndex,
    reservations: Reservations,
    summaries: Iterable[JSON],
    user: str | None = None,
) -> JSON:
    """``GET api/v1/usage``: GPUs in use by pool, subject and user (a user: their own)."""
    held = [r for r in reservations if user is None or r.user == user]
    if user is not None:
        servers = index.servers(user=user)
        by_pool: dict[str, Amount] = {}  # GPU-equivalents, as quotas count them
        for s in servers:
            if s.pool is not None and s.equivalents:
                by_pool[s.pool] = by_pool.get(s.pool, 0) + s.equivalents
        return {
            "user": user,
            "gpus": index.user_used_total(user),
            "by_pool": by_pool,
            "servers": [server_row(s, index) for s in servers],
            "reservations": [reservation_row(r) for r in held],
        }
    names = pool_names(registry, index)
    return {
        "pools": list(summaries),
        "by_subject": {n: index.usage_by_subject(n) for n in names if index.has_pool(n)},
        "by_user": {n: index.usage_by_user(n) for n in names if index.has_pool(n)},
        "subjects": index.usage_by_subject(),
        "users": index.usage_by_user(),
        "reservations": {"count": len(held), "gpus": sum(r.gpus for r in held)},
        "server_count": len(index.servers()),
        "nodes": index.node_count,
    }


# --- launch options ------------------------------------------------------------------------------


def launch_options(
    summaries: Iterable[JSON],
    state: AdmissionState,
    index: UsageIndex,
    user: str,
    groups: Sequence[str],
    max_gpus: int,
    waiting: Mapping[str, int] | None = None,
    recut_seconds: float = RECUT_SECONDS,
    now: float | None = None,
) -> JSON:
    """``GET api/v1/launch-options``: what ``user`` may choose when starting a server.

    The pools open to them (``summaries``: their rows of ``GET api/v1/pools``) with the biggest
    node's GPUs and their quota headroom there, listed as the spawn form lists them: the pools
    of their default order first, in that order, then the others in the registry's order (the
    order every client shows: the form, the magics, the ``LaunchPanel``, the lab panel); the
    admin's default pool order for their groups, the pools that exist but are not open to them
    (so a spawn form can tell "no such pool" from "not yours"), and what is left of the GPU-hour
    budgets of the user and their groups (none when budgets are not enforced).

    A pool's ``shapes`` go on with those only a MIG re-cut would offer
    (:func:`~..core.words.recut_rows.recut_shape_rows`: 0 free, ``recut: true``,
    ``ready_in_s`` from ``recut_seconds``, what a re-cut is expected to take, at ``now``).
    """
    registry = state.registry
    now = state.now if now is None else now
    rows = []
    for summary in summaries:
        name = summary["name"]
        pool = registry.pool(name)
        recut = (
            recut_shape_rows(pool, index, recut_seconds, now, state.mig_configs)
            if pool is not None and pool.recut is not None
            else []
        )
        ceiling = summary["whole_gpus"]["total"]  # whole GPUs: the quota of whole GPUs
        room = quota_headroom(name, user, groups, state, ceiling)
        # one unit of each shape other than whole GPUs, at its largest equivalent in the pool
        parts: dict[str, Amount] = {}
        for count in index.shape_counts(name):
            if count.shape.kind != WHOLE:
                e = count.shape.equivalent
                parts[count.shape.id] = max(parts.get(count.shape.id, e), e)
        rows.append(
            {
                **summary,
                "shapes": [*summary.get("shapes", ()), *recut],
                "largest_node_gpus": max(
                    (n.gpu_total for n in index.nodes(name) if index.node_gpus_whole(n.name)),
                    default=0,
                ),
                "quota": {
                    "managed": room.managed,
                    "borrowing": room.borrowing,
                    "within_quota": room.within_quota,
                    # GPU-equivalents: 3 whole GPUs, or 3.86, after a 1/7 slice of 4
                    "within_equivalents": amount_number(room.within_equivalents),
                    "available": room.available,
                    # per shape: within | borrowing | none (one unit of it, capacity aside)
                    "shapes": shape_headroom(name, user, groups, state, parts) if parts else {},
                },
                "bookings": [
                    booked_row(w, used) for w, used in member_bookings(state, name, user, groups)
                ],
                # requests waiting in line for it now (the spawn form says so beside "full")
                "waiting": (waiting or {}).get(name, 0),
            }
        )
    open_ = {r["name"] for r in rows}
    defaults = in_users_order(rows, registry, groups)
    return {
        "user": user,
        "groups": list(groups),
        "default_pools": defaults,
        "restricted_pools": [n for n in pool_names(registry, index) if n not in open_],
        "max_gpus": max_gpus,
        "pools": rows,
        "budgets": (
            budget_rows(applying(registry.budgets, user, groups), state.budgets, state.now)
            if state.budgets is not None
            else []
        ),
    }


def in_users_order(rows: list[JSON], registry: Registry, groups: Sequence[str]) -> list[str]:
    """Sort pool ``rows`` as every client lists them for a user: the admin's default order
    for their groups first, in that order, then the others as they came (the registry's
    order); the default order's pools among ``rows`` are returned."""
    open_ = {r["name"] for r in rows}
    defaults = [p for p in registry.default_pool_order(groups) if p in open_]
    first = {name: n for n, name in enumerate(defaults)}
    rows.sort(key=lambda r: first.get(r["name"], len(first)))  # stable: the rest keep theirs
    return defaults


def booked_row(w: InForce, used: int) -> JSON:
    """A booking in force that the user is a member of, as the spawn form says it."""
    b, o = w.booking, w.occurrence
    return {
        "name": b.name,
        "description": b.description,
        "shape": b.shape,
        "gpus": b.gpus,
        "used": used,
        "free": max(0, b.gpus - used),
        "start": o.start,
        "end": o.end,
        "until_text": o.until_text(),
        "timezone": o.timezone,
    }


# --- admissions ----------------------------------------------------------------------------------


def skipped(decision: Decision) -> list[JSON]:
    return [{"pool": s.pool, "reason": s.reason} for s in decision.skipped]


def victim_row(s: ServerUsage) -> JSON:
    return {
        "user": s.user,
        "server": s.server,
        "pod": f"{s.namespace}/{s.name}",
        "node": s.node,
        "gpus": s.gpus,
    }


# --- CSV -----------------------------------------------------------------------------------------

POOL_COLUMNS = (
    "name",
    "status",
    "gpu_total",
    "gpu_used",
    "gpu_free",
    "gpu_reserved",
    "gpu_available",
    "largest_free_block",
    "node_count",
    "schedulable_nodes",
    "gpu_types",
    "server_count",
    "pending_servers",
    "description",
)
NODE_COLUMNS = (
    "name",
    "pool",
    "gpu_type",
    "gpu_total",
    "gpu_used",
    "gpu_free",
    "status",
    "reasons",
    "schedulable",
    "pods",
)


def to_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """CSV with a header row; cells as :func:`~jupyter_gpupool.core.words.tables.csv_cell` writes
    them (lists joined with ``;``, None empty, no formulas), as ``gpupool get -o csv`` does."""
    return csv_text(columns, ([row.get(c) for c in columns] for row in rows))
