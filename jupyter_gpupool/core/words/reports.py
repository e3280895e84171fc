"""Rows and cells of the tables that both the ``gpupool`` CLI and the service's pages show.

Pure functions over the service's JSON answers (``GET api/v1/quotas``, ``api/v1/usage``), so that
``gpupool get quotas`` and the quotas page agree to the GPU. (Ages and other cells are
:mod:`.tables`'s.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..usage.amounts import Amount


def gpu_hours_text(value: float | None) -> str:
    """GPU-hours for a page's cell and the CLI's alike: one decimal, and a small amount never
    shown as nothing (``0.02``, ``<0.01``: a MIG 1g.10gb for a few minutes is not ``0.0``)."""
    hours = float(value or 0)
    if 0 < hours < 0.005:
        return "<0.01"
    if 0 < hours < 0.095:
        return f"{hours:.2f}"
    return f"{hours:,.1f}"


#: The ``pool`` of rows for cluster-wide caps (gpuctl's quota documents), which span every pool.
ALL_POOLS = "(all pools)"
#: The ``subject`` of the row that shows a pool's per-user default.
EACH_USER = "(each user)"


def _row(pool: str, subject: str, entry: Mapping[str, Any] | None, **more: Any) -> dict[str, Any]:
    entry = entry or {}
    used = entry.get("used")
    guaranteed = entry.get("guaranteed")
    return {
        "pool": pool,
        "subject": subject,
        "guaranteed": guaranteed,
        "limit": entry.get("limit"),
        "used": used,
        "reserved": entry.get("reserved"),
        # GPUs beyond the guarantee are borrowed (and can be reclaimed)
        "borrowed": max(0, used - (guaranteed or 0)) if used is not None else None,
        **more,
    }


def quota_rows(
    quotas: Mapping[str, Any],
    by_subject: Mapping[str, Mapping[str, Amount]] | None = None,
) -> list[dict[str, Any]]:
    """One row per pool and subject: guaranteed, limit, used, reserved and borrowed GPUs.

    ``quotas`` is the answer of ``GET api/v1/quotas``; ``by_subject`` (``usage["by_subject"]``,
    admins only) adds the users who use GPUs under their pool's per-user default without an
    entry of their own. Cluster-wide caps come last, with pool :data:`ALL_POOLS`.
    """
    rows: list[dict[str, Any]] = []
    for pool, q in (quotas.get("pools") or {}).items():
        if not q:
            continue
        borrowing = bool(q.get("borrowing"))
        for group, entry in (q.get("groups") or {}).items():
            rows.append(_row(pool, f"group:{group}", entry, borrowing=borrowing))
        listed = set()
        for user, entry in (q.get("users") or {}).items():
            listed.add(f"user:{user}")
            rows.append(
                _row(
                    pool,
                    f"user:{user}",
                    entry,
                    borrowing=borrowing,
                    from_default=bool(entry.get("from_default")),
                )
            )
        default = q.get("user_default")
        for subject, used in sorted((by_subject or {}).get(pool, {}).items()):
            if subject.startswith("user:") and subject not in listed:
                entry = {**(default or {"guaranteed": 0, "limit": None}), "used": used}
                rows.append(_row(pool, subject, entry, borrowing=borrowing, from_default=True))
        if default:
            rows.append(_row(pool, EACH_USER, default, borrowing=borrowing))
    caps = quotas.get("caps") or {}
    for kind in ("groups", "users"):
        for name, cap in (caps.get(kind) or {}).items():
            entry = {
                "guaranteed": None,
                "limit": cap.get("gpu"),
                "used": cap.get("used"),
                "reserved": cap.get("reserved"),
            }
            row = _row(ALL_POOLS, f"{kind[:-1]}:{name}", entry, borrowing=False)
            row["borrowed"] = None
            rows.append(row)
    default_cap = caps.get("default")
    if default_cap:
        rows.append(_row(ALL_POOLS, EACH_USER, {"limit": default_cap.get("gpu")}, borrowing=False))
    return rows
