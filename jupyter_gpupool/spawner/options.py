"""Spawn options: what a user may choose, and checking what they chose.

The service describes what one user may choose (``GET api/v1/launch-options``); :class:`Catalog`
holds that answer. :func:`parse_user_options` checks ``user_options`` — from the spawn form
(through :func:`form_to_user_options`) or from the REST API — against it, and returns
:class:`SpawnOptions` or raises :class:`~.errors.OptionsError` with a message for the user.
Pure: no I/O, so the spawner, the form and the tests share one set of rules.

``user_options`` (the same from the form and from scripts)::

    {"pools": ["training-pool", "inference-pool"], "gpus": 2, "gpu_type": "A100-80G"}

``pools`` in priority order (empty or missing: the admin's default order for the user's groups),
``gpus`` a whole number (0: a CPU-only server), ``gpu_type`` optional.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.yamldoc import unknown_key_message
from .errors import OptionsError

#: The keys of ``user_options`` this spawner reads.
OPTION_KEYS = ("pools", "gpus", "gpu_type")
#: Set by the spawner to show where a server runs (admin page, REST API); ignored as input.
POOL_KEY = "pool"
#: Pool names and GPU types are Kubernetes label values: at most 63 characters.
MAX_NAME_LENGTH = 63
#: Form field holding a pool's priority: ``priority.training-pool=1``.
PRIORITY_FIELD = "priority."


@dataclass(frozen=True)
class PoolChoice:
    """One pool a user may choose, as the service reports it now."""

    name: str
    description: str = ""
    status: str = "active"  # the service's: active | degraded | unavailable | empty
    gpu_types: tuple[str, ...] = ()
    gpu_total: int = 0
    gpu_available: int = 0
    largest_free_block: int = 0
    largest_node_gpus: int = 0
    node_count: int = 0
    schedulable_nodes: int = 0
    min_gpus: int = 0
    max_gpus: int | None = None
    allowed_gpus: tuple[int, ...] = ()
    quota_managed: bool = False
    borrowing: bool = False
    within_quota: int | None = None  # most GPUs admitted within quota now (None: no quota)
    quota_available: int | None = None  # most GPUs admitted at all, borrowing included

    @property
    def gpu_ceiling(self) -> int:
        """The most GPUs one server may ever get here: limits and the biggest node."""
        top = self.largest_node_gpus
        if self.max_gpus is not None:
            top = min(top, self.max_gpus)
        if self.allowed_gpus:
            top = min(top, max(self.allowed_gpus))
        return top

    def allows_count(self, gpus: int) -> bool:
        """Whether the pool's limits and nodes allow a server with ``gpus`` GPUs at all (the
        service's validation, plus: no node here is that big)."""
        if gpus < self.min_gpus or gpus > self.largest_node_gpus:
            return False
        if self.max_gpus is not None and gpus > self.max_gpus:
            return False
        return not self.allowed_gpus or gpus in self.allowed_gpus

    def limits_text(self) -> str:
        """``1, 2, 4 or 8 GPUs``, ``up to 8 GPUs``, ``no GPUs`` — for messages."""
        if self.gpu_ceiling == 0:
            return "no GPUs"
        if self.allowed_gpus:
            counts = [str(n) for n in self.allowed_gpus if n <= self.gpu_ceiling]
            return _or_words(counts) + " GPUs"
        low = f"{self.min_gpus} to " if self.min_gpus else "up to "
        return f"{low}{_gpus(self.gpu_ceiling)}"

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PoolChoice:
        limits = row.get("limits") or {}
        quota = row.get("quota") or {}
        return cls(
            name=str(row["name"]),
            description=str(row.get("description") or ""),
            status=str(row.get("status") or "active"),
            gpu_types=tuple(str(t) for t in row.get("gpu_types") or ()),
            gpu_total=int(row.get("gpu_total") or 0),
            gpu_available=int(row.get("gpu_available") or 0),
            largest_free_block=int(row.get("largest_free_block") or 0),
            largest_node_gpus=int(row.get("largest_node_gpus") or 0),
            node_count=int(row.get("node_count") or 0),
            schedulable_nodes=int(row.get("schedulable_nodes") or 0),
            min_gpus=int(limits.get("min_gpus") or 0),
            max_gpus=None if limits.get("max_gpus") is None else int(limits["max_gpus"]),
            allowed_gpus=tuple(int(n) for n in limits.get("allowed_gpus") or ()),
            quota_managed=bool(quota.get("managed")),
            borrowing=bool(quota.get("borrowing")),
            within_quota=_opt_int(quota.get("within_quota")),
            quota_available=_opt_int(quota.get("available")),
        )


