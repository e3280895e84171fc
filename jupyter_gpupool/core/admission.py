"""Admission: which pool takes a server, charged to whom, and why earlier pools did not.

:func:`decide` is pure: it reads the registry (pools, quotas), the usage index and the
reservations, and returns a :class:`Decision`; the service holds one lock around decide + reserve so
decisions are serialized. It walks the user's pools in order and takes the first where

1. **access** - the user or one of their groups is allowed (pools without ``access``: everyone);
2. **validation** - the GPU count passes the pool's ``limits`` and the GPU type exists there;
3. **quota** - a subject can be charged (below);
4. **capacity** - ONE schedulable, Ready node has the GPUs free, reservations counted as used
   (free GPUs spread over several nodes are no use to one pod: fragmentation).

**Who is charged** (*decided*; also in ``docs/pools.md``). A server is charged to exactly one
subject, recorded on the pod, and is either within quota or over quota as a whole:

- the first of the user's groups, in the order the pool's quota lists them, whose guaranteed GPUs
  still cover the request -> that group, within quota;
- else the user's own guarantee (``users.<name>``, else ``user-default``) -> the user, within;
- else, if the pool allows borrowing: the first of the user's groups (quota groups first, then
  groups with a cluster-wide gpuctl cap) whose limit still has room -> that group, **over quota**;
  a user in no such group borrows as themselves (the user's limit applies);
- else rejected, saying which guarantee or limit is used up.

On top, hard caps always apply: the user's limit in the pool (``users.<name>.limit`` or
``user-default.limit``) on all their GPUs there, and the gpuctl cluster-wide caps (``namespace``
per group, ``users``/``default`` per user). A pool without any quota section is unmanaged: every
request is within quota, limited by capacity and the cluster-wide caps only. Servers without GPUs
are never charged.

**Reclaim.** When a request is within quota and fails only for capacity, and over-quota (borrowing)
servers hold the GPUs, the decision names the servers to stop: on one node, so that the freed GPUs
form a block, newest first, as few as needed (ties: fewer GPUs freed, then the node whose victims
are newer). The walk stops there, because a guarantee means the guaranteed pool; a request with
``reclaim=False`` keeps walking instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol

from .labels import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    POD_ADMISSION,
    POD_CHARGED,
    POD_GPUS,
    POD_GROUPS,
    POD_OVER_QUOTA,
    POD_PLATFORM,
    POD_POOL,
    POD_RUNWHERE_POOL,
    POD_SERVER,
    POD_USER,
    POOL_LABEL,
    is_label_value,
    safe_label_value,
)
from .pools import DEFAULT_POOL, Defaults, Platform, Pool, Registry
from .quantities import format_cpu, format_memory, parse_quantity
from .reservations import Reservation
from .templates import merge_templates, tolerates
from .usage import PlacementGroup, ServerUsage

GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


class UsageView(Protocol):
    """What admission reads from :class:`~jupyter_gpupool.core.usage.UsageIndex`."""

    def placement_groups(self, pool: str) -> Iterable[PlacementGroup]: ...
    def node_free(self, node: str) -> int: ...
    def node_group(self, node: str) -> PlacementGroup | None: ...
    def node_hostname(self, node: str) -> str: ...
    def has_pool(self, pool: str) -> bool: ...
    def pool_totals(self, pool: str) -> tuple[int, int, int]: ...
    def subject_used(self, pool: str, subject: str) -> int: ...
    def user_used(self, pool: str, user: str) -> int: ...
    def subject_used_total(self, subject: str) -> int: ...
    def user_used_total(self, user: str) -> int: ...
    def over_quota_servers(self, pool: str) -> list[ServerUsage]: ...


class ReservationView(Protocol):
    """What admission reads from :class:`~jupyter_gpupool.core.reservations.Reservations`."""

    def pool_nodes(self, pool: str) -> Mapping[str, int]: ...
    def subject_reserved(self, pool: str, subject: str) -> int: ...
    def user_reserved(self, pool: str, user: str) -> int: ...
    def subject_reserved_total(self, subject: str) -> int: ...
    def user_reserved_total(self, user: str) -> int: ...


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


@dataclass(frozen=True)
class AdmissionState:
    """Everything :func:`decide` reads. ``pool_label`` is the node label key naming pools."""

    registry: Registry
    usage: UsageView
    reservations: ReservationView
    pool_label: str = POOL_LABEL


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
    """The outcome of :func:`decide`.

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
        )


