"""What admission takes and gives: the request, the state it reads, the decision it returns.

Kept apart from the walk (:mod:`.walk`) so that quota (:mod:`.quota`), capacity
(:mod:`.capacity`) and pod overrides (:mod:`.overrides`) can share these types without importing
each other, and so that callers (the service, the spawner) see the whole contract in one page.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..accounting.budgets import BudgetSessions
from ..documents.mig_parted import DEFAULT_CONFIGS, MigConfigs
from ..pools.model import Registry
from ..time.bookings_in_force import Calendar, booking_of, ended_servers
from ..usage.amounts import Amount, whole_if_whole
from ..usage.labels import GPU_RESOURCE, POOL_LABEL
from ..usage.records import PlacementGroup, ShapeCount
from ..usage.reservations import Reservation
from ..usage.rows import ServerUsage
from ..usage.shapes import Shape
from .holds import Holds


class UsageView(Protocol):
    """What admission reads from :class:`~jupyter_gpupool.core.usage.index.UsageIndex`."""

    def placement_groups(self, pool: str) -> Iterable[PlacementGroup]: ...
    def node_free(self, node: str) -> int: ...
    def node_gpus(self, node: str) -> int: ...
    def node_group(self, node: str) -> PlacementGroup | None: ...
    def placed(self, nodes: Iterable[str]) -> Iterator[tuple[str, PlacementGroup, int]]: ...
    def node_hostname(self, node: str) -> str: ...
    def node_labels(self, node: str) -> Mapping[str, str]: ...
    def node_unit_count(self, node: str, resource: str) -> tuple[ShapeCount, int] | None: ...
    def has_pool(self, pool: str) -> bool: ...
    def shape_counts(self, pool: str) -> list[ShapeCount]: ...
    def pool_totals(self, pool: str) -> tuple[int, int, int]: ...
    def repartitioning(self, pool: str) -> list[str]: ...
    def subject_used(self, pool: str, subject: str) -> Amount: ...
    def booking_subjects(self, pool: str) -> Iterable[str]: ...
    def user_used(self, pool: str, user: str) -> Amount: ...
    def subject_used_total(self, subject: str) -> Amount: ...
    def user_used_total(self, user: str) -> Amount: ...
    def over_quota_servers(self, pool: str) -> list[ServerUsage]: ...
    def servers(self, pool: str | None = None, user: str | None = None) -> list[ServerUsage]: ...
    def admission_state(self, admission_id: str) -> str | None: ...


class ReservationView(Protocol):
    """What admission reads from :class:`~jupyter_gpupool.core.usage.reservations.Reservations`."""

    def pool_nodes(self, pool: str) -> Mapping[str, int]: ...
    def pool_units(self, pool: str) -> Mapping[tuple[str, str], int]: ...
    def __iter__(self) -> Iterator[Reservation]: ...
    def subject_reserved(self, pool: str, subject: str) -> Amount: ...
    def user_reserved(self, pool: str, user: str) -> Amount: ...
    def subject_reserved_total(self, subject: str) -> Amount: ...
    def user_reserved_total(self, user: str) -> Amount: ...


@dataclass(frozen=True)
class AdmissionRequest:
    """A spawn request. ``pools`` empty means the registry's default order for the groups."""

    user: str
    groups: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    gpus: int = 0
    gpu_type: str | None = None
    server: str = ""
    admission_id: str = ""
    reclaim: bool = True
    #: The shape asked of each entry of ``pools`` (same order; None or ``whole``: whole GPUs);
    #: empty: whole GPUs everywhere. ``gpus`` counts units of it (one, for any other shape).
    shapes: tuple[str | None, ...] = ()

    def choices(self, pools: Iterable[str] | None = None) -> list[tuple[str, str | None]]:
        """``(pool, shape id or None)`` in order, each pair once (``pools``: the default order,
        for a request that names none)."""
        names = self.pools if pools is None else tuple(pools)
        shapes = self.shapes if names is self.pools else ()
        out = []
        for i, name in enumerate(names):
            shape = shapes[i] if i < len(shapes) else None
            if shape in ("", "whole"):
                shape = None
            if (name, shape) not in out:
                out.append((name, shape))
        return out


@dataclass(frozen=True)
class AdmissionState:
    """Everything :func:`~.walk.decide` reads. ``pool_label`` is the node label key naming
    pools. ``budgets`` gives the sessions the registry's budgets count at ``now`` (None: budgets
    are not enforced, as when the service keeps no ledger). ``promised``: see :mod:`.queue`."""

    registry: Registry
    usage: UsageView
    reservations: ReservationView
    pool_label: str = POOL_LABEL
    budgets: BudgetSessions | None = None
    now: float = 0.0
    #: What requests waiting in line within their quota hold back from borrowers: the shape
    #: each asks for, on the nodes that could take it (:mod:`.holds`)
    promised: Holds = field(default_factory=Holds)
    #: The bookings and their windows (:mod:`..time.bookings_in_force`); None: no bookings
    bookings: Calendar | None = None
    #: The mig-parted configs a pool's ``recut`` names (the MIG manager's file)
    mig_configs: MigConfigs = field(default_factory=lambda: DEFAULT_CONFIGS)


@dataclass(frozen=True)
class Skip:
    """Why one pool did not take the request."""

    pool: str
    reason: str

    def __str__(self) -> str:
        return f"{self.pool}: {self.reason}"


