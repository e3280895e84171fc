"""Pool files: gpuctl-compatible YAML (or JSON) in, a :class:`~jupyter_gpupool.core.pools.Registry` out.

gpuctl's files load unchanged::

    kind: pool            # gpuctl also wrote `kind: resource`
    version: v0.1
    pool: {name: training-pool, description: "Large model training"}
    nodes:
      gpu-node-1: {gpu-type: A100-80G}    # or gpuType; "" = CPU-only node

Our extensions are optional extra sections of the same document (``selector``, ``access``,
``quota``, ``defaults``, ``limits``, ``platforms``, ``default-platform``, ``template``,
``placement``); ``kind: quota`` documents carry gpuctl's cluster-wide caps plus per-pool quotas
(``pools``) and the per-group default pool order (``default-pools``). ``docs/pools.md`` is the
reference; :data:`POOL_DOCUMENT` and :data:`QUOTA_DOCUMENT` below are the exact shapes, and the
JSON Schema in ``schema/pool.schema.json`` is generated from them.

Loading is all or nothing: every problem in every document is collected and raised together as a
:class:`~jupyter_gpupool.core.yamldoc.DocumentError`, and no registry is returned if there is any.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .docspec import (
    AnyValue,
    Bool,
    Checker,
    Enum,
    Field,
    Int,
    ListOf,
    MapOf,
    Quantity,
    Record,
    Str,
)
from .pools import (
    DEFAULT_POOL,
    PLACEMENTS,
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
    Source,
)
from .yamldoc import (
    MAX_TEXT_BYTES,
    Document,
    DocumentError,
    PathElem,
    Problem,
    load_documents,
)

VERSION = "v0.1"
POOL_KINDS = ("pool", "resource")
QUOTA_KIND = "quota"
FILE_SUFFIXES = (".yaml", ".yml", ".json")

# --- the shapes ----------------------------------------------------------------------------------

_GPUS = "A number of GPUs (a whole number, 0 or more)."

QUOTA_ENTRY = Record(
    description="A subject's share of the pool.",
    fields=(
        Field("guaranteed", Int(description="GPUs reserved for this subject in the pool.")),
        Field(
            "limit",
            Int(description="Hard cap on the subject's GPUs in the pool, borrowing included."),
        ),
    ),
)

POOL_QUOTA = Record(
    description="Per-pool quota: guarantees, limits and whether idle GPUs may be borrowed.",
    fields=(
        Field(
            "borrowing",
            Bool(
                description="Whether subjects may use idle GPUs beyond their guarantee "
                "(over quota; such servers can be reclaimed). Default true."
            ),
        ),
        Field(
            "user-default",
            Record(
                description="Quota of every user without an entry under 'users'. Its limit is "
                "the per-user cap on all of a user's GPUs in this pool.",
                fields=QUOTA_ENTRY.fields,
            ),
        ),
        Field("groups", MapOf(value=QUOTA_ENTRY, description="Quota per JupyterHub group.")),
        Field(
            "users",
            MapOf(
                value=QUOTA_ENTRY,
                description="Quota per JupyterHub user. The limit caps all of the user's GPUs "
                "in this pool.",
            ),
        ),
    ),
)

DEFAULTS = Record(
    description="CPU and memory requested for a server: fixed part plus a part per GPU.",
    fields=(
        Field("cpu", Quantity(description="CPU cores every server gets, e.g. 1 or 500m.")),
        Field("memory", Quantity(description="Memory every server gets, e.g. 4Gi.")),
        Field("cpu-per-gpu", Quantity(description="CPU cores added per GPU.")),
        Field("memory-per-gpu", Quantity(description="Memory added per GPU, e.g. 32Gi.")),
    ),
)

_TOLERATION = Record(
    fields=(
        Field("key", Str()),
        Field("operator", Enum(values=("Exists", "Equal"))),
        Field("value", Str()),
        Field("effect", Enum(values=("NoSchedule", "PreferNoSchedule", "NoExecute", ""))),
        Field("tolerationSeconds", Int()),
    )
)
_ENV_VAR = Record(
    fields=(
        Field("name", Str(nonempty=True), required=True),
        Field("value", Str()),
        Field("valueFrom", AnyValue()),
    )
)

TEMPLATE = Record(
    description="Pod settings merged in order (pool, then platform): mappings deep, lists of "
    "named items by name, later wins.",
    fields=(
        Field(
            "nodeSelector",
            MapOf(value=Str(syntax="label-value"), key_syntax="label-key"),
        ),
        Field("tolerations", ListOf(item=_TOLERATION)),
        Field("labels", MapOf(value=Str(syntax="label-value"), key_syntax="label-key")),
        Field("annotations", MapOf(value=Str(), key_syntax="label-key")),
        Field("env", ListOf(item=_ENV_VAR)),
        Field("image", Str(nonempty=True, description="Notebook image for this pool.")),
        Field(
            "resources",
            Record(
                fields=(
                    Field("requests", MapOf(value=Quantity())),
                    Field("limits", MapOf(value=Quantity())),
                )
            ),
        ),
    ),
)

PLATFORM = Record(
    description="A GPU type inside the pool, with its own template and defaults.",
    fields=(
        Field(
            "gpu-type",
            Str(syntax="label-value", description="The nodes' GPU type."),
            required=True,
            aliases=("gpuType",),
        ),
        Field("description", Str(nullable=True)),
        Field("defaults", DEFAULTS),
        Field("template", TEMPLATE),
    ),
)

POOL_DOCUMENT = Record(
    title="gpupool pool document",
    description="A gpuctl pool (kind: pool, version: v0.1) with optional gpupool extensions.",
    fields=(
        Field("kind", Enum(values=POOL_KINDS), required=True),
        Field("version", Enum(values=(VERSION,))),
        Field(
            "pool",
            Record(
                fields=(
                    Field(
                        "name",
                        Str(
                            syntax="label-value",
                            nonempty=True,
                            description="Pool name; also the value of the nodes' pool label.",
                        ),
                        required=True,
                    ),
                    Field("description", Str(nullable=True)),
                )
            ),
            required=True,
        ),
        Field(
            "nodes",
            MapOf(
                key_syntax="node-name",
                description="Nodes of the pool by hostname; creating the pool labels them.",
                value=Record(
                    fields=(
                        Field(
                            "gpu-type",
                            Str(
                                syntax="label-value",
                                description='GPU type of the node ("" for a CPU-only node).',
                            ),
                            required=True,
                            aliases=("gpuType",),
                        ),
                    )
                ),
            ),
        ),
        Field(
            "selector",
            MapOf(
                value=Str(syntax="label-value"),
                key_syntax="label-key",
                description="Node labels that make a node a member, instead of the pool label "
                "(as Run:ai lets any label key and value define a pool).",
            ),
        ),
        Field(
            "access",
            Record(
                description="Who may use the pool; without it, everyone.",
                fields=(
                    Field("users", ListOf(item=Str(nonempty=True), unique=True)),
                    Field("groups", ListOf(item=Str(nonempty=True), unique=True)),
                ),
            ),
        ),
        Field("quota", POOL_QUOTA),
        Field("defaults", DEFAULTS),
        Field(
            "limits",
            Record(
                description="What a single server may ask for in this pool.",
                fields=(
                    Field("max-gpus", Int(description="Most GPUs one server may use.")),
                    Field("min-gpus", Int(description="Fewest GPUs one server may use.")),
                    Field(
                        "allowed-gpus",
                        ListOf(item=Int(), unique=True, description="The GPU counts allowed."),
                    ),
                ),
            ),
        ),
        Field(
            "platforms",
            MapOf(
                value=PLATFORM,
                key_syntax="label-value",
                description="GPU types inside the pool (OSMO platforms).",
            ),
        ),
        Field(
            "default-platform",
            Str(
                syntax="label-value",
                description="Platform used when a request names no GPU type.",
            ),
        ),
        Field("template", TEMPLATE),
        Field(
            "placement",
            Enum(
                values=PLACEMENTS,
                description="binpack fills the fullest node that fits; spread the emptiest.",
            ),
        ),
    ),
)

_CAP = Record(
    description="gpuctl quota entry; only gpu is enforced by gpupool.",
    fields=(
        Field("cpu", Quantity()),
        Field("memory", Quantity()),
        Field("gpu", Int(allow_str=True, description=_GPUS)),
    ),
)

QUOTA_DOCUMENT = Record(
    title="gpupool quota document",
    description="A gpuctl quota (kind: quota, version: v0.1) with optional gpupool extensions.",
    fields=(
        Field("kind", Enum(values=(QUOTA_KIND,)), required=True),
        Field("version", Enum(values=(VERSION,))),
        Field(
            "quota",
            Record(
                fields=(
                    Field("name", Str(nonempty=True), required=True),
                    Field("description", Str(nullable=True)),
                )
            ),
            required=True,
        ),
        Field(
            "namespace",
            MapOf(
                value=_CAP,
                description="gpuctl namespaces; each caps the JupyterHub group of that name "
                "across all pools.",
            ),
        ),
        Field(
            "users",
            MapOf(value=_CAP, description="Caps one JupyterHub user across all pools."),
        ),
        Field("default", _CAP),
        Field(
            "pools",
            MapOf(value=POOL_QUOTA, description="Per-pool quota, as a pool's 'quota' section."),
        ),
        Field(
            "default-pools",
            Record(
                description="Pool priority lists for users who choose none.",
                fields=(
                    Field(
                        "groups",
                        MapOf(value=ListOf(item=Str(nonempty=True), unique=True)),
                    ),
                    Field("fallback", ListOf(item=Str(nonempty=True), unique=True)),
                ),
            ),
        ),
    ),
)

# --- loading -------------------------------------------------------------------------------------


@dataclass
class _Loaded:
    """What one valid document contributed, with where its parts were written."""

    doc: Document
    pool: Pool | None = None
    quota: QuotaDocument | None = None


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
    pool_meta = data.get("pool", {})
    return Pool(
        name=pool_meta.get("name", ""),
        description=pool_meta.get("description"),
        nodes={host: n["gpu-type"] for host, n in data.get("nodes", {}).items() if "gpu-type" in n},
        selector=data.get("selector", {}),
        access=access,
        quota=_pool_quota(c, data["quota"], ("quota",)) if "quota" in data else None,
        defaults=_defaults(data.get("defaults")),
        limits=limits,
        platforms=platforms,
        default_platform=default_platform,
        template=data.get("template", {}),
        placement=data.get("placement", "binpack"),
        source=Source(doc.file, doc.line_of(("pool", "name"))),
    )


def _cap(data: Mapping[str, Any]) -> ResourceCap:
    return ResourceCap(cpu=data.get("cpu"), memory=data.get("memory"), gpu=data.get("gpu"))


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
        source=Source(doc.file, doc.line_of(("quota", "name"))),
    )


def _check_document(doc: Document) -> tuple[_Loaded | None, list[Problem]]:
    c = Checker(doc)
    data = doc.data
    if not isinstance(data, Mapping):
        c.add((), "a pool file document must be a mapping with 'kind: pool' or 'kind: quota'")
        return None, c.problems
    kind = data.get("kind")
    if kind in POOL_KINDS:
        checked = POOL_DOCUMENT.check(c, data, ())
        loaded = _Loaded(doc, pool=_build_pool(c, checked))
    elif kind == QUOTA_KIND:
        checked = QUOTA_DOCUMENT.check(c, data, ())
        loaded = _Loaded(doc, quota=_build_quota(c, checked))
    elif kind is None:
        c.add((), "missing required key 'kind' (pool or quota)")
        return None, c.problems
    else:
        c.add(("kind",), f"unknown kind {kind!r}; expected pool or quota")
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

    def check_pool_ref(doc: Document, path: tuple[PathElem, ...], name: str) -> None:
        if name not in known:
            names = ", ".join(sorted(known))
            x.add(doc, path, f"unknown pool {name!r} (pools: {names})")

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

    problems.extend(x.problems)
    return Registry(
        pools=pools,
        quota_documents=tuple(quota_docs),
        pool_quotas=pool_quotas,
        group_caps=group_caps,
        user_caps=user_caps,
        default_user_cap=default_cap,
        default_pools=DefaultPools(groups=group_pools, fallback=fallback),
    )


def _load(documents: Iterable[Document], problems: list[Problem]) -> Registry:
    loaded: list[_Loaded] = []
    for doc in documents:
        item, doc_problems = _check_document(doc)
        problems.extend(doc_problems)
        if item is not None:
            loaded.append(item)
    return _assemble(loaded, problems)


def _in_reading_order(problems: list[Problem], files: Sequence[str]) -> list[Problem]:
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
        raise DocumentError(_in_reading_order(problems, names))
    return registry


def load_string(text: str, source: str = "<request>") -> Registry:
    """Load one YAML or JSON body (what the service receives) into a registry."""
    return load_texts([(text, source)])


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files to read: each file as given, each directory's pool files (not recursive, sorted)."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(
                str(child)
                for child in sorted(path.iterdir())
                if child.is_file()
                and child.suffix in FILE_SUFFIXES
                and not child.name.startswith(".")
            )
        else:
            out.append(str(p))
    return out


def _read(files: Iterable[str], problems: list[Problem]) -> list[tuple[str, str]]:
    texts = []
    for f in files:
        try:
            size = Path(f).stat().st_size
            if size > MAX_TEXT_BYTES:  # refused before it is read into memory
                problems.append(
                    Problem(f, 1, "(file)", f"{size} bytes is too large; at most {MAX_TEXT_BYTES}")
                )
                continue
            texts.append((Path(f).read_text(encoding="utf-8"), f))
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem(f, 1, "(file)", f"cannot read: {e}"))
    return texts


def load_paths(paths: Iterable[str | os.PathLike[str]]) -> Registry:
    """Load files and directories as one registry, or raise with every problem in all of them."""
    problems: list[Problem] = []
    files = expand_paths(paths)
    texts = _read(files, problems)
    try:
        registry = load_texts(texts)
    except DocumentError as e:
        problems.extend(e.problems)
    if problems:
        raise DocumentError(_in_reading_order(problems, files))
    return registry


def check_paths(paths: Iterable[str | os.PathLike[str]]) -> LoadReport:
    """Like :func:`load_paths` but reports per file instead of raising (``gpupool validate``)."""
    report = LoadReport()
    report.files = expand_paths(paths)
    texts = _read(report.files, report.problems)
    documents: list[Document] = []
    for text, name in texts:
        try:
            documents.extend(load_documents(text, name))
        except DocumentError as e:
            report.problems.extend(e.problems)
    registry = _load(documents, report.problems)
    report.problems = _in_reading_order(report.problems, report.files)
    for f in report.files:
        report.pools_per_file[f] = sum(
            1 for p in registry.pools.values() if p.source is not None and p.source.file == f
        )
    return report


# --- back to documents ---------------------------------------------------------------------------


def _entry_doc(e: QuotaEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"guaranteed": e.guaranteed}
    if e.limit is not None:
        out["limit"] = e.limit
    return out


def pool_quota_to_dict(q: PoolQuota) -> dict[str, Any]:
    out: dict[str, Any] = {"borrowing": q.borrowing}
    if q.user_default is not None:
        out["user-default"] = _entry_doc(q.user_default)
    if q.groups:
        out["groups"] = {k: _entry_doc(v) for k, v in q.groups.items()}
    if q.users:
        out["users"] = {k: _entry_doc(v) for k, v in q.users.items()}
    return out


def _defaults_doc(d: Defaults) -> dict[str, Any]:
    pairs = (
        ("cpu", d.cpu),
        ("memory", d.memory),
        ("cpu-per-gpu", d.cpu_per_gpu),
        ("memory-per-gpu", d.memory_per_gpu),
    )
    return {k: v for k, v in pairs if v is not None}


def pool_to_document(pool: Pool) -> dict[str, Any]:
    """The pool as a gpuctl ``kind: pool`` document; extensions only where the pool has them.

    Loading the result gives an equal :class:`Pool` (the service echoes pools this way). gpuctl's
    ``gpuType`` spelling comes back as ``gpu-type``.
    """
    doc: dict[str, Any] = {"kind": "pool", "version": VERSION, "pool": {"name": pool.name}}
    if pool.description is not None:
        doc["pool"]["description"] = pool.description
    doc["nodes"] = {host: {"gpu-type": t} for host, t in pool.nodes.items()}
    if pool.selector:
        doc["selector"] = dict(pool.selector)
    if pool.access is not None:
        doc["access"] = {"users": list(pool.access.users), "groups": list(pool.access.groups)}
    if pool.quota is not None:
        doc["quota"] = pool_quota_to_dict(pool.quota)
    if defaults := _defaults_doc(pool.defaults):
        doc["defaults"] = defaults
    limits: dict[str, Any] = {}
    if pool.limits.max_gpus is not None:
        limits["max-gpus"] = pool.limits.max_gpus
    if pool.limits.min_gpus:
        limits["min-gpus"] = pool.limits.min_gpus
    if pool.limits.allowed_gpus:
        limits["allowed-gpus"] = list(pool.limits.allowed_gpus)
    if limits:
        doc["limits"] = limits
    if pool.platforms:
        platforms: dict[str, Any] = {}
        for name, p in pool.platforms.items():
            pd: dict[str, Any] = {"gpu-type": p.gpu_type}
            if p.description is not None:
                pd["description"] = p.description
            if p.defaults is not None:
                pd["defaults"] = _defaults_doc(p.defaults)
            if p.template:
                pd["template"] = _plain(p.template)
            platforms[name] = pd
        doc["platforms"] = platforms
    if pool.default_platform is not None:
        doc["default-platform"] = pool.default_platform
    if pool.template:
        doc["template"] = _plain(pool.template)
    if pool.placement != "binpack":
        doc["placement"] = pool.placement
    return doc


def _cap_doc(cap: ResourceCap) -> dict[str, Any]:
    pairs = (("cpu", cap.cpu), ("memory", cap.memory), ("gpu", cap.gpu))
    return {k: v for k, v in pairs if v is not None}


def quota_to_document(q: QuotaDocument) -> dict[str, Any]:
    """The quota document as gpuctl's ``kind: quota`` plus our extensions where set."""
    doc: dict[str, Any] = {"kind": QUOTA_KIND, "version": VERSION, "quota": {"name": q.name}}
    if q.description is not None:
        doc["quota"]["description"] = q.description
    if q.namespaces:
        doc["namespace"] = {k: _cap_doc(v) for k, v in q.namespaces.items()}
    if q.users:
        doc["users"] = {k: _cap_doc(v) for k, v in q.users.items()}
    if q.default is not None:
        doc["default"] = _cap_doc(q.default)
    if q.pools:
        doc["pools"] = {k: pool_quota_to_dict(v) for k, v in q.pools.items()}
    if q.default_pools is not None:
        dp: dict[str, Any] = {}
        if q.default_pools.groups:
            dp["groups"] = {g: list(p) for g, p in q.default_pools.groups.items()}
        if q.default_pools.fallback:
            dp["fallback"] = list(q.default_pools.fallback)
        doc["default-pools"] = dp
    return doc


def registry_to_documents(registry: Registry) -> list[dict[str, Any]]:
    """Every pool and quota document of the registry, in load order."""
    return [pool_to_document(p) for p in registry.pools.values()] + [
        quota_to_document(q) for q in registry.quota_documents
    ]


def _plain(value: Any) -> Any:
    """A JSON-ready deep copy (mappings to dicts, sequences to lists)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
