"""The spawn form: what each pool row says, and rendering it from an overridable template.

:func:`form_context` is pure (catalog + defaults in, template variables out); :func:`render_form`
renders a jinja template found first in the admin's directories, then in the package
(``jupyter_gpupool/spawner/templates/gpupool_form.html``). Autoescape is on. A pool's status and
quota words and the GPU counts offered come from :mod:`jupyter_gpupool.core.words.launch_options`, so
that the magics and the ``LaunchPanel`` word them as the form does.

The form works without JavaScript: each pool row has a priority number field
(``priority.POOL``, empty: not used) and, when the pool's nodes offer shapes, a radio
button per shape (``shape.POOL``: whole GPUs, MIG instances, shared GPUs...), one line each with
its free count; what each kind of shape isolates is said once above the pools, folded (a
``<details>``: on demand), and in each shape's tooltip; the GPU count and type are plain selects, and a checkbox
says whether to wait in line when no pool can take the server now (``queue``). With JavaScript,
rows get a "use" checkbox and up/down buttons (keyboard operable) that renumber the priorities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

from ..core.words.launch_options import (
    MAX_GPU_CHOICES,
    Catalog,
    PoolChoice,
    budget_text,
    gpu_choices,
    pool_status,
    quota_text,
)
from ..core.words.shape_choice import ShapeChoice, default_shape, kind_words, shape_ids
from .options import PRIORITY_FIELD, SHAPE_FIELD, SpawnOptions, default_order, order_rows

DEFAULT_TEMPLATE = "gpupool_form.html"


@dataclass(frozen=True)
class ShapeOption:
    """One shape a pool row offers: ``text`` the service's line(s) with the free count ("MIG
    3g.40gb: 2 free"; one per GPU model offering it), ``isolates`` in words, ``kind_words``
    its kind ("a MIG instance")."""

    id: str
    text: str
    isolates: str
    selected: bool
    kind_words: str = ""
    kind: str = ""


@dataclass(frozen=True)
class Isolation:
    """What one kind of shape on the form isolates, said once: ``words`` "A MIG instance"."""

    kind: str
    words: str
    isolates: str


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
    shape_field: str = ""  # the shape select's name
    shapes: tuple[ShapeOption, ...] = ()


def shape_options(pool: PoolChoice, chosen: str | None) -> tuple[ShapeOption, ...]:
    """The pool's shapes for its select, ``chosen`` (``None``: whole GPUs) selected; where the
    pool does not offer it, the pool's default (:func:`.default_shape`)."""
    ids = shape_ids(pool.shapes)
    wanted = chosen or "whole"
    if wanted not in ids:
        wanted = default_shape(pool.shapes) or "whole"
    by_id: dict[str, list[ShapeChoice]] = {}
    for s in pool.shapes:
        by_id.setdefault(s.id, []).append(s)
    return tuple(
        ShapeOption(
            id=i,
            text="; ".join(s.text for s in by_id[i]),
            isolates=by_id[i][0].isolates,
            selected=i == wanted,
            kind_words=kind_words(by_id[i][0].kind),
            kind=by_id[i][0].kind,
        )
        for i in ids
    )


def isolation(pools: Sequence[PoolChoice]) -> list[Isolation]:
    """Each kind of shape the pools offer, once, in the order the form first shows it."""
    kinds: dict[str, Isolation] = {}
    for p in pools:
        for s in p.shapes:
            if s.kind not in kinds and s.isolates:
                words = kind_words(s.kind)
                kinds[s.kind] = Isolation(s.kind, words[:1].upper() + words[1:], s.isolates)
    return list(kinds.values())


def default_note(default_pools: Sequence[str]) -> str:
    """What the form says while no pool is chosen."""
    if not default_pools:
        return "No pool is chosen, and there is no default order for you: choose at least one."
    order = ", then ".join(default_pools)
    return f"No pool is chosen, so the default order for your groups will be used: {order}."


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
    choice, HTML, when profiles are configured), ``budgets`` (``text`` and ``spent`` of each
    GPU-hour budget of the user and their groups), ``queue`` (whether "wait in line" is
    ticked), ``user``, ``server``, ``catalog``. Each row lists its pool's shapes (``shapes``,
    :class:`ShapeOption`) when there are any; ``isolation`` (:class:`Isolation`) says once what
    each kind of them isolates."""
    shapes: dict[str, str | None] = {}
    for pool, shape in chosen.choices():
        shapes.setdefault(pool, shape)  # a pool chosen twice: its first entry's shape
    rows = [
        PoolRow(
            name=p.name,
            field=PRIORITY_FIELD + p.name,
            priority=priority,
            description=p.description,
            gpu_types=", ".join(p.gpu_types) or "—",
            free=p.free_text,
            largest_free_block=p.largest_free_block,
            quota=quota_text(p),
            status=pool_status(p)[0],
            status_text=pool_status(p)[1],
            shape_field=SHAPE_FIELD + p.name,
            shapes=shape_options(p, shapes.get(p.name)),
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
        "isolation": isolation([p for p, _ in order_rows(catalog, chosen.pools)]),
        "default_pools": defaults,
        "default_note": default_note(defaults),
        "gpu_choices": choices if len(choices) < MAX_GPU_CHOICES else [],
        "gpus": gpus,
        "max_gpus": max(choices, default=0),
        "gpu_types": sorted({t for p in catalog.pools for t in p.gpu_types}),
        "gpu_type": chosen.gpu_type or "",
        "profile_form": profile_form,
        "budgets": [{"text": budget_text(b), "spent": b.remaining <= 0} for b in catalog.budgets],
        "queue": chosen.queue,
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