@dataclass(frozen=True)
class Catalog:
    """What one user may choose: the pools open to them, and their default order."""

    pools: tuple[PoolChoice, ...] = ()
    default_pools: tuple[str, ...] = ()
    restricted: frozenset[str] = frozenset()  # pools that exist but are not open to this user
    max_gpus: int = 1024
    _by_name: dict[str, PoolChoice] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update((p.name, p) for p in self.pools)

    def pool(self, name: str) -> PoolChoice | None:
        return self._by_name.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pools)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Catalog:
        """From the service's ``GET api/v1/launch-options`` answer."""
        return cls(
            pools=tuple(PoolChoice.from_json(r) for r in data.get("pools") or ()),
            default_pools=tuple(str(p) for p in data.get("default_pools") or ()),
            restricted=frozenset(str(p) for p in data.get("restricted_pools") or ()),
            max_gpus=int(data.get("max_gpus") or 1024),
        )


@dataclass(frozen=True)
class SpawnOptions:
    """Checked options: ``pools`` in priority order (empty: the default order)."""

    pools: tuple[str, ...] = ()
    gpus: int = 0
    gpu_type: str | None = None

    def to_user_options(self) -> dict[str, Any]:
        return {"pools": list(self.pools), "gpus": self.gpus, "gpu_type": self.gpu_type}

    def describe(self) -> str:
        """``2 A100-80G GPUs in training-pool, inference-pool`` (for logs and messages)."""
        kind = f" {self.gpu_type}" if self.gpu_type and self.gpus else ""
        what = f"{self.gpus}{kind} GPU{'s' if self.gpus != 1 else ''}" if self.gpus else "no GPU"
        where = ", ".join(self.pools) if self.pools else "the default pools"
        return f"{what} in {where}"


