"""The registry as named YAML texts, and how pool and quota changes rewrite them.

Both registry backends store documents under names: files of the pools directory, or keys of a
ConfigMap. A change through the API is computed here, without I/O, as a new set of texts; the
backend then writes only the names whose text changed and removes the ones that went away.

Rules (the admin's files stay recognisable):

- a document written through the API gets its own name, ``<name>.yaml``, in gpuctl's format;
- a document replaced where it was alone keeps its file name (``training.yaml`` stays);
- a document replaced or deleted from a file it shares with others is taken out of that file, and
  the other documents of the file are written back as they load (comments there are lost);
- a file left without documents is removed.

The request is checked together with everything that stays, under the name ``<request>``, so a
problem in the body is reported at its own line, and nothing changes unless the whole new set of
documents loads.

A change costs in proportion to its size: each text is parsed once (a layout keeps the parsed
documents of its texts, and the next layout reuses them for every text that did not change),
and the documents of a file are found through an index, not by a walk over every pool. Only the
rules between documents are checked again over the whole set, which is cheap. These functions
do no I/O, so the pool manager runs them off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import yaml

from ...core.documents.yaml_reader import (
    Document,
    DocumentError,
    Problem,
    load_documents,
    load_written_document,
)
from ...core.pools.document_spec import BOOKING_KIND, POOL_KINDS, QUOTA_KIND
from ...core.pools.model import Registry
from ...core.pools.reading import load_parsed
from ...core.pools.writing import pool_to_document, quota_to_document
from ...core.usage.labels import safe_label_value
from ..errors import ApiError, bad_request

REQUEST = "<request>"

DocKey = tuple[str, str]  # ("pool" | "quota", name)
KeyFor = Callable[[str], str]  # file stem -> storage name


Parsed = Mapping[str, Sequence[Document]]  # text name -> its documents


@dataclass(frozen=True)
class Layout:
    """Stored texts by name (in load order), the registry they load into, and their parsed
    documents (reused by the next layout for the texts that stay the same)."""

    texts: Mapping[str, str]
    registry: Registry
    parsed: Parsed = field(default_factory=dict)

    @cached_property
    def _by_file(self) -> dict[str, list[DocKey]]:
        out: dict[str, list[DocKey]] = {}
        for p in self.registry.pools.values():
            if p.source is not None:
                out.setdefault(p.source.file, []).append(("pool", p.name))
        for q in self.registry.quota_documents:
            if q.source is not None:
                out.setdefault(q.source.file, []).append(("quota", q.name))
        return out

    def documents_in(self, name: str) -> list[DocKey]:
        return list(self._by_file.get(name, ()))

    def location(self, key: DocKey) -> str | None:
        kind, name = key
        if kind == "pool":
            pool = self.registry.pools.get(name)
            return pool.source.file if pool is not None and pool.source is not None else None
        for q in self.registry.quota_documents:
            if q.name == name and q.source is not None:
                return q.source.file
        return None


def parse_texts(
    texts: Mapping[str, str], previous: Layout | None = None, written: Set[str] = frozenset()
) -> dict[str, list[Document]]:
    """Each text's documents, parsed, or taken from ``previous`` where its text is the same;
    raises :class:`DocumentError` with every text's syntax problems. The texts named in
    ``written`` hold one document each, dumped here from checked values: parsed the quick
    way (:func:`~jupyter_gpupool.core.documents.yaml_reader.load_written_document`)."""
    parsed: dict[str, list[Document]] = {}
    problems: list[Problem] = []
    for name, text in texts.items():
        if previous is not None and previous.texts.get(name) == text and name in previous.parsed:
            parsed[name] = list(previous.parsed[name])
            continue
        if name in written:
            parsed[name] = [load_written_document(text, name)]
            continue
        try:
            parsed[name] = load_documents(text, name)
        except DocumentError as e:
            problems.extend(e.problems)
    if problems:
        raise DocumentError(problems)
    return parsed


def _registry(parsed: Parsed, more: Sequence[Document] = (), more_name: str = "") -> Registry:
    files = [*parsed, *([more_name] if more_name else [])]
    return load_parsed([d for docs in parsed.values() for d in docs] + list(more), files)


def load_layout(
    texts: Mapping[str, str], previous: Layout | None = None, written: Set[str] = frozenset()
) -> Layout:
    """Load texts in name order; raises :class:`DocumentError` with every problem. Texts
    unchanged since ``previous`` are not parsed again; those in ``written`` were dumped here
    (:func:`parse_texts`)."""
    ordered = dict(sorted(texts.items()))
    parsed = parse_texts(ordered, previous, written)
    return Layout(ordered, _registry(parsed), parsed)


def empty_layout() -> Layout:
    return Layout({}, Registry())


@dataclass(frozen=True)
class Edit:
    """A computed change: the layout after it and what to write and remove to get there."""

    before: Layout
    after: Layout
    writes: Mapping[str, str] = field(default_factory=dict)
    deletes: tuple[str, ...] = ()
    created: tuple[str, ...] = ()  # names of documents that did not exist before
    replaced: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.writes or self.deletes)


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """PyYAML's safe dumper (libyaml's emitter when PyYAML has it: five times faster, and
    the texts read back the same), never writing an anchor for a value met twice: the loader
    refuses anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_document(doc: Mapping[str, Any]) -> str:
    return yaml.dump(
        dict(doc), Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False
    )


