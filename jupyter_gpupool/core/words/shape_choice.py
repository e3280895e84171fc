"""Choosing a shape: the shapes a pool offers as its launch options list them, and a
pool entry of a request with the shape chosen in it.

A request's ``pools`` (``user_options``, ``POST api/v1/admissions``, ``%gpupool launch``) list
entries in priority order, each a pool name (whole GPUs, as before shapes) or an object
``{"pool": NAME, "shape": ID}``; ``"shape": "whole"`` is whole GPUs too. Here an entry is the
pair ``(pool, shape)`` with ``shape`` ``None`` for whole GPUs, the core's
``AdmissionRequest.choices()`` pairs (docs/shapes.md). :func:`read_entry` reads one,
:func:`entry_json` writes one back (a plain name for whole GPUs, so that old readers keep
reading it), :func:`entry_words` says it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENTRY_SEPARATOR",
    "WHOLE",
    "EntryError",
    "ShapeChoice",
    "default_shape",
    "entry_json",
    "entry_words",
    "kind_words",
    "read_entry",
    "shape_ids",
    "split_entry",
]

#: The id of whole GPUs (core/usage/shapes.py's ``WHOLE`` kind has this id).
WHOLE = "whole"
#: ``training-pool:mig-3g.40gb`` in a pool list written as text (the magics). Neither a pool name
#: (a Kubernetes label value) nor a shape id may hold a colon.
ENTRY_SEPARATOR = ":"

Entry = tuple[str, str | None]


class EntryError(ValueError):
    """A pool entry that is neither a name nor ``{"pool": NAME, "shape": ID}``."""


@dataclass(frozen=True)
class ShapeChoice:
    """One shape of a pool as the service lists it in the pool's row (``shapes``): what a user
    picks on the spawn form. ``text`` is the service's line ("MIG 3g.40gb: 2 free"),
    ``isolates`` what it keeps apart from other servers, in words."""

    id: str
    kind: str = WHOLE
    model: str | None = None
    text: str = ""
    isolates: str = ""
    equivalent: str = "1"
    total: int = 0
    free: int = 0
    largest_free: int = 0
    #: no node offers it now, a MIG re-cut would ("MIG 1g.10gb: 0 free now, more in about 2
    #: min"); ``ready_in_s``: seconds until one should bring it
    recut: bool = False
    ready_in_s: float | None = None

    @property
    def whole(self) -> bool:
        return self.id == WHOLE

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> ShapeChoice:
        return cls(
            id=str(row["id"]),
            kind=str(row.get("kind") or WHOLE),
            model=None if row.get("model") is None else str(row["model"]),
            text=str(row.get("text") or row["id"]),
            isolates=str(row.get("isolates") or ""),
            equivalent=str(row.get("equivalent") or "1"),
            total=int(row.get("total") or 0),
            free=int(row.get("free") or 0),
            largest_free=int(row.get("largest_free") or 0),
            recut=bool(row.get("recut")),
            ready_in_s=None if row.get("ready_in_s") is None else float(row["ready_in_s"]),
        )


#: Each kind of shape in words (core/usage/shapes.py's kinds).
KIND_WORDS = {
    WHOLE: "a whole GPU",
    "mig": "a MIG instance",
    "shared-time-slicing": "a time-sliced GPU",
    "shared-mps": "an MPS share",
    "hami": "a HAMi slice",
}


def kind_words(kind: str) -> str:
    """``a MIG instance``, ``a time-sliced GPU``... (the kind itself when unknown)."""
    return KIND_WORDS.get(kind, kind)


def shape_ids(shapes: Iterable[ShapeChoice]) -> list[str]:
    """The ids of ``shapes`` once each, in the service's order (the same id may come from two GPU
    models: the A100's and the H100's ``whole``)."""
    return list(dict.fromkeys(s.id for s in shapes))


def default_shape(shapes: Sequence[ShapeChoice]) -> str | None:
    """The shape a pool entry starts with on the form: whole GPUs where the pool has them, else
    its first shape; ``None`` (whole) when it lists none."""
    ids = shape_ids(shapes)
    if not ids or WHOLE in ids:
        return None
    return ids[0]


def _shape_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise EntryError(f"a shape must be a shape id such as 'mig-1g.10gb', not {value!r}")
    value = value.strip()
    return None if value == WHOLE else value


def read_entry(value: Any) -> Entry:
    """``"training-pool"`` → ``("training-pool", None)``; ``{"pool": "training-pool", "shape":
    "mig-3g.40gb"}`` → ``("training-pool", "mig-3g.40gb")``; :class:`EntryError` otherwise. The
    pool name itself is checked by the caller (it says which entry, and what pools there are)."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in ("pool", "shape"))
        if unknown:
            raise EntryError(f'a pool entry has "pool" and "shape" only, not {", ".join(unknown)}')
        if "pool" not in value:
            raise EntryError('a pool entry written as an object needs its "pool"')
        return value["pool"], _shape_id(value.get("shape"))
    raise EntryError(
        f'a pool entry is a pool name or {{"pool": NAME, "shape": ID}}, not {type(value).__name__}'
    )


def split_entry(text: str) -> Entry:
    """``training-pool:mig-3g.40gb`` → ``("training-pool", "mig-3g.40gb")``,
    ``inference-pool`` → ``("inference-pool", None)`` (the magics' pool lists)."""
    pool, sep, shape = text.partition(ENTRY_SEPARATOR)
    pool, shape = pool.strip(), shape.strip()
    if not pool:  # an empty shape after the colon: _shape_id says so
        raise EntryError(f"{text!r} is not POOL or POOL{ENTRY_SEPARATOR}SHAPE")
    return pool, _shape_id(shape) if sep else None


def entry_json(pool: str, shape: str | None) -> str | dict[str, str]:
    """An entry as a request lists it: the plain name for whole GPUs, else the object."""
    if shape is None or shape == WHOLE:
        return pool
    return {"pool": pool, "shape": shape}


def entry_words(pool: str, shape: str | None) -> str:
    """``training-pool``; ``mig-3g.40gb in training-pool``."""
    return pool if shape is None or shape == WHOLE else f"{shape} in {pool}"
