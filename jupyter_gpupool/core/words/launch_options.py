"""What a user may choose when launching a server, how each choice reads, and what a GPU count is.

The service describes what one user may choose (``GET api/v1/launch-options``); :class:`Catalog`
holds that answer, one :class:`PoolChoice` per pool. The spawn form, the ``%gpupool`` magics and
the ``LaunchPanel`` widget all show pools from it, so the words for a pool's status and the
user's quota (:func:`pool_status`, :func:`quota_text`) and the GPU counts offered
(:func:`gpu_choices`) live here, once. :func:`gpu_count` is the one rule for a GPU count that both
the service's request bodies and the spawner's ``user_options`` apply.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..accounting.budgets import hours_text, when_text, window_words
from ..usage.amounts import Amount, parse_amount, whole_if_whole
from .gpu_counts import count_text
from .shape_choice import ShapeChoice

__all__ = [
    "MAX_GPU_CHOICES",
    "BudgetLine",
    "Catalog",
    "GPUCountError",
    "PoolChoice",
    "budget_text",
    "gpu_choices",
    "gpu_count",
    "gpus_text",
    "or_words",
    "pool_status",
    "quota_text",
]

#: More choices than this and a GPU count is asked for as a number rather than picked from a list.
MAX_GPU_CHOICES = 64


# --- words ---------------------------------------------------------------------------------------


def gpus_text(n: int) -> str:
    """``1 GPU``, ``4 GPUs``."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def or_words(words: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


# --- the catalog ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BookedChoice:
    """A booking in force in a pool that the user is a member of: ``free`` of its ``gpus``
    units of ``shape`` are left until ``until_text`` (the booking's own clock)."""

    name: str
    shape: str
    gpus: int
    free: int
    until_text: str
    timezone: str = "UTC"

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> BookedChoice:
        return cls(
            name=str(row["name"]),
            shape=str(row.get("shape") or "whole"),
            gpus=int(row.get("gpus") or 0),
            free=int(row.get("free") or 0),
            until_text=str(row.get("until_text") or ""),
            timezone=str(row.get("timezone") or "UTC"),
        )


def booked_text(b: BookedChoice) -> str:
    """``booked for cs231 until 12:00: 31 of 40 free`` (the shape named when not whole
    GPUs; the zone when not UTC)."""
    what = "" if b.shape == "whole" else f" {b.shape}"
    zone = "" if b.timezone == "UTC" else f" {b.timezone}"
    return f"booked for {b.name} until {b.until_text}{zone}: {b.free} of {b.gpus}{what} free"


