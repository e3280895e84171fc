"""Pool files: gpuctl-compatible YAML (or JSON) text in, a
:class:`~jupyter_gpupool.core.pools.model.Registry` out.

The shapes documents are checked against are in :mod:`~jupyter_gpupool.core.pools.document_spec`; this
module adds what a shape cannot say: rules inside a document (a guarantee above its limit, an
unknown default platform) and between documents (a pool defined twice, a node in two pools, a
quota naming a pool that does not exist).

Loading is all or nothing: every problem in every document is collected and raised together as a
:class:`~jupyter_gpupool.core.documents.yaml_reader.DocumentError`, and no registry is returned if there is any.

Only text comes in, as ``(text, name)`` pairs: reading files and listing directories is the
callers' business (:mod:`jupyter_gpupool.poolfiles` for the CLI and the service's directory,
request bodies and ConfigMap keys in the service).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..accounting.budgets import Budget
from ..documents.spec import Checker
from ..documents.yaml_reader import Document, DocumentError, PathElem, Problem, load_documents
from ..usage.shapes import is_shape_id
from .booking_reading import Named, build_booking, check_bookings
from .document_spec import (
    BOOKING_DOCUMENT,
    BOOKING_KIND,
    POOL_DOCUMENT,
    POOL_KINDS,
    QUOTA_DOCUMENT,
    QUOTA_KIND,
)
from .model import (
    DEFAULT_POOL,
    Access,
    DefaultPools,
    Defaults,
    Limits,
    Platform,
    Pool,
    PoolQuota,
    QuotaDocument,
    QuotaEntry,
    Registry,
    ResourceCap,
    ShapeRule,
    Source,
)
from .recut_policy import read_recut
from .time_reading import read_idle, read_max_runtime

#: How many pool names an "unknown pool" problem lists.
KNOWN_POOLS_SHOWN = 20


@dataclass
class _Loaded:
    """What one valid document contributed, with where its parts were written."""

    doc: Document
    pool: Pool | None = None
    quota: QuotaDocument | None = None
    booking: Named | None = None


@dataclass
class LoadReport:
    """Per-file outcome of a load, for ``gpupool validate``."""

    files: list[str] = field(default_factory=list)
    pools_per_file: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def problems_in(self, file: str) -> list[Problem]:
        return [p for p in self.problems if p.file == file]


def _entry(data: Mapping[str, Any]) -> QuotaEntry:
    return QuotaEntry(guaranteed=data.get("guaranteed", 0), limit=data.get("limit"))


def _pool_quota(c: Checker, data: Mapping[str, Any], path: tuple[PathElem, ...]) -> PoolQuota:
    def check_entry(entry: Mapping[str, Any], epath: tuple[PathElem, ...]) -> None:
        g, lim = entry.get("guaranteed", 0), entry.get("limit")
        if lim is not None and g > lim:
            c.add((*epath, "guaranteed"), f"guaranteed ({g}) is above limit ({lim})")

    user_default = None
    if "user-default" in data:
        check_entry(data["user-default"], (*path, "user-default"))
        user_default = _entry(data["user-default"])
    groups = {}
    for name, entry in data.get("groups", {}).items():
        check_entry(entry, (*path, "groups", name))
        groups[name] = _entry(entry)
    users = {}
    for name, entry in data.get("users", {}).items():
        check_entry(entry, (*path, "users", name))
        users[name] = _entry(entry)
    return PoolQuota(
        borrowing=data.get("borrowing", True),
        user_default=user_default,
        groups=groups,
        users=users,
    )


def _defaults(data: Mapping[str, Any] | None) -> Defaults:
    data = data or {}
    return Defaults(
        cpu=data.get("cpu"),
        memory=data.get("memory"),
        cpu_per_gpu=data.get("cpu-per-gpu"),
        memory_per_gpu=data.get("memory-per-gpu"),
    )


def _build_pool(c: Checker, data: Mapping[str, Any]) -> Pool:
    doc = c.doc
    limits_data = data.get("limits", {})
    limits = Limits(
        max_gpus=limits_data.get("max-gpus"),
        min_gpus=limits_data.get("min-gpus", 0),
        allowed_gpus=tuple(limits_data.get("allowed-gpus", ())),
    )
    if limits.max_gpus is not None and limits.min_gpus > limits.max_gpus:
        c.add(("limits", "min-gpus"), f"min-gpus ({limits.min_gpus}) is above max-gpus")
    platforms = {
        name: Platform(
            name=name,
            gpu_type=p["gpu-type"],
            description=p.get("description"),
            defaults=_defaults(p["defaults"]) if "defaults" in p else None,
            template=p.get("template", {}),
        )
        for name, p in data.get("platforms", {}).items()
        if "gpu-type" in p
    }
    default_platform = data.get("default-platform")
    if default_platform is not None and default_platform not in platforms:
        known = ", ".join(platforms) if platforms else "none"
        c.add(
            ("default-platform",),
            f"unknown platform {default_platform!r} (this pool's platforms: {known})",
        )
    access = None
    if "access" in data:
        access = Access(
            users=tuple(data["access"].get("users", ())),
            groups=tuple(data["access"].get("groups", ())),
        )
    idle = read_idle(c, data["idle"], ("idle",)) if "idle" in data else None
    max_runtime = (
        read_max_runtime(c, data["max-runtime"], ("max-runtime",))
        if "max-runtime" in data
        else None
    )
    shapes = _shape_rules(c, data.get("shapes") or [])
    nodes = {host: n["gpu-type"] for host, n in data.get("nodes", {}).items() if "gpu-type" in n}
    recut = read_recut(c, data["recut"], nodes, ("recut",)) if data.get("recut") else None
    pool_meta = data.get("pool", {})
    return Pool(
        name=pool_meta.get("name", ""),
        description=pool_meta.get("description"),
        nodes=nodes,
        selector=data.get("selector", {}),
        access=access,
        quota=_pool_quota(c, data["quota"], ("quota",)) if "quota" in data else None,
        defaults=_defaults(data.get("defaults")),
        limits=limits,
        platforms=platforms,
        default_platform=default_platform,
        template=data.get("template", {}),
        placement=data.get("placement", "binpack"),
        idle=idle,
        max_runtime=max_runtime,
        shapes=shapes,
        recut=recut,
        source=Source(doc.file, doc.line_of(("pool", "name"))),
    )


def _shape_rules(c: Checker, items: Sequence[Mapping[str, Any]]) -> tuple[ShapeRule, ...]:
    out: list[ShapeRule] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        shape_id = item.get("id")
        if not isinstance(shape_id, str):
            continue  # reported by the shape
        if not is_shape_id(shape_id):
            c.add(
                ("shapes", i, "id"),
                f"{shape_id!r} is not a shape id (whole, mig-<profile> such as mig-3g.40gb, "
                "shared-<replicas>, mps-<replicas>, hami-<split>)",
            )
            continue
        if shape_id in seen:
            c.add(("shapes", i, "id"), f"shape {shape_id} is listed twice")
            continue
        seen.add(shape_id)
        line = c.doc.line_of(("shapes", i, "id"))
        limit = item.get("max-runtime")
        out.append(
            ShapeRule(
                shape_id,
                item.get("name"),
                item.get("max-per-user"),
                line,
                max_runtime=read_max_runtime(c, limit, ("shapes", i, "max-runtime"))
                if limit
                else None,
            )
        )
    return tuple(out)


def _cap(data: Mapping[str, Any]) -> ResourceCap:
    return ResourceCap(cpu=data.get("cpu"), memory=data.get("memory"), gpu=data.get("gpu"))


def _budgets(c: Checker, data: Mapping[str, Any]) -> tuple[Budget, ...]:
    """The budgets of a checked quota document; a budget for both or neither of a user and a
    group is a problem at its line."""
    raw = c.doc.data.get("budgets") if isinstance(c.doc.data, Mapping) else None
    out = []
    for i, item in enumerate(data.get("budgets") or ()):
        path: tuple[PathElem, ...] = ("budgets", i)
        written = raw[i] if isinstance(raw, list) and i < len(raw) else item
        keys = {k for k in ("user", "group") if isinstance(written, Mapping) and k in written}
        if len(keys) != 1:
            c.add(
                path,
                "a budget is for a user or a group: give 'user' or 'group'"
                if not keys
                else "a budget is for a user or a group: give either 'user' or 'group', not both",
            )
            continue
        [key] = keys
        if key not in item or "gpu_hours" not in item:
            continue  # its problem is already reported
        out.append(
            Budget(
                subject=f"{key}:{item[key]}",
                gpu_hours=float(item["gpu_hours"]),
                window=item.get("window") or "30d",
                pools=tuple(item.get("pools") or ()),
                on_exhausted=item.get("on_exhausted"),
                warn_percent=_warn_percent(c, item, path),
                source=Source(c.doc.file, c.doc.line_of(path)),
            )
        )
    return tuple(out)


def _warn_percent(c: Checker, item: Mapping[str, Any], path: tuple[PathElem, ...]) -> float | None:
    value = item.get("warn_percent")
    if value is None:
        return None
    if value > 100:
        c.add((*path, "warn_percent"), f"must be at most 100, not {value:g}")
        return None
    return float(value)


def _build_quota(c: Checker, data: Mapping[str, Any]) -> QuotaDocument:
    doc = c.doc
    meta = data.get("quota", {})
    dp = data.get("default-pools")
    return QuotaDocument(
        name=meta.get("name", ""),
        description=meta.get("description"),
        namespaces={k: _cap(v) for k, v in data.get("namespace", {}).items()},
        users={k: _cap(v) for k, v in data.get("users", {}).items()},
        default=_cap(data["default"]) if "default" in data else None,
        pools={k: _pool_quota(c, v, ("pools", k)) for k, v in data.get("pools", {}).items()},
        default_pools=(
            DefaultPools(
                groups={g: tuple(p) for g, p in dp.get("groups", {}).items()},
                fallback=tuple(dp.get("fallback", ())),
            )
            if dp is not None
            else None
        ),
        budgets=_budgets(c, data),
        source=Source(doc.file, doc.line_of(("quota", "name"))),
    )


def _check_document(doc: Document) -> tuple[_Loaded | None, list[Problem]]:
    c = Checker(doc)
    data = doc.data
    if not isinstance(data, Mapping):
        c.add((), "a pool file document must be a mapping with 'kind: pool', 'quota' or 'booking'")
        return None, c.problems
    kind = data.get("kind")
    if kind in POOL_KINDS:
        checked = POOL_DOCUMENT.check(c, data, ())
        loaded = _Loaded(doc, pool=_build_pool(c, checked))
    elif kind == QUOTA_KIND:
        checked = QUOTA_DOCUMENT.check(c, data, ())
        loaded = _Loaded(doc, quota=_build_quota(c, checked))
    elif kind == BOOKING_KIND:
        checked = BOOKING_DOCUMENT.check(c, data, ())
        loaded = _Loaded(doc, booking=build_booking(c, checked))
    elif kind is None:
        c.add((), "missing required key 'kind' (pool, quota or booking)")
        return None, c.problems
    else:
        c.add(("kind",), f"unknown kind {kind!r}; expected pool, quota or booking")
        return None, c.problems
    return loaded, c.problems


class _CrossChecker:
    """Rules between documents: duplicates, and references to pools that don't exist."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, doc: Document, path: Sequence[PathElem], message: str) -> None:
        self.problems.append(doc.problem(path, message))


