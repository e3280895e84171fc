"""A pool's shapes as ``GET api/v1/pools`` lists them: each with its free counts and the largest
free block on one node, and a short text for the spawn form ("MIG 3g.40gb: 2 free").

Pure: read off the usage index's shape counts (:class:`~..usage.records.ShapeCount`) and the
reservations: one of ``nvidia.com/gpu`` is taken from the shape the node offers under that
resource, one of another resource (a MIG device) from that resource's shape on its node.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..pools.model import ShapeRule
from ..usage.index import ServerUsage, UsageIndex
from ..usage.records import ShapeCount
from ..usage.reservations import Reservations
from ..usage.shapes import HAMI, MIG, MPS, TIME_SLICING, WHOLE, Shape

JSON = dict[str, Any]

#: Whole GPUs first, then MIG instances (largest first), then shared GPUs, then HAMi slices.
_KIND_ORDER = {WHOLE: 0, MIG: 1, TIME_SLICING: 2, MPS: 2, HAMI: 3}

#: Unicode's vulgar fractions, for the texts ("A10 shared ¼").
_VULGAR = {
    Fraction(1, 2): "½",
    Fraction(1, 3): "⅓",
    Fraction(2, 3): "⅔",
    Fraction(1, 4): "¼",
    Fraction(3, 4): "¾",
    Fraction(1, 5): "⅕",
    Fraction(1, 6): "⅙",
    Fraction(1, 7): "⅐",
    Fraction(1, 8): "⅛",
    Fraction(1, 9): "⅑",
    Fraction(1, 10): "⅒",
}


def shape_order(shape: Shape) -> tuple[Any, ...]:
    """Sort key: kind (whole, MIG, shared, HAMi), then the larger first, then model and id."""
    return (
        _KIND_ORDER.get(shape.kind, len(_KIND_ORDER)),
        -shape.equivalent,
        -(shape.memory_mib or 0),
        shape.model or "",
        shape.id,
        shape.resource,
    )


def fraction_text(value: Fraction) -> str:
    """``¼`` for a quarter, ``2/7`` where Unicode has no sign, ``1`` for a whole."""
    return _VULGAR.get(value) or str(value)


def shape_text(shape: Shape, free: int, largest: int) -> str:
    """The spawn form's line for a shape, in the issue's words."""
    model = shape.model or "GPU"
    if shape.kind == WHOLE:
        more = f" (largest {largest} on one node)" if free else ""
        return f"{model} whole: {free} free{more}"
    if shape.kind == MIG:
        name = f"MIG {shape.profile}"
        if shape.replicas > 1:
            name += f" shared {fraction_text(Fraction(1, shape.replicas))} (time-sliced)"
        return f"{name}: {free} free"
    if shape.kind == TIME_SLICING:
        how = "time-sliced, no memory isolation"
    elif shape.kind == MPS:
        how = "MPS, a share of memory and compute"
    else:
        how = "HAMi, memory capped in user space"
    word = "slice" if shape.kind == HAMI else "shared"
    return f"{model} {word} {fraction_text(shape.equivalent)} ({how}): {free} free"


def pool_shapes(
    index: UsageIndex,
    reservations: Reservations,
    pool: str,
    rules: Sequence[ShapeRule] = (),
) -> list[JSON]:
    """The pool's shapes, ordered (:func:`shape_order`), each with ``total`` (on all its nodes),
    ``free`` (on its schedulable nodes, less what reservations hold) and ``largest_free`` (the
    most free on one schedulable node). ``rules`` (the pool file's ``shapes``) keep only the
    shapes they name, in their order, with their names."""
    counts = index.shape_counts(pool)
    if not counts:
        return []
    # per shape count: units reservations take, and its reserved nodes by (raw free, held)
    taken: dict[int, int] = {}
    reserved: dict[int, list[tuple[int, int]]] = {}

    def hold(count: ShapeCount, free: int, units: int) -> None:
        taken[id(count)] = taken.get(id(count), 0) + min(units, free)
        reserved.setdefault(id(count), []).append((free, units))

    for node, gpus in reservations.pool_nodes(pool).items():
        count = index.node_gpu_shape(node)
        if count is not None:
            hold(count, index.node_free(node), gpus)
    for (node, resource), units in reservations.pool_units(pool).items():
        found = index.node_unit_count(node, resource)
        if found is not None:
            hold(found[0], found[1], units)
    order = {r.id: i for i, r in enumerate(rules)}
    names = {r.id: r.name for r in rules}
    shown = [c for c in counts if not rules or c.shape.id in order]
    out = []
    for count in sorted(shown, key=lambda c: (order.get(c.shape.id, 0), shape_order(c.shape))):
        held = reserved.get(id(count))
        free = count.free - taken.get(id(count), 0)
        largest = _largest(count, held) if held else count.max_free()
        out.append(shape_row(count.shape, count.total, free, largest, names.get(count.shape.id)))
    return out


def _largest(count: ShapeCount, held: list[tuple[int, int]]) -> int:
    """The most free units on one node, the reserved nodes' held units counted as used: the
    reserved nodes one by one, the counters only above the best found so far (as
    :func:`.pool_rows.largest_free_block` does for GPUs)."""
    best = 0
    at: dict[int, int] = {}  # raw free units -> reserved nodes with that many
    for free, gpus in held:
        at[free] = at.get(free, 0) + 1
        best = max(best, free - gpus)
    for free in range(len(count.counts) - 1, best, -1):
        if count.counts[free] > at.get(free, 0):
            return free
    return best


def shape_row(shape: Shape, total: int, free: int, largest: int, name: str | None = None) -> JSON:
    """One entry of a pool row's ``shapes`` (``name``: the pool file's, before the text)."""
    text = shape_text(shape, free, largest)
    return {
        "id": shape.id,
        "name": name,
        "kind": shape.kind,
        "resource": shape.resource,
        "model": shape.model,
        "memory_mib": shape.memory_mib,
        "equivalent": str(shape.equivalent),
        "equivalent_gpus": float(shape.equivalent),
        "isolates": shape.isolates,
        "total": total,
        "free": free,
        "largest_free": largest,
        "text": f"{name} \u00b7 {text}" if name else text,
    }


#: Initial letters whose names start with a vowel sound: "an A100", "an H100", "a T4".
_AN = "AEFHILMNORSX8"


def _article(word: str) -> str:
    return "an" if word[:1].upper() in _AN else "a"


def admitted_text(shape: Shape | None, n: int, gpu_type: str | None) -> str:
    """What a server got, in words for the pages, the CLI, the magics and the status item:
    ``MIG 1g.10gb of an A100-80G``, ``A10 shared ¼ (time-sliced)``, ``2 \u00d7 A100-80G``;
    ``no GPU`` for a server without one."""
    if n == 0:
        return "no GPU"
    model = (shape.model if shape is not None else None) or gpu_type or "GPU"
    if shape is None or shape.kind == WHOLE:
        return f"{n} \u00d7 {model}"
    if shape.kind == MIG:
        text = f"MIG {shape.profile} of {_article(model)} {model}"
        if shape.replicas > 1:
            text += f", shared {fraction_text(Fraction(1, shape.replicas))} (time-sliced)"
        return text
    how = {TIME_SLICING: "time-sliced", MPS: "MPS", HAMI: "HAMi"}.get(shape.kind, shape.kind)
    word = "slice" if shape.kind == HAMI else "shared"
    return f"{model} {word} {fraction_text(shape.equivalent)} ({how})"


def admitted_line(pool: str, has: str, over_quota: bool) -> str:
    """The admitted line of an admission's message: ``training-pool: admitted (MIG 1g.10gb of
    an A100-80G, within quota)``, with what the server has in :func:`admitted_text`'s words."""
    quota = "over quota, may be reclaimed" if over_quota else "within quota"
    return f"{pool}: admitted ({has}, {quota})"


def server_text(index: UsageIndex, server: ServerUsage) -> str:
    """What a running (or pending) server has, in :func:`admitted_text`'s words, with its
    node's GPU type: ``2 \u00d7 A100-80G``, ``MIG 1g.10gb of an A100-80G``; a shape its node
    does not offer (now), or a server not on a node yet, is named by its id."""
    gpu_type = index.node_gpu_type(server.node) if server.node else None
    if server.shape is None:
        return admitted_text(None, server.gpus, gpu_type)
    shape = index.node_shape(server.node, server.shape) if server.node else None
    if shape is None:
        return server.shape
    return admitted_text(shape, server.units or 1, gpu_type)
