"""Spawn options: what a user may choose, and checking what they chose.

The service describes what one user may choose (``GET api/v1/launch-options``); :class:`Catalog`
(from :mod:`jupyter_gpupool.core.words.launch_options`, shared with the notebook side) holds that
answer. :func:`parse_user_options` checks ``user_options`` — from the spawn form
(through :func:`form_to_user_options`) or from the REST API — against it, and returns
:class:`SpawnOptions` or raises :class:`~.errors.OptionsError` with a message for the user.
Pure: no I/O, so the spawner, the form and the tests share one set of rules.

``user_options`` (the same from the form and from scripts)::

    {"pools": ["training-pool", "inference-pool"], "gpus": 2, "gpu_type": "A100-80G",
     "queue": true}
    {"pools": [{"pool": "training-pool", "shape": "mig-3g.40gb"}, "inference-pool"], "gpus": 1}

``pools`` in priority order (empty or missing: the admin's default order for the user's groups),
each entry a pool name (whole GPUs) or ``{"pool": NAME, "shape": ID}`` with one of the shapes the
pool lists (:mod:`jupyter_gpupool.core.words.shape_choice`; a shape other than whole GPUs is
one unit per server, so ``gpus`` must then be 1),
``gpus`` a whole number (0: a CPU-only server), ``gpu_type`` optional, ``queue`` true to wait in
line when no pool can take the server now (missing: the spawner's ``queue_by_default``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.documents.whole_numbers import parse_whole
from ..core.documents.yaml_reader import unknown_key_message
from ..core.words.launch_options import (
    Catalog,
    GPUCountError,
    PoolChoice,
    gpu_count,
    gpus_text,
    or_words,
)
from ..core.words.shape_choice import (
    EntryError,
    entry_json,
    entry_words,
    read_entry,
    shape_ids,
)
from .errors import OptionsError

#: The keys of ``user_options`` this spawner reads.
OPTION_KEYS = ("pools", "gpus", "gpu_type", "queue")
#: Set by the spawner to show where a server runs (admin page, REST API); ignored as input.
POOL_KEY = "pool"
#: Pool names and GPU types are Kubernetes label values: at most 63 characters.
MAX_NAME_LENGTH = 63
#: Form field holding a pool's priority: ``priority.training-pool=1``.
PRIORITY_FIELD = "priority."
#: Form field holding the shape chosen in a pool: ``shape.training-pool=mig-3g.40gb`` (missing,
#: empty or ``whole``: whole GPUs).
SHAPE_FIELD = "shape."
#: Form field of the "wait in line" checkbox. The form sends it twice: a hidden ``off`` first,
#: then ``on`` when the box is ticked; a form without it (an older template) leaves the choice
#: to ``queue_by_default``.
QUEUE_FIELD = "queue"
#: What the form's ``queue`` field may say.
QUEUE_ON = ("on", "true", "1", "yes")
QUEUE_OFF = ("off", "false", "0", "no", "")


@dataclass(frozen=True)
class SpawnOptions:
    """Checked options: ``pools`` in priority order (empty: the default order); ``queue``: wait
    in line when no pool can take the server now."""

    pools: tuple[str, ...] = ()
    gpus: int = 0
    gpu_type: str | None = None
    queue: bool = False
    #: the shape chosen in each of ``pools`` (``None``: whole GPUs); empty: whole GPUs everywhere
    shapes: tuple[str | None, ...] = ()

    def shape_of(self, index: int) -> str | None:
        return self.shapes[index] if index < len(self.shapes) else None

    def choices(self) -> list[tuple[str, str | None]]:
        """``(pool, shape)`` in priority order, ``shape`` ``None`` for whole GPUs."""
        return [(pool, self.shape_of(i)) for i, pool in enumerate(self.pools)]

    def pool_entries(self) -> list[str | dict[str, str]]:
        """``pools`` as a request lists them: names, and ``{"pool", "shape"}`` for shapes."""
        return [entry_json(pool, shape) for pool, shape in self.choices()]

    def to_user_options(self) -> dict[str, Any]:
        return {
            "pools": self.pool_entries(),
            "gpus": self.gpus,
            "gpu_type": self.gpu_type,
            "queue": self.queue,
        }

    def describe(self) -> str:
        """``2 A100-80G GPUs in training-pool, inference-pool`` (for logs and messages)."""
        kind = f" {self.gpu_type}" if self.gpu_type and self.gpus else ""
        what = f"{self.gpus}{kind} GPU{'s' if self.gpus != 1 else ''}" if self.gpus else "no GPU"
        where = (
            ", ".join(entry_words(p, s) for p, s in self.choices())
            if self.pools
            else "the default pools"
        )
        line = ", waiting in line if need be" if self.queue and self.gpus else ""
        return f"{what} in {where}{line}"


Choice = tuple[str, str | None]


def with_choices(
    choices: Iterable[Choice], gpus: int = 0, gpu_type: str | None = None, queue: bool = False
) -> SpawnOptions:
    """:class:`SpawnOptions` for ``(pool, shape)`` entries, each once; ``shapes`` left empty when
    every entry is whole GPUs (so that options without shapes compare as they always did)."""
    unique = list(dict.fromkeys(choices))
    shapes = tuple(shape for _, shape in unique)
    return SpawnOptions(
        pools=tuple(pool for pool, _ in unique),
        gpus=gpus,
        gpu_type=gpu_type,
        queue=queue,
        shapes=shapes if any(shapes) else (),
    )


# --- words ---------------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A user's input quoted for a message, cut short when long."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= 40 else text[:37] + "...")


# --- the form ------------------------------------------------------------------------------------


def form_to_user_options(
    formdata: Mapping[str, Sequence[str]], *, strict: bool = True
) -> dict[str, Any]:
    """The spawn form's fields as ``user_options`` (checked afterwards by
    :func:`parse_user_options`).

    Each pool row has a ``priority.POOL`` field: a number (1 is tried first) or empty for a pool
    not to use; equal numbers keep the form's order. ``gpus`` and ``gpu_type`` are single fields;
    a ``gpus`` that is not a whole number is passed on as text so that the check can say so.
    ``queue`` (:data:`QUEUE_FIELD`) is the "wait in line" checkbox: ``on`` among its values is
    true, ``off`` alone false; without the field, ``queue`` is left out (``queue_by_default``).

    ``shape.POOL`` (:data:`SHAPE_FIELD`) is the shape chosen in a pool: an entry
    ``{"pool": POOL, "shape": ID}``, or the plain name for whole GPUs (empty, ``whole`` or no
    such field).

    ``strict=False`` reads a refused form as far as it goes, to show it again as the user left
    it: a priority that is not a number puts its pool after the numbered ones instead of
    raising, a ``gpus`` or ``queue`` that means nothing is left out.
    """
    ranked: list[tuple[float, int, str]] = []
    for order, (key, values) in enumerate(formdata.items()):
        if not key.startswith(PRIORITY_FIELD):
            continue
        pool = key[len(PRIORITY_FIELD) :]
        value = (values[0] if values else "").strip()
        if not value:
            continue
        priority = parse_whole(value.lstrip("+"))
        if priority is None or priority < 1:
            if not strict:
                ranked.append((float("inf"), order, pool))
                continue
            raise OptionsError(
                f"the priority of {pool} must be a whole number from 1 (tried first), "
                f"or empty not to use it; not {_shown(value)}"
            )
        ranked.append((priority, order, pool))
    options: dict[str, Any] = {
        "pools": [entry_json(pool, _form_shape(formdata, pool)) for _, _, pool in sorted(ranked)]
    }
    raw_gpus = (formdata.get("gpus") or [""])[0].strip()
    gpus = parse_whole(raw_gpus.lstrip("+"))
    if raw_gpus and (strict or gpus is not None):
        # a number too long to read is passed on as text, which the check refuses by name
        options["gpus"] = raw_gpus if gpus is None else gpus
    gpu_type = (formdata.get("gpu_type") or [""])[0].strip()
    options["gpu_type"] = gpu_type or None
    if QUEUE_FIELD in formdata:
        words = [v.strip().lower() for v in formdata[QUEUE_FIELD]]
        unknown = [
            v
            for v, w in zip(formdata[QUEUE_FIELD], words, strict=True)
            if w not in QUEUE_ON + QUEUE_OFF
        ]
        if not unknown:
            options["queue"] = any(w in QUEUE_ON for w in words)  # "on" comes after the "off"
        elif strict:
            options["queue"] = unknown[0]  # passed on as text: the check says what is wrong
    return options


def _form_shape(formdata: Mapping[str, Sequence[str]], pool: str) -> str | None:
    values = formdata.get(SHAPE_FIELD + pool) or [""]
    return values[0].strip() or None


def is_form_field(key: str) -> bool:
    """Whether a form field is one of ours (the rest belong to KubeSpawner's profiles)."""
    return key.startswith((PRIORITY_FIELD, SHAPE_FIELD)) or key in ("gpus", "gpu_type", QUEUE_FIELD)


# --- the check -----------------------------------------------------------------------------------


def _check_keys(raw: Mapping[str, Any], extra_keys: bool) -> None:
    if extra_keys:
        return  # KubeSpawner's profile options (``profile``, ...) come along; it checks them
    for key in raw:
        if key not in OPTION_KEYS and key != POOL_KEY:
            # "unknown option 'gpu'; did you mean 'gpus'?" or "... (allowed: gpu_type, ...)"
            raise OptionsError(
                unknown_key_message(str(key), OPTION_KEYS).replace("key", "option", 1)
            )


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise OptionsError(f"{what} must be a string, not {_shown(value)}")
    if not value:
        raise OptionsError(f"{what} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise OptionsError(f"{what} is longer than {MAX_NAME_LENGTH} characters: {_shown(value)}")
    return value


def _entry(value: Any, i: int) -> Choice:
    if not isinstance(value, Mapping):
        return _name(value, f"pools[{i}]"), None  # a name, as before shapes
    try:
        pool, shape = read_entry(value)
    except EntryError as e:
        raise OptionsError(f"pools[{i}]: {e}") from None
    return _name(pool, f"pools[{i}].pool"), None if shape is None else _name(
        shape, f"pools[{i}].shape"
    )


def _parse_pools(value: Any, catalog: Catalog, max_pools: int) -> list[Choice]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise OptionsError(
            f'pools must be a list of pool names, e.g. ["training-pool"] or [{{"pool": '
            f'"training-pool", "shape": "mig-3g.40gb"}}]; not {_shown(value)}'
        )
    if len(value) > max_pools:
        raise OptionsError(f"at most {max_pools} pools may be listed; you listed {len(value)}")
    choices = list(dict.fromkeys(_entry(v, i) for i, v in enumerate(value)))
    for name, shape in choices:
        pool = catalog.pool(name)
        if pool is None:
            if name in catalog.restricted:
                raise OptionsError(f"you may not use the pool {name}; ask an admin for access")
            open_ = ", ".join(catalog.names) or "none"
            raise OptionsError(f"there is no pool named {_shown(name)}; pools you may use: {open_}")
        if shape is not None and pool.shape(shape) is None:
            offered = ", ".join(shape_ids(pool.shapes)) or "none listed"
            raise OptionsError(f"{name} offers no shape {_shown(shape)}; its shapes: {offered}")
    return choices


def _check_shape_count(choices: Sequence[Choice], gpus: int) -> None:
    """A shape other than whole GPUs is one unit per server (one MIG instance, one shared
    replica, one HAMi slice): asking for more would not mean more GPU."""
    shaped = [entry_words(p, s) for p, s in choices if s is not None]
    if shaped and gpus > 1:
        raise OptionsError(
            f"a server gets one unit of a shape other than whole GPUs, so {or_words(shaped)} "
            f"needs gpus 1, not {gpus}: choose 1 GPU, or whole GPUs for more than one"
        )


def _parse_gpus(value: Any, default: int, maximum: int) -> int:
    if value is None:
        return default
    try:
        # JSON numbers written 2.0 are whole numbers here (scripts send them)
        return gpu_count(value, maximum, whole_floats=True, shown=_shown)
    except GPUCountError as e:
        raise OptionsError(str(e)) from None


def _parse_queue(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise OptionsError(
            "queue must be true (wait in line when no pool can take the server now) or false, "
            f"not {_shown(value)}"
        )
    return value


def _shape_fits(pool: PoolChoice, shape: str, gpu_type: str | None) -> bool:
    """Whether the pool offers ``shape`` (on a GPU of ``gpu_type``, when one is asked for)."""
    return any(s.id == shape and (not gpu_type or s.model == gpu_type) for s in pool.shapes)


def _check_against_pools(
    choices: Sequence[tuple[PoolChoice, str | None]], gpus: int, gpu_type: str | None
) -> None:
    """Refuse what no chosen pool could ever take (a pool merely busy now is skipped later).
    An entry with a shape can take its one unit when its pool offers the shape."""
    if gpus and any(s is not None and _shape_fits(p, s, gpu_type) for p, s in choices):
        return
    pools = [p for p, s in choices if s is None]
    if not pools and choices and gpus and gpu_type:
        raise OptionsError(f"no shape you chose is on a GPU of type {gpu_type}")
    if not pools:
        return
    if gpus and all(p.gpu_ceiling == 0 for p in pools):
        names = or_words([p.name for p in pools])
        parts = [f"{p.name}: {', '.join(shape_ids(p.shapes))}" for p in pools if p.offers_parts]
        if parts:
            raise OptionsError(
                f"{names} {'has' if len(pools) == 1 else 'have'} no whole GPUs: choose one of "
                f"the shapes offered ({'; '.join(parts)}) with 1 GPU, or a pool with whole GPUs"
            )
        raise OptionsError(
            f"{names} {'has' if len(pools) == 1 else 'have'} no GPUs: "
            "choose 0 GPUs for a CPU-only server, or a pool with GPUs"
        )
    if not any(p.allows_count(gpus) for p in pools):
        each = "; ".join(f"{p.name}: {p.limits_text()}" for p in pools)
        raise OptionsError(f"no pool you chose allows a server with {gpus_text(gpus)} ({each})")
    if gpu_type and gpus:
        with_type = [p for p in pools if gpu_type in p.gpu_types]
        if not with_type:
            types = sorted({t for p in pools for t in p.gpu_types})
            have = f" (they have {', '.join(types)})" if types else ""
            raise OptionsError(f"no pool you chose has GPU type {gpu_type}{have}")
        if not any(p.allows_count(gpus) for p in with_type):
            raise OptionsError(
                f"no pool you chose with GPU type {gpu_type} allows a server with {gpus_text(gpus)}"
            )


def parse_user_options(
    raw: Mapping[str, Any] | None,
    catalog: Catalog,
    *,
    max_pools: int = 8,
    default_gpus: int = 0,
    default_queue: bool = False,
    extra_keys: bool = False,
) -> SpawnOptions:
    """Check ``user_options`` against what the user may choose; raise
    :class:`~.errors.OptionsError` with a message for the user when they cannot be used.
    ``default_queue``: ``queue`` when they don't say (``queue_by_default``).

    ``extra_keys``: let other keys through (KubeSpawner's ``profile_list`` options, which it
    checks itself); otherwise an unknown key is refused, naming the likely typo.
    """
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise OptionsError(f"user_options must be an object, not {_shown(raw)}")
    _check_keys(raw, extra_keys)
    choices = _parse_pools(raw.get("pools"), catalog, max_pools)
    gpus = _parse_gpus(raw.get("gpus"), default_gpus, catalog.max_gpus)
    if not gpus:  # a CPU-only server: shapes mean nothing (the service ignores them too)
        choices = [(pool, None) for pool, _ in choices]
    _check_shape_count(choices, gpus)
    gpu_type = raw.get("gpu_type")
    gpu_type = None if gpu_type in (None, "") else _name(gpu_type, "gpu_type")
    queue = _parse_queue(raw.get("queue"), default_queue)
    effective = choices or [(p, None) for p in default_order(catalog)]
    _check_against_pools(
        [(c, shape) for pool, shape in effective if (c := catalog.pool(pool)) is not None],
        gpus,
        gpu_type,
    )
    return with_choices(choices, gpus, gpu_type if gpus else None, queue)


def default_options(
    last: Mapping[str, Any] | None,
    catalog: Catalog,
    *,
    max_pools: int = 8,
    default_gpus: int = 0,
    default_queue: bool = False,
) -> SpawnOptions:
    """What the spawn form starts with: the user's last choice (the last start's, or a refused
    form's) as the user left it, else the admin's default order with ``default_gpus`` (and
    ``default_queue`` for the "wait in line" box, also when the last choice does not say).

    The last choice is kept even when it cannot be used as it is (the form then says why when
    it is sent): only pools the user may no longer choose, and values that are not a pool name
    or a count at all, are left out (when no pool chosen is left, the default order is ticked).
    No pool chosen stays no pool chosen: the form says that the default order will be used.
    """
    if not last or not isinstance(last, Mapping):
        first = first_gpus(catalog, default_gpus)
        return SpawnOptions(default_pools_for(catalog, first), first, None, default_queue)
    raw_pools = last.get("pools")
    names = raw_pools if isinstance(raw_pools, Sequence) and not isinstance(raw_pools, str) else ()
    choices = [c for c in map(_readable, names) if c is not None and catalog.pool(c[0])]
    gpus = last.get("gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        gpus = first_gpus(catalog, default_gpus)
    if names and not choices:  # every pool chosen has gone: nothing of it to keep
        choices = [(p, None) for p in default_pools_for(catalog, gpus)]
    gpu_type = last.get("gpu_type")
    queue = last.get("queue")
    return with_choices(
        list(dict.fromkeys(choices))[:max_pools],
        gpus,
        gpu_type if isinstance(gpu_type, str) and gpu_type else None,
        queue if isinstance(queue, bool) else default_queue,
    )


def _readable(value: Any) -> Choice | None:
    """A last choice's pool entry, or ``None`` for one that means nothing."""
    try:
        pool, shape = read_entry(value)
    except EntryError:
        return None
    return (pool, shape) if isinstance(pool, str) else None


def default_order(catalog: Catalog) -> tuple[str, ...]:
    """The admin's default order for the user's groups, as far as the user may use its pools:
    what a start with no pools tries."""
    return tuple(p for p in catalog.default_pools if catalog.pool(p) is not None)


def _takes(pool: PoolChoice, gpus: int) -> bool:
    """Whether ``pool`` could take a server with ``gpus`` GPUs for this user: its limits and
    nodes allow the count, and (with GPUs) the user's quota there has room for them now; or
    one part of a GPU (a MIG instance...) where the pool offers them."""
    if gpus == 1 and pool.offers_parts:
        return True
    if not pool.allows_count(gpus):
        return False
    return gpus == 0 or pool.quota_available is None or pool.quota_available >= gpus


def first_gpus(catalog: Catalog, default_gpus: int) -> int:
    """The GPU count a first start offers: ``default_gpus``, lowered to the most some pool of
    the default order takes (0 when none of them has a GPU for the user: a CPU-only server)."""
    order = [p for p in map(catalog.pool, default_order(catalog)) if p is not None]
    if not order:
        return default_gpus
    gpus = default_gpus
    while gpus > 0 and not any(_takes(p, gpus) for p in order):
        gpus -= 1
    return gpus


def default_pools_for(catalog: Catalog, gpus: int) -> tuple[str, ...]:
    """The pools ticked on a first start: those of the default order that could take
    ``gpus`` GPUs (never a pool without GPUs for a GPU server); the whole order when none
    could, so that the form says why when it is sent."""
    order = default_order(catalog)
    fitting = tuple(p for p in order if (c := catalog.pool(p)) is not None and _takes(c, gpus))
    return fitting or order


def order_rows(catalog: Catalog, chosen: Iterable[str]) -> list[tuple[PoolChoice, int | None]]:
    """The form's pool rows: chosen pools first in priority order (numbered from 1), then the
    others in the service's order (no number). A pool chosen twice (with two shapes) is one
    row, at its first place."""
    chosen = list(dict.fromkeys(p for p in chosen if catalog.pool(p) is not None))
    rows: list[tuple[PoolChoice, int | None]] = [
        (pool, n) for n, pool in enumerate((catalog.pool(p) for p in chosen), 1) if pool
    ]
    rows += [(p, None) for p in catalog.pools if p.name not in chosen]
    return rows