# --- helpers -------------------------------------------------------------------------------------


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _or_list(items: Sequence[object]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def group_subject(group: str) -> str:
    return f"group:{group}"


def user_subject(user: str) -> str:
    return f"user:{user}"


def _asked(used: int, limit: int, n: int) -> str:
    """Say what was asked when the limit is not simply used up."""
    return f" (you asked for {n})" if used < limit else ""


class _Context:
    """One decision's view: usage plus reservations, for one user."""

    def __init__(self, req: AdmissionRequest, state: AdmissionState):
        self.req = req
        self.state = state
        self.registry = state.registry
        self.usage = state.usage
        self.res = state.reservations
        self.member = set(req.groups)

    def used(self, pool: str, subject: str) -> int:
        return self.usage.subject_used(pool, subject) + self.res.subject_reserved(pool, subject)

    def used_total(self, subject: str) -> int:
        return self.usage.subject_used_total(subject) + self.res.subject_reserved_total(subject)

    def user_used(self, pool: str) -> int:
        u = self.req.user
        return self.usage.user_used(pool, u) + self.res.user_reserved(pool, u)

    def user_used_total(self) -> int:
        u = self.req.user
        return self.usage.user_used_total(u) + self.res.user_reserved_total(u)


# --- quota ---------------------------------------------------------------------------------------


def _charge(pool: Pool, ctx: _Context) -> tuple[str, bool] | str:
    """``(subject, over_quota)``, or the reason the request is over a guarantee or limit."""
    req, reg = ctx.req, ctx.registry
    n = req.gpus
    me = user_subject(req.user)
    if n == 0:
        return me, False
    quota = reg.quota(pool.name)
    entry = quota.user_entry(req.user) if quota is not None else None
    if entry is not None and entry.limit is not None:
        used = ctx.user_used(pool.name)
        if used + n > entry.limit:
            return (
                f"you use {used} of your limit of {_gpus(entry.limit)} in this pool"
                f"{_asked(used, entry.limit, n)}"
            )
    cap = reg.user_cap(req.user, req.groups)
    if cap is not None:
        used = ctx.user_used_total()
        if used + n > cap:
            return f"you use {used} of your limit of {_gpus(cap)} across all pools{_asked(used, cap, n)}"

    def cluster_room(group: str) -> tuple[bool, str]:
        gcap = reg.group_cap(group)
        if gcap is None:
            return True, ""
        used = ctx.used_total(group_subject(group))
        if used + n <= gcap:
            return True, ""
        return False, (
            f"your group {group} uses {used} of its limit of {_gpus(gcap)} across all pools"
            f"{_asked(used, gcap, n)}"
        )

    cluster_groups = [g for g in reg.group_caps if g in ctx.member]
    if quota is None:
        first_reason = ""
        for g in cluster_groups:
            ok, why = cluster_room(g)
            if ok:
                return group_subject(g), False
            first_reason = first_reason or why
        return first_reason if first_reason else (me, False)

    quota_groups = [g for g in quota.groups if g in ctx.member]
    for g in quota_groups:
        if ctx.used(pool.name, group_subject(g)) + n <= quota.groups[g].guaranteed:
            ok, _ = cluster_room(g)
            if ok:
                return group_subject(g), False
    if entry is not None and entry.guaranteed and ctx.used(pool.name, me) + n <= entry.guaranteed:
        return me, False

    if not quota.borrowing:
        if quota_groups:
            parts = []
            for g in quota_groups:
                used = ctx.used(pool.name, group_subject(g))
                parts.append((g, used, quota.groups[g].guaranteed))
            if len(parts) == 1:
                g, used, gua = parts[0]
                return (
                    f"your group {g} uses {used} of its {gua} guaranteed GPUs{_asked(used, gua, n)} "
                    "and the pool allows no borrowing"
                )
            listed = ", ".join(f"{g} uses {u} of {gu}" for g, u, gu in parts)
            return (
                f"your groups have no {_gpus(n)} of guaranteed quota left ({listed}) "
                "and the pool allows no borrowing"
            )
        if entry is not None and entry.guaranteed:
            used = ctx.used(pool.name, me)
            return (
                f"you use {used} of your {entry.guaranteed} guaranteed GPUs"
                f"{_asked(used, entry.guaranteed, n)} "
                "and the pool allows no borrowing"
            )
        return "you have no guaranteed GPUs in this pool and it allows no borrowing"

    candidates = quota_groups + [g for g in cluster_groups if g not in quota_groups]
    if not candidates:
        return me, True
    first_reason = ""
    for g in candidates:
        subject = group_subject(g)
        limit = quota.groups[g].limit if g in quota.groups else None
        used = ctx.used(pool.name, subject)
        if limit is not None and used + n > limit:
            first_reason = first_reason or (
                f"your group {g} uses {used} of its limit of {_gpus(limit)} in this pool, "
                f"borrowing included{_asked(used, limit, n)}"
            )
            continue
        ok, why = cluster_room(g)
        if not ok:
            first_reason = first_reason or why
            continue
        return subject, True
    return first_reason


@dataclass(frozen=True)
class Headroom:
    """How many GPUs quota lets one user's next server have in a pool now (capacity aside).

    ``within_quota``: the most GPUs one request gets charged within a guarantee; ``available``:
    the most it gets at all, borrowing included. Both count at most ``ceiling`` (the pool's
    GPUs). ``managed`` is False where no quota or cap applies to the user: both are the ceiling.
    """

    managed: bool
    borrowing: bool
    within_quota: int
    available: int


def quota_headroom(
    pool_name: str, user: str, groups: Sequence[str], state: AdmissionState, ceiling: int
) -> Headroom:
    """:class:`Headroom` of ``user`` in ``pool_name``, by the same rules :func:`decide` charges
    with (a request that fits charges the same way as any smaller one, so a bisection finds the
    largest)."""
    reg = state.registry
    pool = reg.pool(pool_name) or Pool(pool_name)
    quota = reg.quota(pool_name)
    member = tuple(groups)
    managed = (
        quota is not None
        or reg.user_cap(user, member) is not None
        or any(g in reg.group_caps for g in member)
    )

    def charge(n: int) -> tuple[str, bool] | str:
        return _charge(pool, _Context(AdmissionRequest(user=user, groups=member, gpus=n), state))

    def largest(fits: Any) -> int:
        low, high = 0, max(ceiling, 0)
        while low < high:
            mid = (low + high + 1) // 2
            if fits(mid):
                low = mid
            else:
                high = mid - 1
        return low

    def within(n: int) -> bool:
        c = charge(n)
        return not isinstance(c, str) and not c[1]

    return Headroom(
        managed=managed,
        borrowing=bool(quota and quota.borrowing),
        within_quota=largest(within),
        available=largest(lambda n: not isinstance(charge(n), str)),
    )


# --- capacity ------------------------------------------------------------------------------------


@dataclass
class _Fit:
    node: str | None = None
    group: PlacementGroup | None = None
    nodes_fit: int = 0
    largest: int = 0


class _Placement:
    """Capacity of the candidate node groups of one pool, reservations counted as used."""

    def __init__(self, groups: list[PlacementGroup], ctx: _Context, pool: str):
        self.groups = groups
        self.ctx = ctx
        ids = {id(g) for g in groups}
        # Reserved nodes of the candidate groups: node -> (free, free after reservations).
        self.reserved: dict[int, dict[str, tuple[int, int]]] = {}
        usage = ctx.usage
        for node, held in ctx.res.pool_nodes(pool).items():
            g = usage.node_group(node)
            if g is not None and id(g) in ids:
                free = usage.node_free(node)
                self.reserved.setdefault(id(g), {})[node] = (free, free - held)

    def fit(self, n: int, spread: bool) -> _Fit:
        out = _Fit()
        best_free: int | None = None
        for g in self.groups:
            res = self.reserved.get(id(g), {})
            top = len(g.counts) - 1
            frees = range(top, n - 1, -1) if spread else range(n, top + 1)
            for f in frees:
                count = g.counts[f]
                if count and count > sum(1 for fr, _ in res.values() if fr == f):
                    if best_free is None or (f > best_free if spread else f < best_free):
                        node = next(nd for nd in g.members[f] if nd not in res)
                        best_free, out.node, out.group = f, node, g
                    break
            for f in range(top, -1, -1):
                if f <= out.largest:
                    break
                if g.counts[f] > sum(1 for fr, _ in res.values() if fr == f):
                    out.largest = f
                    break
            out.nodes_fit += g.count_at_least(n)
            for node, (free, eff) in res.items():
                out.largest = max(out.largest, eff)
                if free >= n > eff:
                    out.nodes_fit -= 1
                if eff >= n and (
                    best_free is None or (eff > best_free if spread else eff < best_free)
                ):
                    best_free, out.node, out.group = eff, node, g
        return out

    def reclaim(self, pool: str, n: int) -> ReclaimPlan | None:
        usage = self.ctx.usage
        ids = {id(g) for g in self.groups}
        by_node: dict[str, list[ServerUsage]] = {}
        for s in usage.over_quota_servers(pool):
            if s.node is None or s.state == "terminating":
                continue
            g = usage.node_group(s.node)
            if g is not None and id(g) in ids:
                by_node.setdefault(s.node, []).append(s)
        held = self.ctx.res.pool_nodes(pool)
        best: tuple[int, int, str] | None = None
        plan: ReclaimPlan | None = None
        for node, servers in by_node.items():
            need = n - (usage.node_free(node) - held.get(node, 0))
            servers.sort(key=lambda s: (s.created, s.namespace, s.name), reverse=True)
            chosen: list[ServerUsage] = []
            freed = 0
            for s in servers:
                if freed >= need:
                    break
                chosen.append(s)
                freed += s.gpus
            if freed < need or not chosen:
                continue
            oldest_chosen = chosen[-1].created
            key = (len(chosen), freed, oldest_chosen)
            if best is None or key[:2] < best[:2] or (key[:2] == best[:2] and key[2] > best[2]):
                best = key
                plan = ReclaimPlan(pool, node, tuple(chosen), freed)
        return plan


def _groups_for(
    pool: Pool, platform: Platform | None, type_filter: str | None, ctx: _Context
) -> tuple[list[PlacementGroup], list[PlacementGroup]]:
    """``(candidates, of the right type but with untolerated taints)`` for this request."""
    out: list[PlacementGroup] = []
    untolerated: list[PlacementGroup] = []
    tolerations_by_platform: dict[str | None, list[Any]] = {}
    for g in ctx.usage.placement_groups(pool.name):
        if type_filter is not None and g.gpu_type != type_filter:
            continue
        if g.taints:
            plat = platform if platform is not None else pool.platform_of_type(g.gpu_type)
            pname = plat.name if plat else None
            tols = tolerations_by_platform.get(pname)
            if tols is None:
                tmpl = ctx.registry.pod_template(pool.name, pname)
                tols = list(tmpl.get("tolerations", ()))
                if ctx.req.gpus:
                    tols.append(GPU_TOLERATION)
                tolerations_by_platform[pname] = tols
            if not all(tolerates(tols, k, v, e) for k, v, e in g.taints):
                untolerated.append(g)
                continue
        out.append(g)
    return out, untolerated


def _no_fit_reason(
    pool: Pool,
    n: int,
    fit: _Fit,
    groups: list[PlacementGroup],
    untolerated: list[PlacementGroup],
    type_filter: str | None,
    ctx: _Context,
) -> str:
    total_gpus, nodes, schedulable = ctx.usage.pool_totals(pool.name)
    if nodes == 0:
        return "this pool has no nodes"
    if schedulable == 0:
        return (
            f"none of its {nodes} node{'s' if nodes != 1 else ''} can take servers right now "
            "(not ready, under pressure or cordoned)"
        )
    if not groups:
        if untolerated:
            return "its nodes' taints are not tolerated by this pool's template"
        if type_filter:
            return f"no node here has GPU type {type_filter} ready for servers"
        return "no node here can take servers right now"
    if n and total_gpus == 0:
        return "this pool has no GPUs"
    return f"no node has {n} free GPU{'s' if n != 1 else ''} (largest free block: {fit.largest})"


# --- pod overrides -------------------------------------------------------------------------------


def _resources(defaults: Defaults, n: int) -> dict[str, str]:
    out: dict[str, str] = {}
    cpu = Decimal(0)
    if defaults.cpu is not None:
        cpu += parse_quantity(defaults.cpu)
    if defaults.cpu_per_gpu is not None:
        cpu += parse_quantity(defaults.cpu_per_gpu) * n
    if cpu:
        out["cpu"] = format_cpu(cpu)
    mem = Decimal(0)
    if defaults.memory is not None:
        mem += parse_quantity(defaults.memory)
    if defaults.memory_per_gpu is not None:
        mem += parse_quantity(defaults.memory_per_gpu) * n
    if mem:
        out["memory"] = format_memory(mem)
    return out


def build_overrides(
    *,
    registry: Registry,
    pool: Pool,
    platform: Platform | None,
    request: AdmissionRequest,
    charged: str,
    over_quota: bool,
    pool_label: str = POOL_LABEL,
    type_pin: tuple[str, str] | None = None,
    node_hostname: str | None = None,
) -> dict[str, Any]:
    """The pod settings for an admitted request: defaults, pool and platform templates, ours.

    Ours come last so a template cannot break accounting: pool selection, GPU limits and the
    labels/annotations the usage index reads back.
    """
    n = request.gpus
    defaults = pool.defaults.overlay(platform.defaults if platform else None)
    base: dict[str, Any] = {}
    if requests := _resources(defaults, n):
        base["resources"] = {"requests": requests}
    template = registry.pod_template(pool.name, platform.name if platform else None)

    node_selector: dict[str, str] = dict(pool.selector)
    affinity: dict[str, Any] = {}
    if not pool.selector:
        if pool.name == DEFAULT_POOL:
            # Nodes *without* a pool label: not expressible as a nodeSelector.
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": pool_label, "operator": "DoesNotExist"}]}
                ]
            }
        else:
            node_selector[pool_label] = pool.name
    if type_pin is not None:
        node_selector[type_pin[0]] = type_pin[1]
    if node_hostname is not None:
        # The node the GPUs are reserved on: a preference, the scheduler has the last word.
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {"key": HOSTNAME_LABEL, "operator": "In", "values": [node_hostname]}
                    ]
                },
            }
        ]

    labels = {
        POD_POOL: pool.name,
        POD_RUNWHERE_POOL: pool.name,
        POD_USER: safe_label_value(request.user),
        POD_SERVER: safe_label_value(request.server),
        POD_GPUS: str(n),
        POD_OVER_QUOTA: "true" if over_quota else "false",
        POD_CHARGED: safe_label_value(charged),
    }
    if request.admission_id:
        labels[POD_ADMISSION] = request.admission_id
    if platform is not None:
        labels[POD_PLATFORM] = platform.name
    annotations = {
        POD_POOL: pool.name,
        POD_USER: request.user,
        POD_SERVER: request.server,
        POD_GROUPS: ",".join(request.groups),
        POD_CHARGED: charged,
    }
    ours: dict[str, Any] = {
        "nodeSelector": node_selector,
        "labels": labels,
        "annotations": annotations,
    }
    if n:
        gpu = {GPU_RESOURCE: str(n)}
        ours["resources"] = {"requests": dict(gpu), "limits": dict(gpu)}
        ours["tolerations"] = [dict(GPU_TOLERATION)]
    else:
        # CUDA images set NVIDIA_VISIBLE_DEVICES=all, which would show a GPU-less server every
        # GPU of its node; "none" keeps the driver but no devices.
        ours["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    if affinity:
        ours["affinity"] = {"nodeAffinity": affinity}
    return merge_templates(base, template, ours)


# --- the walk ------------------------------------------------------------------------------------


@dataclass
class _Outcome:
    skip: Skip | None = None
    decision: Decision | None = None
    reclaim: ReclaimPlan | None = None


def _validate(pool: Pool, n: int) -> str | None:
    lim = pool.limits
    if n < lim.min_gpus:
        return f"servers here need at least {_gpus(lim.min_gpus)} (you asked for {n})"
    if lim.max_gpus is not None and n > lim.max_gpus:
        return f"servers here may use at most {_gpus(lim.max_gpus)} (you asked for {n})"
    if lim.allowed_gpus and n not in lim.allowed_gpus:
        return f"servers here may use {_or_list(lim.allowed_gpus)} GPUs (you asked for {n})"
    return None


def _evaluate(name: str, ctx: _Context) -> _Outcome:
    req, reg = ctx.req, ctx.registry
    pool = reg.pool(name)
    if pool is None:
        if not ctx.usage.has_pool(name):
            return _Outcome(Skip(name, "there is no such pool"))
        pool = Pool(name)  # nodes carry the label but no file defines it: a bare gpuctl pool
    if not pool.allows(req.user, req.groups):
        return _Outcome(Skip(name, "you don't have access to this pool"))
    n = req.gpus
    if problem := _validate(pool, n):
        return _Outcome(Skip(name, problem))

    platform: Platform | None = None
    type_filter: str | None = None
    if req.gpu_type:
        if pool.platforms:
            platform = pool.platform_for(req.gpu_type)
            if platform is None:
                types = ", ".join(p.gpu_type for p in pool.platforms.values())
                return _Outcome(Skip(name, f"this pool has no GPU type {req.gpu_type} ({types})"))
            type_filter = platform.gpu_type
        else:
            type_filter = req.gpu_type
    elif pool.default_platform:
        platform = pool.platforms[pool.default_platform]
        type_filter = platform.gpu_type

    charge = _charge(pool, ctx)
    if isinstance(charge, str):
        return _Outcome(Skip(name, charge))
    charged, over_quota = charge

    groups, untolerated = _groups_for(pool, platform, type_filter, ctx)
    placement = _Placement(groups, ctx, name)
    fit = placement.fit(n, spread=pool.placement == "spread")
    if fit.node is None or fit.group is None:
        skip = Skip(name, _no_fit_reason(pool, n, fit, groups, untolerated, type_filter, ctx))
        if n and not over_quota and req.reclaim and reg.quota(name) is not None:
            plan = placement.reclaim(name, n)
            if plan is not None:
                return _Outcome(skip, reclaim=plan)
        return _Outcome(skip)

    group = fit.group
    if platform is None and pool.platforms:
        platform = pool.platform_of_type(group.gpu_type)
    type_pin = None
    if group.type_key is not None and (req.gpu_type or platform is not None):
        type_pin = (group.type_key, group.gpu_type)
    overrides = build_overrides(
        registry=reg,
        pool=pool,
        platform=platform,
        request=req,
        charged=charged,
        over_quota=over_quota,
        pool_label=ctx.state.pool_label,
        type_pin=type_pin,
        node_hostname=ctx.usage.node_hostname(fit.node),
    )
    return _Outcome(
        decision=Decision(
            admitted=True,
            request=req,
            pool=name,
            platform=platform.name if platform else None,
            gpu_type=group.gpu_type or None,
            node=fit.node,
            over_quota=over_quota,
            charged=charged,
            nodes_fit=fit.nodes_fit,
            overrides=overrides,
        )
    )


def decide(request: AdmissionRequest, state: AdmissionState) -> Decision:
    """Admit ``request`` to the first pool of its list that can take it, or say why none can."""
    if request.gpus < 0:
        raise ValueError("a request cannot ask for a negative number of GPUs")
    if not is_label_value(request.admission_id):
        # it is written as a pod label, and reservations are matched by that label
        raise ValueError(f"admission id {request.admission_id!r} is not a valid label value")
    ctx = _Context(request, state)
    pools = request.pools or state.registry.default_pool_order(request.groups)
    skipped: list[Skip] = []
    seen: set[str] = set()
    for name in pools:
        if name in seen:
            continue
        seen.add(name)
        out = _evaluate(name, ctx)
        if out.decision is not None:
            return _with_skips(out.decision, skipped)
        assert out.skip is not None
        skipped.append(out.skip)
        if out.reclaim is not None:
            return Decision(
                admitted=False,
                request=request,
                pool=name,
                skipped=tuple(skipped),
                reclaim=out.reclaim,
            )
    return Decision(admitted=False, request=request, skipped=tuple(skipped))


def _with_skips(decision: Decision, skipped: list[Skip]) -> Decision:
    return replace(decision, skipped=tuple(skipped))
