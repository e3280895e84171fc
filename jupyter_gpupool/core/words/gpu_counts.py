"""How many GPUs a node, a pool or a quota has, counted alike on every surface.

Every surface (the API's rows, the CLI's tables, the pages, the magics, the launch panel, the
lab's panel) counts GPUs in **GPU-equivalents**: physical GPUs, of which a MIG 1g.10gb of an
A100 is 1/7 and one replica of a GPU time-sliced in 4 is 1/4
(:attr:`~..usage.shapes.Shape.equivalent`). The device plugin's own count is not that: on a
time-sliced node ``nvidia.com/gpu`` counts GPUs x replicas (4 for one A10 in 4), and on a MIG
node of the mixed strategy it is 0, the instances being ``nvidia.com/mig-<profile>``. So a
node's and a pool's ``gpu_total`` are the sum of their shapes' GPU-equivalents, and the whole
GPUs and the parts are said beside them (:func:`parts_text`: ``16 whole + 1 in MIG instances:
3 of 4 instances free``).

What one server has is said by :func:`~.shape_rows.admitted_text` (``MIG 1g.10gb of an
A100-80G``); this module counts.

Pure: values in, values and strings out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..usage.amounts import Amount, amount_number, amount_words, whole_if_whole
from ..usage.rows import GPUPart
from ..usage.shapes import HAMI, MIG, MPS, TIME_SLICING, WHOLE

JSON = dict[str, Any]

__all__ = [
    "count_text",
    "counts_row",
    "equivalents",
    "parts_json",
    "parts_text",
    "whole_gpus",
]


def equivalents(parts: Iterable[GPUPart]) -> tuple[Amount, Amount, Amount]:
    """``(total, used, free)`` in GPU-equivalents, exact (``free`` is never below 0)."""
    total: Amount = 0
    used: Amount = 0
    for p in parts:
        total += p.equivalents
        used += p.equivalents_used
    free = total - used
    return whole_if_whole(total), whole_if_whole(used), whole_if_whole(free if free > 0 else 0)


def count_text(value: Amount | float | None) -> str:
    """A count of GPU-equivalents for a table's cell: ``16``, ``16.86``, ``0.14`` (two
    decimals at most, as sentences say them); ``0`` for None."""
    if value is None:
        return "0"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.2f}".rstrip("0")
    return amount_words(value)


#: The word for each kind's units, and how its part is named.
_UNITS = {MIG: "instances", TIME_SLICING: "replicas", MPS: "replicas", HAMI: "slices"}


def _part_name(p: GPUPart) -> str:
    n = amount_words(p.equivalents)
    if p.kind == WHOLE:
        return f"{p.units} whole"
    if p.kind == MIG:
        return f"{n} in MIG instances"
    if p.kind == TIME_SLICING:
        return f"{n} time-sliced in {p.replicas}"
    if p.kind == MPS:
        return f"{n} shared by MPS in {p.replicas}"
    return f"{n} in HAMi slices of {p.replicas}"


def parts_text(parts: Iterable[GPUPart]) -> str:
    """The GPUs by kind, and the free units of the parts: ``16 whole + 1 in MIG instances: 3
    of 4 instances free``; ``1 time-sliced in 4: 3 of 4 replicas free``; ``8 whole`` (the free
    whole GPUs are the count's own); ``""`` without GPUs."""
    parts = [p for p in parts if p.units]
    if not parts:
        return ""
    names = " + ".join(_part_name(p) for p in parts)
    free = [
        f"{p.units - p.units_used} of {p.units} {_UNITS.get(p.kind, 'units')} free"
        for p in parts
        if p.kind != WHOLE
    ]
    return f"{names}: {', '.join(free)}" if free else names


def parts_json(parts: Iterable[GPUPart]) -> list[JSON]:
    """The parts for the API: each kind's units (used, free) and GPU-equivalents."""
    return [
        {
            "kind": p.kind,
            "replicas": p.replicas,
            "units": p.units,
            "units_used": p.units_used,
            "units_free": max(0, p.units - p.units_used),
            "gpu_equivalents": amount_number(p.equivalents),
            "gpu_equivalents_used": amount_number(p.equivalents_used),
        }
        for p in parts
    ]


def whole_gpus(parts: Iterable[GPUPart]) -> JSON:
    """``{"total", "used", "free"}`` of the whole GPUs among the parts."""
    total = used = 0
    for p in parts:
        if p.kind == WHOLE:
            total += p.units
            used += p.units_used
    return {"total": total, "used": used, "free": max(0, total - used)}


def counts_row(parts: Iterable[GPUPart]) -> JSON:
    """The count fields of a node's or a pool's row in ``GET api/v1/pools`` and ``nodes``:
    ``gpu_total``, ``gpu_used``, ``gpu_free`` in GPU-equivalents (an ``int`` when whole, else a
    float of 3 decimals), ``whole_gpus`` (``{"total", "used", "free"}``: whole GPUs only, as
    admission of whole GPUs counts them), ``gpu_parts`` (:func:`parts_json`) and ``gpus_text``
    (:func:`parts_text`)."""
    parts = list(parts)
    total, used, free = equivalents(parts)
    return {
        "gpu_total": amount_number(total),
        "gpu_used": amount_number(used),
        "gpu_free": amount_number(free),
        "whole_gpus": whole_gpus(parts),
        "gpu_parts": parts_json(parts),
        "gpus_text": parts_text(parts),
    }