def _document_of(registry: Registry, key: DocKey) -> dict[str, Any]:
    kind, name = key
    if kind == "pool":
        return pool_to_document(registry.pools[name])
    for q in registry.quota_documents:
        if q.name == name:
            return quota_to_document(q)
    raise KeyError(key)  # pragma: no cover - keys come from the registry itself


def file_stem(name: str) -> str:
    """A file (and ConfigMap key) name for a document name: label-safe, so never a path."""
    return safe_label_value(name) or "document"


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    stem, dot, ext = name.rpartition(".")
    base, suffix = (stem, f".{ext}") if dot else (name, "")
    n = 2
    while f"{base}-{n}{suffix}" in taken:
        n += 1
    return f"{base}-{n}{suffix}"


def _body(body: str, max_documents: int | None) -> list[Document]:
    """The body's documents (syntax errors raise DocumentError); a 400 past ``max_documents``,
    found as soon as the one too many is read."""
    try:
        return load_documents(body, REQUEST, max_documents=max_documents)
    except DocumentError as e:
        if max_documents is not None and any(p.path == "(documents)" for p in e.problems):
            raise bad_request(
                f"the request holds more than {max_documents} documents; at most "
                f"{max_documents} are accepted (c.GPUPoolService.max_pools)"
            ) from e
        raise


