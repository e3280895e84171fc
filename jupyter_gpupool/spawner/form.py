"""The spawn form: what each pool row says, and rendering it from an overridable template.

:func:`form_context` is pure (catalog + defaults in, template variables out); :func:`render_form`
renders a jinja template found first in the admin's directories, then in the package
(``jupyter_gpupool/spawner/templates/gpupool_form.html``). Autoescape is on.

The form works without JavaScript: each pool row has a priority number field
(``priority.POOL``, empty: not used), the GPU count and type are plain selects. With JavaScript,
rows get a "use" checkbox and up/down buttons (keyboard operable) that renumber the priorities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

from .options import PRIORITY_FIELD, Catalog, PoolChoice, SpawnOptions, default_order, order_rows

DEFAULT_TEMPLATE = "gpupool_form.html"
#: More choices than this and the GPU count becomes a number field instead of a select.
MAX_GPU_CHOICES = 64


@dataclass(frozen=True)
class PoolRow:
    """One row of the form's pool table."""

    name: str
    field: str  # the priority field's name
    priority: int | None
    description: str
    gpu_types: str
    free: str  # "12 / 16"
    largest_free_block: int
    quota: str
    status: str  # a CSS-friendly code: free, full, borrowing, quota-used, not-ready, cpu, empty
    status_text: str


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def pool_status(p: PoolChoice) -> tuple[str, str]:
    """``(code, words)`` for the status column: free, full, borrowing possible, nodes not
    ready..."""
    if p.node_count == 0:
        return "empty", "no nodes"
    if p.status == "unavailable" or p.schedulable_nodes == 0:
        return "not-ready", "nodes not ready"
    if p.gpu_total == 0:
        return "cpu", "CPU only"
    if p.largest_free_block == 0 or p.gpu_available == 0:
        return "full", "full"
    if p.quota_managed and not p.quota_available:
        return "quota-used", "your quota is used up"
    not_ready = p.node_count - p.schedulable_nodes
    suffix = f"; {not_ready} of {p.node_count} nodes not ready" if not_ready > 0 else ""
    if p.quota_managed and not p.within_quota and p.borrowing:
        return "borrowing", "borrowing possible (may be reclaimed)" + suffix
    return ("not-ready" if suffix else "free"), "free" + suffix


def quota_text(p: PoolChoice) -> str:
    """The user's remaining quota in the pool, in words."""
    if not p.quota_managed:
        return "no quota"
    within, available = p.within_quota or 0, p.quota_available or 0
    if available > within:
        return f"{within} within quota, {available} with borrowing"
    return f"{_gpus(within)} within quota"


def default_note(default_pools: Sequence[str]) -> str:
    """What the form says while no pool is chosen."""
    if not default_pools:
        return "No pool is chosen, and there is no default order for you: choose at least one."
    order = ", then ".join(default_pools)
    return f"No pool is chosen, so the default order for your groups will be used: {order}."


def gpu_choices(catalog: Catalog) -> list[int]:
    """Every GPU count some pool of the catalog allows (0, a CPU-only server, included)."""
    counts: set[int] = set()
    for p in catalog.pools:
        top = min(p.gpu_ceiling, catalog.max_gpus, MAX_GPU_CHOICES)
        counts.update(n for n in range(p.min_gpus, top + 1) if p.allows_count(n))
    return sorted(counts)


def form_context(
    catalog: Catalog,
    chosen: SpawnOptions,
    *,
    profile_form: str = "",
    user: str = "",
    server: str = "",
) -> dict[str, Any]:
    """The template's variables: ``rows`` (:class:`PoolRow`), ``default_pools`` (the order a
    start with no pool chosen tries), ``default_note`` (that, in words), ``gpu_choices``,
    ``gpus``, ``max_gpus``, ``gpu_types``, ``gpu_type``, ``profile_form`` (KubeSpawner's profile
    choice, HTML, when profiles are configured), ``user``, ``server``, ``catalog``."""
    rows = [
        PoolRow(
            name=p.name,
            field=PRIORITY_FIELD + p.name,
            priority=priority,
            description=p.description,
            gpu_types=", ".join(p.gpu_types) or "—",
            free=f"{p.gpu_available} / {p.gpu_total}",
            largest_free_block=p.largest_free_block,
            quota=quota_text(p),
            status=pool_status(p)[0],
            status_text=pool_status(p)[1],
        )
        for p, priority in order_rows(catalog, chosen.pools)
    ]
    choices = gpu_choices(catalog)
    gpus = chosen.gpus
    if choices and len(choices) < MAX_GPU_CHOICES and gpus not in choices:
        gpus = min(choices, key=lambda n: (abs(n - gpus), n))
    defaults = list(default_order(catalog))
    return {
        "rows": rows,
        "default_pools": defaults,
        "default_note": default_note(defaults),
        "gpu_choices": choices if len(choices) < MAX_GPU_CHOICES else [],
        "gpus": gpus,
        "max_gpus": max(choices, default=0),
        "gpu_types": sorted({t for p in catalog.pools for t in p.gpu_types}),
        "gpu_type": chosen.gpu_type or "",
        "profile_form": profile_form,
        "user": user,
        "server": server,
        "catalog": catalog,
    }


def template_environment(search_path: Sequence[str]) -> jinja2.Environment:
    """Templates in ``search_path`` first (an admin's own ``gpupool_form.html``), then ours."""
    loader = jinja2.ChoiceLoader(
        [
            jinja2.FileSystemLoader(list(search_path)),
            jinja2.PackageLoader("jupyter_gpupool.spawner", "templates"),
        ]
    )
    return jinja2.Environment(loader=loader, autoescape=True)


def render_form(
    context: dict[str, Any],
    *,
    template: str = DEFAULT_TEMPLATE,
    search_path: Sequence[str] = (),
) -> str:
    return template_environment(search_path).get_template(template).render(**context)