# --- words ---------------------------------------------------------------------------------------


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _or_words(words: Sequence[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _shown(value: Any) -> str:
    """A user's input quoted for a message, cut short when long."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= 40 else text[:37] + "...")


# --- the form ------------------------------------------------------------------------------------

_WHOLE = re.compile(r"^\s*\+?\d+\s*$")


def form_to_user_options(
    formdata: Mapping[str, Sequence[str]], *, strict: bool = True
) -> dict[str, Any]:
    """The spawn form's fields as ``user_options`` (checked afterwards by
    :func:`parse_user_options`).

    Each pool row has a ``priority.POOL`` field: a number (1 is tried first) or empty for a pool
    not to use; equal numbers keep the form's order. ``gpus`` and ``gpu_type`` are single fields;
    a ``gpus`` that is not a whole number is passed on as text so that the check can say so.

    ``strict=False`` reads a refused form as far as it goes, to show it again as the user left
    it: a priority that is not a number puts its pool after the numbered ones instead of
    raising, a ``gpus`` that is not a whole number is left out.
    """
    ranked: list[tuple[float, int, str]] = []
    for order, (key, values) in enumerate(formdata.items()):
        if not key.startswith(PRIORITY_FIELD):
            continue
        pool = key[len(PRIORITY_FIELD) :]
        value = (values[0] if values else "").strip()
        if not value:
            continue
        if not _WHOLE.match(value) or int(value) < 1:
            if not strict:
                ranked.append((float("inf"), order, pool))
                continue
            raise OptionsError(
                f"the priority of {pool} must be a whole number from 1 (tried first), "
                f"or empty not to use it; not {_shown(value)}"
            )
        ranked.append((int(value), order, pool))
    options: dict[str, Any] = {"pools": [pool for _, _, pool in sorted(ranked)]}
    raw_gpus = (formdata.get("gpus") or [""])[0].strip()
    if raw_gpus and (strict or _WHOLE.match(raw_gpus)):
        options["gpus"] = int(raw_gpus) if _WHOLE.match(raw_gpus) else raw_gpus
    gpu_type = (formdata.get("gpu_type") or [""])[0].strip()
    options["gpu_type"] = gpu_type or None
    return options


def is_form_field(key: str) -> bool:
    """Whether a form field is one of ours (the rest belong to KubeSpawner's profiles)."""
    return key.startswith(PRIORITY_FIELD) or key in ("gpus", "gpu_type")


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


def _parse_pools(value: Any, catalog: Catalog, max_pools: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise OptionsError(
            f'pools must be a list of pool names, e.g. ["training-pool"]; not {_shown(value)}'
        )
    if len(value) > max_pools:
        raise OptionsError(f"at most {max_pools} pools may be listed; you listed {len(value)}")
    names = tuple(dict.fromkeys(_name(v, f"pools[{i}]") for i, v in enumerate(value)))
    for name in names:
        if catalog.pool(name) is not None:
            continue
        if name in catalog.restricted:
            raise OptionsError(f"you may not use the pool {name}; ask an admin for access")
        open_ = ", ".join(catalog.names) or "none"
        raise OptionsError(f"there is no pool named {_shown(name)}; pools you may use: {open_}")
    return names


def _parse_gpus(value: Any, default: int, maximum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise OptionsError(f"gpus must be a whole number of GPUs, not {_shown(value)}")
    if value < 0:
        raise OptionsError(f"gpus must not be negative, not {value}")
    if value > maximum:
        raise OptionsError(f"gpus is {value}; one server may have at most {_gpus(maximum)}")
    return value


def _check_against_pools(pools: Sequence[PoolChoice], gpus: int, gpu_type: str | None) -> None:
    """Refuse what no chosen pool could ever take (a pool merely busy now is skipped later)."""
    if not pools:
        return
    if gpus and all(p.gpu_ceiling == 0 for p in pools):
        names = _or_words([p.name for p in pools])
        raise OptionsError(
            f"{names} {'has' if len(pools) == 1 else 'have'} no GPUs: "
            "choose 0 GPUs for a CPU-only server, or a pool with GPUs"
        )
    if not any(p.allows_count(gpus) for p in pools):
        each = "; ".join(f"{p.name}: {p.limits_text()}" for p in pools)
        raise OptionsError(f"no pool you chose allows a server with {_gpus(gpus)} ({each})")
    if gpu_type and gpus:
        with_type = [p for p in pools if gpu_type in p.gpu_types]
        if not with_type:
            types = sorted({t for p in pools for t in p.gpu_types})
            have = f" (they have {', '.join(types)})" if types else ""
            raise OptionsError(f"no pool you chose has GPU type {gpu_type}{have}")
        if not any(p.allows_count(gpus) for p in with_type):
            raise OptionsError(
                f"no pool you chose with GPU type {gpu_type} allows a server with {_gpus(gpus)}"
            )


def parse_user_options(
    raw: Mapping[str, Any] | None,
    catalog: Catalog,
    *,
    max_pools: int = 8,
    default_gpus: int = 0,
    extra_keys: bool = False,
) -> SpawnOptions:
    """Check ``user_options`` against what the user may choose; raise
    :class:`~.errors.OptionsError` with a message for the user when they cannot be used.

    ``extra_keys``: let other keys through (KubeSpawner's ``profile_list`` options, which it
    checks itself); otherwise an unknown key is refused, naming the likely typo.
    """
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise OptionsError(f"user_options must be an object, not {_shown(raw)}")
    _check_keys(raw, extra_keys)
    pools = _parse_pools(raw.get("pools"), catalog, max_pools)
    gpus = _parse_gpus(raw.get("gpus"), default_gpus, catalog.max_gpus)
    gpu_type = raw.get("gpu_type")
    gpu_type = None if gpu_type in (None, "") else _name(gpu_type, "gpu_type")
    effective = pools or tuple(p for p in catalog.default_pools if catalog.pool(p) is not None)
    _check_against_pools([p for p in map(catalog.pool, effective) if p is not None], gpus, gpu_type)
    return SpawnOptions(pools=pools, gpus=gpus, gpu_type=gpu_type if gpus else None)


def default_options(
    last: Mapping[str, Any] | None,
    catalog: Catalog,
    *,
    max_pools: int = 8,
    default_gpus: int = 0,
) -> SpawnOptions:
    """What the spawn form starts with: the user's last choice (the last start's, or a refused
    form's) as the user left it, else the admin's default order with ``default_gpus``.

    The last choice is kept even when it cannot be used as it is (the form then says why when
    it is sent): only pools the user may no longer choose, and values that are not a pool name
    or a count at all, are left out (when no pool chosen is left, the default order is ticked).
    No pool chosen stays no pool chosen: the form says that the default order will be used.
    """
    if not last or not isinstance(last, Mapping):
        return SpawnOptions(default_order(catalog), default_gpus, None)
    raw_pools = last.get("pools")
    names = raw_pools if isinstance(raw_pools, Sequence) and not isinstance(raw_pools, str) else ()
    pools = tuple(dict.fromkeys(p for p in names if isinstance(p, str) and catalog.pool(p)))
    if names and not pools:
        pools = default_order(catalog)  # every pool chosen has gone: nothing of it to keep
    gpus = last.get("gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        gpus = default_gpus
    gpu_type = last.get("gpu_type")
    return SpawnOptions(
        pools[:max_pools], gpus, gpu_type if isinstance(gpu_type, str) and gpu_type else None
    )


def default_order(catalog: Catalog) -> tuple[str, ...]:
    """The admin's default order for the user's groups, as far as the user may use its pools:
    what a start with no pools tries."""
    return tuple(p for p in catalog.default_pools if catalog.pool(p) is not None)


def order_rows(catalog: Catalog, chosen: Iterable[str]) -> list[tuple[PoolChoice, int | None]]:
    """The form's pool rows: chosen pools first in priority order (numbered from 1), then the
    others in the service's order (no number)."""
    chosen = [p for p in chosen if catalog.pool(p) is not None]
    rows: list[tuple[PoolChoice, int | None]] = [
        (pool, n) for n, pool in enumerate((catalog.pool(p) for p in chosen), 1) if pool
    ]
    rows += [(p, None) for p in catalog.pools if p.name not in chosen]
    return rows