@dataclass(frozen=True)
class ReclaimPlan:
    """Over-quota servers to stop so that ``gpus`` fit on ``node`` of ``pool``."""

    pool: str
    node: str
    victims: tuple[ServerUsage, ...]
    gpus_freed: int


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`~.walk.decide`.

    Admitted: ``pool``, ``platform``, ``gpu_type``, ``node`` (the node the GPUs are reserved on
    and the placement hint), ``over_quota``, ``charged`` (``group:NAME`` or ``user:NAME``),
    ``nodes_fit`` (schedulable nodes that could take it) and ``overrides``: a plain dict the
    spawner applies to the pod, in pod-template terms (``nodeSelector``, ``tolerations``,
    ``labels``, ``annotations``, ``env``, ``image``, ``resources``, ``affinity``).

    Not admitted: ``skipped`` has one reason per pool, and ``reclaim`` may name the over-quota
    servers whose stopping would let it in (then ``pool`` is that pool).
    """

    admitted: bool
    request: AdmissionRequest
    pool: str | None = None
    platform: str | None = None
    gpu_type: str | None = None
    node: str | None = None
    over_quota: bool = False
    charged: str | None = None
    nodes_fit: int = 0
    overrides: Mapping[str, Any] = field(default_factory=dict)
    skipped: tuple[Skip, ...] = ()
    reclaim: ReclaimPlan | None = None
    #: The shape admitted when not whole GPUs (None: whole GPUs, or no GPU)
    shape: Shape | None = None

    @property
    def resource(self) -> str:
        """The extended resource the pod asks for."""
        return self.shape.resource if self.shape is not None else GPU_RESOURCE

    @property
    def equivalents(self) -> Amount:
        """What the server counts against quotas, in GPU-equivalents."""
        n = self.request.gpus
        return n * self.shape.equivalent if self.shape is not None else n

    @property
    def reasons(self) -> list[str]:
        """``pool: reason`` for each pool skipped, in order."""
        return [str(s) for s in self.skipped]

    @property
    def message(self) -> str:
        """One paragraph for the user (spawn progress, API errors)."""
        lines = self.reasons
        if self.admitted:
            n = self.request.gpus
            kind = f" {self.gpu_type}" if self.gpu_type and n else ""
            what = f"{n}{kind} GPU{'s' if n != 1 else ''}"
            quota = "over quota, may be reclaimed" if self.over_quota else "within quota"
            lines.append(f"{self.pool}: admitted ({what}, {quota})")
        elif self.reclaim is not None:
            names = ", ".join(f"{v.user}/{v.server or v.name}" for v in self.reclaim.victims)
            lines.append(
                f"{self.reclaim.pool}: your guaranteed GPUs are in use by servers borrowing "
                f"them; reclaiming {self.reclaim.gpus_freed} GPUs on {self.reclaim.node} ({names})"
            )
        elif not lines:
            lines.append("no pool to try")
        return "\n".join(lines)

    def reservation(self, expires_at: float) -> Reservation:
        """The reservation to hold for this admitted decision until its pod shows up."""
        if not self.admitted or self.pool is None or self.charged is None:
            raise ValueError("only an admitted decision holds a reservation")
        return Reservation(
            admission_id=self.request.admission_id,
            pool=self.pool,
            node=self.node,
            gpus=self.request.gpus,
            user=self.request.user,
            charged=self.charged,
            over_quota=self.over_quota,
            expires_at=expires_at,
            resource=self.resource,
            equivalents=whole_if_whole(self.equivalents) if self.shape is not None else None,
            shape=self.shape.id if self.shape is not None else None,
        )


def gpus_text(n: int) -> str:
    """``1 GPU``, ``2 GPUs``: how reasons count GPUs."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def group_subject(group: str) -> str:
    return f"group:{group}"


def user_subject(user: str) -> str:
    return f"user:{user}"


class Context:
    """One decision's view: usage plus reservations, for one user (what quota and capacity
    count as used)."""

    def __init__(self, req: AdmissionRequest, state: AdmissionState):
        self.req = req
        self.state = state
        self.registry = state.registry
        self.usage = state.usage
        self.res = state.reservations
        self.member = set(req.groups)
        #: What the request counts against quotas in the pool being considered (GPU-equivalents:
        #: its units times its shape's equivalent); admission sets it per pool.
        self.need: Amount = req.gpus

    def reclaimable(self, pool: str) -> list[ServerUsage]:
        """Servers of ``pool`` whose GPUs may be taken back: over quota, or admitted within a
        booking whose window is over."""
        found = self.usage.over_quota_servers(pool)
        calendar, usage, now = self.state.bookings, self.usage, self.state.now
        if calendar is not None and any(
            (name := booking_of(s)) is not None
            and usage.subject_used(pool, s)
            and calendar.window_of(name, now) is None
            for s in usage.booking_subjects(pool)
        ):  # a booking's servers whose window is over: rare, so the servers are listed then
            found = found + ended_servers(usage.servers(pool), calendar, now)
        return found

    def used(self, pool: str, subject: str) -> Amount:
        return self.usage.subject_used(pool, subject) + self.res.subject_reserved(pool, subject)

    def used_total(self, subject: str) -> Amount:
        return self.usage.subject_used_total(subject) + self.res.subject_reserved_total(subject)

    def user_used(self, pool: str) -> Amount:
        u = self.req.user
        return self.usage.user_used(pool, u) + self.res.user_reserved(pool, u)

    def user_used_total(self) -> Amount:
        u = self.req.user
        return self.usage.user_used_total(u) + self.res.user_reserved_total(u)