def _pool_name(doc: Document) -> str | None:
    meta = doc.data.get("pool") if isinstance(doc.data, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else None


def _kinds(docs: Sequence[Document]) -> list[str]:
    """The ``kind`` of each document."""
    kinds = []
    for doc in docs:
        kind = doc.data.get("kind") if isinstance(doc.data, Mapping) else None
        kinds.append(str(kind) if kind is not None else "")
    return kinds


def _apply(
    layout: Layout,
    removed: Iterable[DocKey],
    body: Sequence[Document] | None,
    key_for: KeyFor,
) -> Edit:
    removed = set(removed)
    before = layout
    # 1. what stays: untouched texts, and shared files rewritten without the removed documents
    staying: dict[str, str] = {}
    alone_in: dict[DocKey, str] = {}  # removed document -> the file it had to itself
    for name, text in layout.texts.items():
        docs = layout.documents_in(name)
        gone = [d for d in docs if d in removed]
        if not gone:
            staying[name] = text
        elif len(gone) == len(docs):
            if len(docs) == 1:
                alone_in[docs[0]] = name
        else:
            kept = [d for d in docs if d not in removed]
            staying[name] = "---\n".join(
                dump_document(_document_of(layout.registry, d)) for d in kept
            )
    # 2. check the body together with what stays, so problems point at the body's own lines
    parsed = parse_texts(staying, layout)
    checked = _registry(parsed, body or (), REQUEST if body is not None else "")
    # 3. each document of the body gets a text of its own
    final = dict(staying)
    taken = set(staying)
    new_docs: list[tuple[DocKey, dict[str, Any]]] = [
        (("pool", p.name), pool_to_document(p))
        for p in checked.pools.values()
        if p.source is not None and p.source.file == REQUEST
    ] + [
        (("quota", q.name), quota_to_document(q))
        for q in checked.quota_documents
        if q.source is not None and q.source.file == REQUEST
    ]
    created: list[str] = []
    replaced: list[str] = []
    dumped: set[str] = set()
    for key, doc in new_docs:
        name = alone_in.get(key) or ""
        if not name or name in taken:
            name = _unique(key_for(file_stem(key[1])), taken)
        taken.add(name)
        final[name] = dump_document(doc)
        dumped.add(name)
        (replaced if key in removed else created).append(key[1])
    try:
        # only the new texts are parsed: the others are those just checked
        after = load_layout(final, Layout(staying, checked, parsed), dumped)
    except DocumentError as e:  # pragma: no cover - documents dumped from a registry load
        raise ApiError(500, "the changed documents did not load back", problems=e.problems) from e
    new_names = {k[1] for k, _ in new_docs}
    return Edit(
        before=before,
        after=after,
        writes={n: t for n, t in after.texts.items() if before.texts.get(n) != t},
        deletes=tuple(n for n in before.texts if n not in after.texts),
        created=tuple(created),
        replaced=tuple(replaced),
        removed=tuple(sorted(k[1] for k in removed if k[1] not in new_names)),
    )


def upsert_pools(layout: Layout, body: str, key_for: KeyFor, max_pools: int | None = None) -> Edit:
    """Create or replace every ``kind: pool`` document of ``body`` (its ``kind: booking``
    documents are left out: the booking desk takes them); a 400 when there would be
    more than ``max_pools`` pools (the body is not read past one document too many)."""
    # booking documents are the booking desk's (POST api/v1/pools hands them over)
    docs = [d for d in _body(body, max_pools) if _kinds([d]) != [BOOKING_KIND]]
    kinds = _kinds(docs)
    if not kinds:
        raise bad_request("the request holds no pool document")
    if QUOTA_KIND in kinds:
        raise bad_request("the request holds a quota document; send quotas with PUT api/v1/quotas")
    # The body's names decide what is being replaced (a document without a name, or a name
    # given twice, is refused when the body is checked with what stays).
    names = dict.fromkeys(n for n in map(_pool_name, docs) if n)
    replacing = [("pool", n) for n in names if n in layout.registry.pools]
    if max_pools is not None:
        total = len(layout.registry.pools) + len(names) - len(replacing)
        if total > max_pools:
            raise bad_request(
                f"the change would make {total} pools; the service keeps at most {max_pools} "
                "(c.GPUPoolService.max_pools)"
            )
    return _apply(layout, replacing, docs, key_for)


def delete_pool(layout: Layout, name: str, key_for: KeyFor) -> Edit:
    """Remove pool ``name``'s document (the caller checks that it exists)."""
    return _apply(layout, [("pool", name)], None, key_for)


def _only_comments(body: str) -> bool:
    """A body of comments only: no quota document is wanted (how gpupool deletes the last one)."""
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    return bool(lines) and all(ln.startswith("#") for ln in lines)


def replace_quotas(
    layout: Layout, body: str, key_for: KeyFor, max_documents: int | None = None
) -> Edit:
    """Replace every ``kind: quota`` document by the body's (pools' own ``quota`` stay); a 400
    past ``max_documents`` documents."""
    docs = _body(body, max_documents)
    kinds = _kinds(docs)
    if not kinds and not _only_comments(body):  # `null`, `---`: a mistake, not "none"
        raise bad_request("the request holds no quota document")
    others = sorted({k or "(none)" for k in kinds if k != QUOTA_KIND})
    if others:
        hint = "; send pools with POST api/v1/pools" if any(k in POOL_KINDS for k in others) else ""
        raise bad_request(
            f"only kind: quota documents belong here, not kind: {', '.join(others)}{hint}"
        )
    removed = [("quota", q.name) for q in layout.registry.quota_documents]
    return _apply(layout, removed, docs, key_for)
