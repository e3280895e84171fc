"""The pool model: pools, their quotas and extensions, and the registry that holds them all.

These are plain immutable values. :mod:`jupyter_gpupool.core.pools.reading` builds them from
gpuctl-compatible YAML and :mod:`jupyter_gpupool.core.pools.writing` turns them back into documents;
admission and the service only read them. A registry is replaced whole when files change, never
edited in place, so a decision always sees one consistent configuration.

How gpuctl's ``kind: quota`` documents map onto JupyterHub (see ``docs/pools.md``): gpuctl caps a
Kubernetes *namespace*, which it gives to a team or a user. JupyterHub has no namespaces per team, it
has groups, so

- ``namespace.<name>: {gpu: N}`` caps the JupyterHub **group** ``<name>`` at N GPUs across all
  pools (GPUs charged to that group);
- ``users.<name>: {gpu: N}`` (gpuctl's older spelling) caps the **user** ``<name>`` at N GPUs
  across all pools;
- ``default: {gpu: N}`` caps **every other user** at N GPUs across all pools: users with no
  ``users`` entry who are in none of the ``namespace`` groups (gpuctl's default namespace is where
  people outside every team work);
- ``cpu`` and ``memory`` are checked and echoed back but not enforced: a server's CPU and memory
  come from the pool's ``defaults``, and Kubernetes ResourceQuotas remain the tool to cap them.

Per-pool guarantees, limits and borrowing are our ``quota`` extension (:class:`PoolQuota`), written
in a pool document or under ``pools:`` of a quota document. ``budgets:`` of a quota document are
GPU-hours over a rolling window (:class:`~jupyter_gpupool.core.accounting.budgets.Budget`). ``kind:
booking`` documents give a group or users GPUs for a window of time
(:class:`~jupyter_gpupool.core.time.bookings.Booking`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..accounting.budgets import Budget
from ..time.bookings import Booking
from ..time.idle import IdlePolicy
from ..time.runtime import RuntimeLimit
from ..usage.labels import DEFAULT_POOL as DEFAULT_POOL
from .recut_policy import RecutPolicy
from .templates import merge_templates

PLACEMENTS = ("binpack", "spread")


@dataclass(frozen=True)
class Source:
    """Where something was defined, for messages that point the admin at the right line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class QuotaEntry:
    """A subject's share of a pool: ``guaranteed`` GPUs, and a hard ``limit`` including borrowing.

    ``limit`` None means no cap beyond the pool's capacity (and the per-user caps).
    """

    guaranteed: int = 0
    limit: int | None = None


@dataclass(frozen=True)
class PoolQuota:
    """Quota of one pool: per group and per user, a default for users without their own entry.

    ``groups`` keeps the order of the file: when a user is in several groups with quota, the
    earlier group is charged first (see :mod:`jupyter_gpupool.core.admission.walk`).
    """

    borrowing: bool = True
    user_default: QuotaEntry | None = None
    groups: Mapping[str, QuotaEntry] = field(default_factory=dict)
    users: Mapping[str, QuotaEntry] = field(default_factory=dict)

    def user_entry(self, user: str) -> QuotaEntry | None:
        return self.users.get(user, self.user_default)


@dataclass(frozen=True)
class Defaults:
    """CPU and memory a server gets: fixed part plus a part per GPU (OSMO's default variables)."""

    cpu: str | int | float | None = None
    memory: str | int | None = None
    cpu_per_gpu: str | int | float | None = None
    memory_per_gpu: str | int | None = None

    def overlay(self, other: Defaults | None) -> Defaults:
        """``other``'s values where set, ours otherwise (platform defaults over pool defaults)."""
        if other is None:
            return self
        return Defaults(
            cpu=self.cpu if other.cpu is None else other.cpu,
            memory=self.memory if other.memory is None else other.memory,
            cpu_per_gpu=self.cpu_per_gpu if other.cpu_per_gpu is None else other.cpu_per_gpu,
            memory_per_gpu=(
                self.memory_per_gpu if other.memory_per_gpu is None else other.memory_per_gpu
            ),
        )


