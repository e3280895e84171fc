"""Pool and quota files as ``gpupool create``/``delete`` send them: split by kind, joined into one
request, and the service's problems pointed back at the files' own lines.

The service checks a request body as one text named ``<request>``. ``create -f a.yaml -f b.yaml``
sends the pool documents of every file in one request (so nothing is applied unless all of them
are good) and the quota documents in another; documents of the other kind are blanked line for
line, so each file's lines keep their numbers inside the request and every problem
(``<request>:57: nodes.gpu-node-9: ...``) can be reported at its file and line
(``b.yaml:12: nodes.gpu-node-9: ...``). A quota request also carries the quota documents in
force that it does not replace (``PUT api/v1/quotas`` replaces them all), first, so that a clash
with one of them is reported at the user's line and names the document in force. Pure functions,
no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..core.documents.yaml_reader import DocumentError, safe_load
from ..core.pools.document_spec import BOOKING_KIND, POOL_KINDS, QUOTA_KIND

REQUEST = "<request>"
_SEPARATOR = re.compile(r"^---(\s|#|$)")


@dataclass(frozen=True)
class Chunk:
    """One document of a file: its lines (1-based ``first``), and its kind and name if it parses."""

    first: int
    lines: tuple[str, ...]
    kind: str | None  # None: not a mapping, or not YAML (the service will say why)
    name: str | None

    @property
    def empty(self) -> bool:
        return all(not ln.strip() or ln.lstrip().startswith("#") for ln in self.lines)

    @property
    def is_pool(self) -> bool:
        return self.kind in POOL_KINDS

    @property
    def is_quota(self) -> bool:
        return self.kind == QUOTA_KIND

    @property
    def is_booking(self) -> bool:
        return self.kind == BOOKING_KIND


def _identify(text: str) -> tuple[str | None, str | None]:
    try:
        data = safe_load(text)
    except DocumentError:  # the service says why, at the line
        return None, None
    if not isinstance(data, dict):
        return None, None
    kind = data.get("kind")
    meta = data.get(kind if kind in (QUOTA_KIND, BOOKING_KIND) else "pool")
    name = meta.get("name") if isinstance(meta, dict) else None
    return (str(kind) if kind is not None else None), (str(name) if name is not None else None)


def split_documents(text: str) -> list[tuple[int, str] | Chunk]:
    """The file's lines as documents (:class:`Chunk`) and the ``---`` lines between them."""
    out: list[tuple[int, str] | Chunk] = []
    current: list[str] = []
    start = 1

    def close() -> None:
        if current:
            body = "\n".join(current)
            kind, name = _identify(body)
            out.append(Chunk(start, tuple(current), kind, name))

    lines = text.splitlines()
    for i, line in enumerate(lines, start=1):
        if _SEPARATOR.match(line):
            close()
            current = []
            start = i + 1
            out.append((i, line))
        else:
            current.append(line)
    close()
    return out


@dataclass
class Request:
    """A request body made of several files, and where each file's lines are in it."""

    text: str = ""
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last, file)
    in_force: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last, name)
    names: list[str] = field(default_factory=list)  # of the files' documents sent
    documents: int = 0

    def locate(self, line: int) -> str:
        """Where line ``line`` of the body comes from: ``FILE:LINE``, or the quota document
        in force that the CLI sent along (its lines are the CLI's, not the user's)."""
        for first, last, file in self.spans:
            if first <= line <= last:
                return f"{file}:{line - first + 1}"
        for first, last, name in self.in_force:
            if first <= line <= last:
                return f"the quota document {name!r} in force"
        return f"{REQUEST}:{line}"

    def relocate(self, problem: str) -> str:
        """Every ``<request>:N`` of a problem as the file and line it came from
        (``<request>:57: ... already set at <request>:3`` as ``b.yaml:12: ... already set in
        the quota document 'demo-quotas' in force``)."""

        def one(m: re.Match[str]) -> str:
            where = self.locate(int(m.group(2)))
            if where.startswith("the quota document"):
                return ("in " if m.group(1) else "") + where
            return (m.group(1) or "") + where

        return _LOCATION.sub(one, problem)


_LOCATION = re.compile(r"(\bat )?" + re.escape(REQUEST) + r":(\d+)")


def build_request(
    files: Iterable[tuple[str, str]],
    keep: Callable[[Chunk], bool],
    in_force: Sequence[Mapping[str, Any]] = (),
) -> Request:
    """One body of the documents of ``files`` (``(name, text)``) that ``keep`` selects, after
    the ``in_force`` documents (quota documents that stay).

    The documents in force come first: the service reports a clash at the second of two
    documents, which is then the user's, at its file and line.
    """
    req = Request()
    out: list[str] = []
    for doc in in_force:
        if out:
            out.append("---")
        first = len(out) + 1
        out.extend(yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True).splitlines())
        meta = doc.get("quota")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        req.in_force.append((first, len(out), str(name or "(unnamed)")))
    for name, text in files:
        if out:
            out.append("---")
        first = len(out) + 1
        for part in split_documents(text):
            if isinstance(part, Chunk):
                wanted = keep(part) and not part.empty
                out.extend(part.lines if wanted else [""] * len(part.lines))
                if wanted:
                    req.documents += 1
                    if part.name:
                        req.names.append(part.name)
            else:
                out.append(part[1])
        req.spans.append((first, len(out), name))
    req.text = "\n".join(out) + "\n"
    return req


def quota_text(documents: Sequence[Mapping[str, Any]]) -> str:
    """Quota documents as one body for ``PUT api/v1/quotas``; none is a body of a comment only,
    which the service takes as "no quota document"."""
    if not documents:
        return "# no quota documents\n"
    return "---\n".join(
        yaml.safe_dump(dict(d), sort_keys=False, allow_unicode=True) for d in documents
    )


def wanted(chunk: Chunk, kind: str) -> bool:
    """Pool requests take every document that is not a quota: a document of no known kind
    goes to the service, which says what is wrong with it, at its line."""
    if kind == QUOTA_KIND:
        return chunk.is_quota
    return not chunk.is_quota