def _assemble(loaded: list[_Loaded], problems: list[Problem]) -> Registry:
    x = _CrossChecker()
    pools: dict[str, Pool] = {}
    node_owner: dict[str, tuple[str, Source]] = {}
    for item in loaded:
        pool = item.pool
        if pool is None or not pool.name:
            continue
        doc = item.doc
        first = pools.get(pool.name)
        if first is not None:
            x.add(
                doc,
                ("pool", "name"),
                f"duplicate pool name {pool.name!r}; already defined at {first.source}",
            )
            continue
        pools[pool.name] = pool
        for host in pool.nodes:
            owner = node_owner.get(host)
            if owner is not None:
                x.add(
                    doc,
                    ("nodes", host),
                    f"node {host!r} is already in pool {owner[0]!r} ({owner[1]}); "
                    "a node belongs to one pool",
                )
            else:
                node_owner[host] = (pool.name, Source(doc.file, doc.line_of(("nodes", host))))

    known = set(pools) | {DEFAULT_POOL}
    # the pools named in "unknown pool" messages (a few, however many pools there are)
    shown = sorted(known)
    known_names = ", ".join(shown[:KNOWN_POOLS_SHOWN]) + (
        f", ... ({len(shown)} pools)" if len(shown) > KNOWN_POOLS_SHOWN else ""
    )

    def check_pool_ref(doc: Document, path: tuple[PathElem, ...], name: str) -> None:
        if name not in known:
            x.add(doc, path, f"unknown pool {name!r} (pools: {known_names})")

    pool_quotas: dict[str, PoolQuota] = {}
    quota_where: dict[str, Source] = {}
    for item in loaded:
        pool = item.pool
        if pool is not None and pool.quota is not None and pools.get(pool.name) is pool:
            pool_quotas[pool.name] = pool.quota
            quota_where[pool.name] = Source(item.doc.file, item.doc.line_of(("quota",)))

    group_caps: dict[str, ResourceCap] = {}
    user_caps: dict[str, ResourceCap] = {}
    cap_where: dict[tuple[str, str], Source] = {}
    default_cap: ResourceCap | None = None
    group_pools: dict[str, tuple[str, ...]] = {}
    fallback: tuple[str, ...] = ()
    quota_docs: list[QuotaDocument] = []
    quota_names: dict[str, Source] = {}
    budgets: list[Budget] = []
    budget_where: dict[tuple[str, tuple[str, ...]], Source] = {}

    def claim(doc: Document, path: tuple[PathElem, ...], key: tuple[str, str], what: str) -> bool:
        where = cap_where.get(key)
        if where is not None:
            x.add(doc, path, f"{what} is already set at {where}")
            return False
        cap_where[key] = Source(doc.file, doc.line_of(path))
        return True

    for item in loaded:
        q = item.quota
        if q is None:
            continue
        doc = item.doc
        if q.name in quota_names:
            x.add(
                doc,
                ("quota", "name"),
                f"duplicate quota name {q.name!r}; already defined at {quota_names[q.name]}",
            )
            continue
        quota_names[q.name] = Source(doc.file, doc.line_of(("quota", "name")))
        quota_docs.append(q)
        for g, cap in q.namespaces.items():
            if claim(doc, ("namespace", g), ("group", g), f"the quota of group {g!r}"):
                group_caps[g] = cap
        for u, cap in q.users.items():
            if claim(doc, ("users", u), ("user", u), f"the quota of user {u!r}"):
                user_caps[u] = cap
        if q.default is not None and claim(
            doc, ("default",), ("default", ""), "the default user quota"
        ):
            default_cap = q.default
        for pool_name, pq in q.pools.items():
            check_pool_ref(doc, ("pools", pool_name), pool_name)
            if pool_name in quota_where:
                x.add(
                    doc,
                    ("pools", pool_name),
                    f"the quota of pool {pool_name!r} is already set at {quota_where[pool_name]}",
                )
                continue
            pool_quotas[pool_name] = pq
            quota_where[pool_name] = Source(doc.file, doc.line_of(("pools", pool_name)))
        if q.default_pools is not None:
            for g, plist in q.default_pools.groups.items():
                path: tuple[PathElem, ...] = ("default-pools", "groups", g)
                for i, p in enumerate(plist):
                    check_pool_ref(doc, (*path, i), p)
                if claim(doc, path, ("default-pools", g), f"the default pools of group {g!r}"):
                    group_pools[g] = plist
            if q.default_pools.fallback:
                path = ("default-pools", "fallback")
                for i, p in enumerate(q.default_pools.fallback):
                    check_pool_ref(doc, (*path, i), p)
                if claim(doc, path, ("fallback", ""), "the fallback pool list"):
                    fallback = q.default_pools.fallback
        raw_budgets = doc.data.get("budgets") or ()
        # each budget's index in the document (budgets with problems are not in q.budgets)
        index_at = {doc.line_of(("budgets", k)): k for k in reversed(range(len(raw_budgets)))}
        for budget in q.budgets:
            path = ("budgets", index_at.get(budget.source.line, 0))
            for j, p in enumerate(budget.pools):
                check_pool_ref(doc, (*path, "pools", j), p)
            key = (budget.subject, tuple(sorted(budget.pools)))
            if key in budget_where:
                where = "all pools" if not budget.pools else ", ".join(budget.pools)
                x.add(
                    doc,
                    path,
                    f"the budget of {budget.kind} {budget.name!r} in {where} is already set at "
                    f"{budget_where[key]}",
                )
                continue
            budget_where[key] = budget.source
            budgets.append(budget)

    bookings, booking_problems = check_bookings(
        [(item.doc, item.booking) for item in loaded if item.booking is not None],
        pools,
        known,
        known_names,
    )
    problems.extend(x.problems)
    problems.extend(booking_problems)
    return Registry(
        pools=pools,
        quota_documents=tuple(quota_docs),
        pool_quotas=pool_quotas,
        group_caps=group_caps,
        user_caps=user_caps,
        default_user_cap=default_cap,
        default_pools=DefaultPools(groups=group_pools, fallback=fallback),
        budgets=tuple(budgets),
        bookings=bookings,
    )