@dataclass(frozen=True)
class Limits:
    """Validation of a request before quota and capacity are looked at (OSMO's validations)."""

    max_gpus: int | None = None
    min_gpus: int = 0
    allowed_gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class ShapeRule:
    """A shape a pool file names (``shapes``): its id, display name and per-user limit."""

    id: str
    name: str | None = None
    max_per_user: int | None = None
    #: Where its id is written (``gpupool validate --nodes`` points there)
    line: int | None = field(default=None, compare=False)
    #: How long a server of this shape may run here (overrides the pool's ``max_runtime``)
    max_runtime: RuntimeLimit | None = None


@dataclass(frozen=True)
class Access:
    """Who may use a pool. A pool without ``access`` is open to every user."""

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def allows(self, user: str, groups: Iterable[str]) -> bool:
        return user in self.users or any(g in self.groups for g in groups)


@dataclass(frozen=True)
class Platform:
    """A GPU type inside a pool, with its own template (OSMO's platforms)."""

    name: str
    gpu_type: str
    description: str | None = None
    defaults: Defaults | None = None
    template: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pool:
    """One pool: gpuctl's name, description and nodes, plus our optional extensions.

    ``quota`` is only what the pool's own document says; :meth:`Registry.quota` gives the quota in
    force, which may also come from a quota document.
    """

    name: str
    description: str | None = None
    nodes: Mapping[str, str] = field(default_factory=dict)  # hostname -> gpu type ("" = CPU only)
    selector: Mapping[str, str] = field(default_factory=dict)
    access: Access | None = None
    quota: PoolQuota | None = None
    defaults: Defaults = field(default_factory=Defaults)
    limits: Limits = field(default_factory=Limits)
    platforms: Mapping[str, Platform] = field(default_factory=dict)
    default_platform: str | None = None
    template: Mapping[str, Any] = field(default_factory=dict)
    placement: str = "binpack"
    idle: IdlePolicy | None = None
    #: How long a server with GPUs may run here (a shape's own limit overrides it)
    max_runtime: RuntimeLimit | None = None
    #: The shapes the file names, in order (empty: every shape the nodes offer, unnamed)
    shapes: tuple[ShapeRule, ...] = ()
    #: The nodes whose MIG layouts the service may change, and how (its file's ``recut``)
    recut: RecutPolicy | None = None
    source: Source | None = field(default=None, compare=False)

    def allows(self, user: str, groups: Iterable[str]) -> bool:
        return self.access is None or self.access.allows(user, groups)

    def shape_rule(self, shape_id: str) -> ShapeRule | None:
        """The file's rule for this shape id (``whole`` for whole GPUs), None if not named."""
        return next((r for r in self.shapes if r.id == shape_id), None)

    def offers_shape(self, shape_id: str) -> bool:
        """Whether the file lets this pool admit the shape (a file naming none: every shape)."""
        return not self.shapes or self.shape_rule(shape_id) is not None

    def platform_for(self, gpu_type_or_name: str) -> Platform | None:
        """The platform named so, else the first whose GPU type is so."""
        if gpu_type_or_name in self.platforms:
            return self.platforms[gpu_type_or_name]
        for p in self.platforms.values():
            if p.gpu_type == gpu_type_or_name:
                return p
        return None

    def platform_of_type(self, gpu_type: str) -> Platform | None:
        for p in self.platforms.values():
            if p.gpu_type == gpu_type:
                return p
        return None


@dataclass(frozen=True)
class ResourceCap:
    """One gpuctl quota entry: caps for CPU, memory and GPUs (only ``gpu`` is enforced)."""

    cpu: str | int | float | None = None
    memory: str | int | None = None
    gpu: int | None = None