@dataclass(frozen=True)
class PoolChoice:
    """One pool a user may choose, as the service reports it now."""

    name: str
    description: str = ""
    status: str = "active"  # the service's: active | degraded | unavailable | empty
    gpu_types: tuple[str, ...] = ()
    #: whole GPUs (its row's ``whole_gpus``): what admission of whole GPUs counts
    gpu_total: int = 0
    gpu_available: int = 0
    #: all its GPUs in GPU-equivalents (its row's ``gpu_total``: a MIG A100 is 1, an A10
    #: time-sliced in 4 is 1), and its GPUs by kind in words (``16 whole + 1 in MIG
    #: instances: 3 of 4 instances free``); None: its whole GPUs, ``gpu_total``
    gpu_equivalents: float | None = None
    gpus_text: str = ""
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
    #: the most GPU-equivalents within quota now (None: as ``within_quota``)
    within_equivalents: float | None = None
    quota_available: int | None = None  # most GPUs admitted at all, borrowing included
    #: per shape id other than whole: one unit of it fits quota "within", only "borrowing", or
    #: "none" (a quota with no whole GPU left may have room for a slice)
    quota_shapes: Mapping[str, str] = field(default_factory=dict)
    #: what its nodes offer: whole GPUs, MIG instances, shared GPUs, HAMi slices
    shapes: tuple[ShapeChoice, ...] = ()
    #: the bookings in force here that the user is a member of
    bookings: tuple[BookedChoice, ...] = ()
    #: requests waiting in line for it now
    waiting: int = 0

    @property
    def free_equivalents(self) -> Amount:
        """What can be admitted now, in GPU-equivalents: each shape's free units (schedulable
        nodes, less what admissions hold) times its equivalent; the whole GPUs available where
        the row lists no shapes."""
        if not self.shapes:
            return self.gpu_available
        free: Amount = 0
        for s in self.shapes:
            free += s.free * (parse_amount(s.equivalent) or 0)
        return whole_if_whole(free)

    @property
    def free_text(self) -> str:
        """``16.86 / 17``: GPU-equivalents free now of the pool's, as the pools page counts
        them (:func:`.gpu_counts.count_text`)."""
        return f"{count_text(self.free_equivalents)} / {count_text(self.equivalents_total)}"

    @property
    def equivalents_total(self) -> float:
        """All its GPUs in GPU-equivalents (``gpu_total`` where the row did not say)."""
        return float(self.gpu_total if self.gpu_equivalents is None else self.gpu_equivalents)

    @property
    def offers_parts(self) -> bool:
        """Whether its nodes offer parts of GPUs (MIG instances, shared GPUs, HAMi slices): one
        of them is a server's 1 GPU, though the pool may have no whole GPU (``gpu_total`` 0)."""
        return any(not s.whole for s in self.shapes)

    def shape(self, shape_id: str) -> ShapeChoice | None:
        """The first of the pool's shapes with this id (the service lists the larger first)."""
        return next((s for s in self.shapes if s.id == shape_id), None)

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
            return or_words(counts) + " GPUs"
        low = f"{self.min_gpus} to " if self.min_gpus else "up to "
        return f"{low}{gpus_text(self.gpu_ceiling)}"

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PoolChoice:
        limits = row.get("limits") or {}
        quota = row.get("quota") or {}
        return cls(
            name=str(row["name"]),
            description=str(row.get("description") or ""),
            status=str(row.get("status") or "active"),
            gpu_types=tuple(str(t) for t in row.get("gpu_types") or ()),
            gpu_total=int((row.get("whole_gpus") or {}).get("total", row.get("gpu_total")) or 0),
            gpu_equivalents=float(row.get("gpu_total") or 0) if "whole_gpus" in row else None,
            gpus_text=str(row.get("gpus_text") or ""),
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
            within_equivalents=_opt_float(quota.get("within_equivalents")),
            quota_available=_opt_int(quota.get("available")),
            quota_shapes={str(k): str(v) for k, v in (quota.get("shapes") or {}).items()},
            shapes=tuple(ShapeChoice.from_json(s) for s in row.get("shapes") or ()),
            bookings=tuple(BookedChoice.from_json(b) for b in row.get("bookings") or ()),
            waiting=int(row.get("waiting") or 0),
        )


@dataclass(frozen=True)
class BudgetLine:
    """What is left of one GPU-hour budget of the user or one of their groups."""

    subject: str  # user:NAME | group:NAME
    gpu_hours: float
    window: str
    pools: tuple[str, ...] = ()
    spent: float = 0.0
    remaining: float = 0.0
    back_at: float | None = None

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> BudgetLine:
        back = row.get("back_at")
        return cls(
            subject=str(row["subject"]),
            gpu_hours=float(row["gpu_hours"]),
            window=str(row.get("window") or "30d"),
            pools=tuple(str(p) for p in row.get("pools") or ()),
            spent=float(row.get("spent") or 0),
            remaining=float(row.get("remaining") or 0),
            back_at=None if back is None else float(back),
        )


@dataclass(frozen=True)
class Catalog:
    """What one user may choose: the pools open to them, and their default order."""

    pools: tuple[PoolChoice, ...] = ()
    default_pools: tuple[str, ...] = ()
    restricted: frozenset[str] = frozenset()  # pools that exist but are not open to this user
    max_gpus: int = 1024
    budgets: tuple[BudgetLine, ...] = ()
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
            budgets=tuple(BudgetLine.from_json(b) for b in data.get("budgets") or ()),
        )


# --- how a pool reads ----------------------------------------------------------------------------


def pool_status(p: PoolChoice) -> tuple[str, str]:
    """``(code, words)`` for the status column: free, full, borrowing possible, nodes not
    ready...; ``full`` says how many already wait in line for it (``full, 3 waiting in
    line``)."""
    code, words = _pool_status(p)
    if code == "full" and p.waiting:
        words += f", {p.waiting} waiting in line"
    return code, words