def _load(documents: Iterable[Document], problems: list[Problem]) -> Registry:
    loaded: list[_Loaded] = []
    for doc in documents:
        item, doc_problems = _check_document(doc)
        problems.extend(doc_problems)
        if item is not None:
            loaded.append(item)
    return _assemble(loaded, problems)


def in_reading_order(problems: list[Problem], files: Sequence[str]) -> list[Problem]:
    """Problems by file (in the order read), then line: how an admin walks through them."""
    order = {f: i for i, f in enumerate(files)}
    return sorted(problems, key=lambda p: (order.get(p.file, len(order)), p.line))


def load_texts(texts: Iterable[tuple[str, str]]) -> Registry:
    """Load ``(text, file name)`` pairs as one registry, or raise with every problem in all."""
    problems: list[Problem] = []
    documents: list[Document] = []
    names: list[str] = []
    for text, name in texts:
        names.append(name)
        try:
            documents.extend(load_documents(text, name))
        except DocumentError as e:
            problems.extend(e.problems)
    registry = _load(documents, problems)
    if problems:
        raise DocumentError(in_reading_order(problems, names))
    return registry


def load_parsed(documents: Iterable[Document], files: Sequence[str]) -> Registry:
    """Like :func:`load_texts` for documents already parsed (``files``: their files, in the
    order their problems are listed)."""
    problems: list[Problem] = []
    registry = _load(documents, problems)
    if problems:
        raise DocumentError(in_reading_order(problems, files))
    return registry


def load_string(text: str, source: str = "<request>") -> Registry:
    """Load one YAML or JSON body (what the service receives) into a registry."""
    return load_texts([(text, source)])


def check_texts(
    texts: Iterable[tuple[str, str]],
    files: Sequence[str] | None = None,
    problems: Iterable[Problem] = (),
) -> LoadReport:
    """Like :func:`load_texts` but reports per file instead of raising (``gpupool validate``).

    ``files`` are every file the caller meant to load, in order, including those it could not
    read (their problems come in ``problems``); by default, the names of ``texts``.
    """
    texts = list(texts)
    report = LoadReport(
        files=list(files) if files is not None else [name for _, name in texts],
        problems=list(problems),
    )
    documents: list[Document] = []
    for text, name in texts:
        try:
            documents.extend(load_documents(text, name))
        except DocumentError as e:
            report.problems.extend(e.problems)
    registry = _load(documents, report.problems)
    report.problems = in_reading_order(report.problems, report.files)
    for f in report.files:
        report.pools_per_file[f] = sum(
            1 for p in registry.pools.values() if p.source is not None and p.source.file == f
        )
    return report