@dataclass(frozen=True)
class DefaultPools:
    """Run:ai's "default node pool priority list", per group, for users who choose nothing."""

    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fallback: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuotaDocument:
    """One ``kind: quota`` document: gpuctl's cluster-wide caps plus our per-pool extensions."""

    name: str
    description: str | None = None
    namespaces: Mapping[str, ResourceCap] = field(default_factory=dict)  # -> groups
    users: Mapping[str, ResourceCap] = field(default_factory=dict)
    default: ResourceCap | None = None
    pools: Mapping[str, PoolQuota] = field(default_factory=dict)
    default_pools: DefaultPools | None = None
    budgets: tuple[Budget, ...] = ()
    source: Source | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Registry:
    """Every pool and quota in force. Build it with :mod:`jupyter_gpupool.core.pools.reading`.

    The derived maps (``pool_quotas``, caps, default pool lists) are computed by the loader, which
    has already rejected conflicts between documents, so lookups here never have to choose.
    """

    pools: Mapping[str, Pool] = field(default_factory=dict)
    quota_documents: tuple[QuotaDocument, ...] = ()
    pool_quotas: Mapping[str, PoolQuota] = field(default_factory=dict)
    group_caps: Mapping[str, ResourceCap] = field(default_factory=dict)
    user_caps: Mapping[str, ResourceCap] = field(default_factory=dict)
    default_user_cap: ResourceCap | None = None
    default_pools: DefaultPools = field(default_factory=DefaultPools)
    budgets: tuple[Budget, ...] = ()
    #: ``kind: booking`` documents, in load order (in force: :mod:`..time.bookings_in_force`)
    bookings: tuple[Booking, ...] = ()
    _templates: dict[tuple[str, str | None], dict[str, Any]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def pool(self, name: str) -> Pool | None:
        """The pool called ``name``; the ``default`` pool exists even when no file defines it."""
        pool = self.pools.get(name)
        if pool is None and name == DEFAULT_POOL:
            return Pool(DEFAULT_POOL, description="Nodes that are in no pool")
        return pool

    def quota(self, pool: str) -> PoolQuota | None:
        return self.pool_quotas.get(pool)

    def user_cap(self, user: str, groups: Iterable[str] = ()) -> int | None:
        """The user's GPU cap across all pools.

        Their gpuctl ``users`` entry; else ``default``, but only for users in none of the groups
        that have a ``namespace`` entry: in gpuctl, team members work in their team's namespace
        and only everyone else falls into the default one.
        """
        cap = self.user_caps.get(user)
        if cap is None and not any(g in self.group_caps for g in groups):
            cap = self.default_user_cap
        return None if cap is None else cap.gpu

    def group_cap(self, group: str) -> int | None:
        cap = self.group_caps.get(group)
        return None if cap is None else cap.gpu

    def selectors(self) -> list[tuple[str, Mapping[str, str]]]:
        """``(pool, selector)`` of pools defined by node labels, for the usage index."""
        return [(p.name, p.selector) for p in self.pools.values() if p.selector]

    def visible_pools(self, user: str, groups: Iterable[str]) -> list[Pool]:
        """Pools this user may launch in, in registry order (the spawn form's list)."""
        groups = tuple(groups)
        return [p for p in self.pools.values() if p.allows(user, groups)]

    def default_pool_order(self, groups: Iterable[str]) -> tuple[str, ...]:
        """The priority list for a user who picked no pools.

        The first group (in the order the quota file lists them) the user is in decides; else the
        ``fallback`` list; else just the ``default`` pool, as in Run:ai.
        """
        groups = set(groups)
        for group, pools in self.default_pools.groups.items():
            if group in groups:
                return pools
        return self.default_pools.fallback or (DEFAULT_POOL,)

    def pod_template(self, pool: str, platform: str | None) -> dict[str, Any]:
        """Pool template merged with the platform's (cached: the registry never changes).

        Callers must not modify the result; :func:`merge_templates` copies it when layering more.
        """
        key = (pool, platform)
        cached = self._templates.get(key)
        if cached is None:
            p = self.pools.get(pool)  # a pool no file defines has no template
            plat = p.platforms.get(platform) if p is not None and platform else None
            cached = merge_templates(p.template if p else None, plat.template if plat else None)
            self._templates[key] = cached
        return cached