def _pool_status(p: PoolChoice) -> tuple[str, str]:
    if p.node_count == 0:
        return "empty", "no nodes"
    if p.status == "unavailable" or p.schedulable_nodes == 0:
        return "not-ready", "nodes not ready"
    if p.gpu_total == 0 and p.offers_parts:  # all its GPUs cut in parts: their free units say
        return ("free", "free") if any(s.free for s in p.shapes) else ("full", "full")
    if p.gpu_total == 0:
        return "cpu", "CPU only"
    if p.largest_free_block == 0 or p.gpu_available == 0:
        return "full", "full"
    if any(b.free for b in p.bookings):
        return "free", "free within your booking"
    if p.quota_managed and not p.quota_available:
        within = [k for k, v in p.quota_shapes.items() if v == "within"]
        borrow = [k for k, v in p.quota_shapes.items() if v == "borrowing"]
        if within:
            return "free", f"your quota has room for {or_words(within)} only"
        if borrow:
            return "borrowing", f"borrowing possible for {or_words(borrow)} only (may be reclaimed)"
        return "quota-used", "your quota is used up"
    not_ready = p.node_count - p.schedulable_nodes
    suffix = f"; {not_ready} of {p.node_count} nodes not ready" if not_ready > 0 else ""
    if p.quota_managed and not p.within_quota and p.borrowing:
        return "borrowing", "borrowing possible (may be reclaimed)" + suffix
    return ("not-ready" if suffix else "free"), "free" + suffix


def quota_text(p: PoolChoice) -> str:
    """The user's remaining quota in the pool, in words, and the bookings in force the user is
    a member of (``booked for cs231 until 12:00: 31 of 40 free``)."""
    booked = "".join(f"; {booked_text(b)}" for b in p.bookings)
    return _quota_words(p) + booked


def _quota_words(p: PoolChoice) -> str:
    if not p.quota_managed:
        return "no quota"
    within, available = p.within_quota or 0, p.quota_available or 0
    exact = p.within_equivalents
    # a slice in use: 3 whole GPUs fit a guarantee of 4, and 3.86 GPU-equivalents do
    sliced = exact is not None and exact > within
    if available > within:
        head = f"{count_text(exact)} ({within} whole)" if sliced else str(within)
        text = f"{head} within quota, {available} with borrowing"
    elif sliced:
        text = f"{count_text(exact)} GPUs ({within} whole) within quota"
    else:
        text = f"{gpus_text(within)} within quota"
    if not within:
        parts = [k for k, v in p.quota_shapes.items() if v == "within"]
        if parts:
            text += f"; room for {or_words(parts)}"
    return text


def budget_text(b: BudgetLine) -> str:
    """``alice: 12.5 of 100 GPU-hours left (per 30 days)``; a spent one says when hours come
    back."""
    kind, name = b.subject.split(":", 1)
    who = name if kind == "user" else f"group {name}"
    per = f"per {window_words(b.window)}{' in ' + ', '.join(b.pools) if b.pools else ''}"
    total = hours_text(b.gpu_hours)
    if b.remaining > 0:
        return f"{who}: {hours_text(b.remaining)} of {total} GPU-hours left ({per})"
    back = f"; hours come back from {when_text(b.back_at)}" if b.back_at is not None else ""
    return f"{who}: budget of {total} GPU-hours {per} is spent{back}"


def gpu_choices(catalog: Catalog) -> list[int]:
    """Every GPU count some pool of the catalog allows (0, a CPU-only server, included); 1 where
    a pool offers parts of GPUs (one of them is a server's 1 GPU)."""
    counts: set[int] = set()
    for p in catalog.pools:
        if p.offers_parts:
            counts.add(1)
        top = min(p.gpu_ceiling, catalog.max_gpus, MAX_GPU_CHOICES)
        counts.update(n for n in range(p.min_gpus, top + 1) if p.allows_count(n))
    return sorted(counts)


# --- GPU counts ----------------------------------------------------------------------------------


class GPUCountError(ValueError):
    """A value that is not a GPU count one server may ask for; the message says why."""


def _json_shown(value: Any) -> str:
    return json.dumps(value, default=str)


def gpu_count(
    value: Any,
    maximum: int,
    *,
    field: str = "gpus",
    whole_floats: bool = False,
    shown: Callable[[Any], str] = _json_shown,
    request: bool = False,
) -> int:
    """``value`` as a GPU count: a whole number from 0 to ``maximum``; else
    :class:`GPUCountError`.

    Booleans never pass as numbers (JSON's ``true`` is not 1 GPU). ``whole_floats`` lets a
    number written ``2.0`` count as 2 (``user_options`` written by scripts); the service's API
    refuses it. The messages name ``field``, quote the input with ``shown`` (each caller quotes
    input its own way in all its messages), and say what one server "may have", or for
    ``request`` what it "may ask for".
    """
    if isinstance(value, float) and whole_floats and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GPUCountError(f"{field} must be a whole number of GPUs, not {shown(value)}")
    if value < 0:
        raise GPUCountError(f"{field} must not be negative, not {value}")
    if value > maximum:
        verb = "ask for" if request else "have"
        raise GPUCountError(
            f"{field} is {value}; one server may {verb} at most {gpus_text(maximum)}"
        )
    return value
