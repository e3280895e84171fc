"""YAML documents that remember where each value came from.

Cluster files and pool files are both checked field by field, and every problem is reported as
``FILE:LINE: field.path: message`` so an admin can jump straight to it. PyYAML throws line numbers
away once a document is constructed, so this module composes the node tree first, records the line
of every mapping key and sequence item by path, and only then builds the plain Python value.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

PathElem = str | int
Path = tuple[PathElem, ...]


def format_path(path: Sequence[PathElem]) -> str:
    """``("nodes", 0, "labels")`` -> ``nodes[0].labels``."""
    out = ""
    for elem in path:
        if isinstance(elem, int):
            out += f"[{elem}]"
        else:
            out += ("." if out else "") + elem
    return out or "(document)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one field of one document."""

    file: str
    line: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path}: {self.message}"


class DocumentError(ValueError):
    """Raised with every problem found in a set of documents; nothing was applied."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass
class Document:
    """One YAML document: its value plus the source line of every path inside it."""

    data: Any
    file: str
    start_line: int
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Sequence[PathElem]) -> int:
        """The line of ``path``, or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.start_line

    def problem(self, path: Sequence[PathElem], message: str) -> Problem:
        return Problem(self.file, self.line_of(path), format_path(path), message)


def _record(node: yaml.Node, path: Path, lines: dict[Path, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            child = (*path, str(key))
            lines[child] = key_node.start_mark.line + 1
            _record(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            lines[child] = item.start_mark.line + 1
            _record(item, child, lines)


def load_documents(text: str, file: str = "<string>") -> list[Document]:
    """Parse every ``---`` separated document in ``text``.

    Raises :class:`DocumentError` for YAML syntax errors, pointing at the line PyYAML blames.
    Empty documents are skipped.
    """
    try:
        # the reader rejects some characters (NUL...) as soon as it is made
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as e:
        raise DocumentError([Problem(file, 1, "(yaml)", f"invalid YAML: {e}")]) from None
    docs: list[Document] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node() said there was one
                continue
            data = loader.construct_document(node)
            lines: dict[Path, int] = {}
            _record(node, (), lines)
            if data is None:
                continue
            docs.append(Document(data, file, node.start_mark.line + 1, lines))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        msg = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise DocumentError([Problem(file, line, "(yaml)", f"invalid YAML: {msg}")]) from None
    except yaml.YAMLError as e:
        raise DocumentError([Problem(file, 1, "(yaml)", f"invalid YAML: {e}")]) from None
    except RecursionError:
        raise DocumentError(
            [Problem(file, 1, "(yaml)", "invalid YAML: nested too deeply")]
        ) from None
    finally:
        loader.dispose()
    return docs


def unknown_key_message(key: str, allowed: Iterable[str]) -> str:
    """``unknown key 'gpu_type'; did you mean 'gpu-type'?`` (suggestion only when one is close)."""
    allowed = sorted(allowed)
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if not close:
        # separators are the most common slip: gpu_type, gpuType, gpu-type
        norm = key.replace("_", "").replace("-", "").lower()
        close = [a for a in allowed if a.replace("_", "").replace("-", "").lower() == norm][:1]
    msg = f"unknown key {key!r}"
    if close:
        msg += f"; did you mean {close[0]!r}?"
    else:
        msg += f" (allowed: {', '.join(allowed)})"
    return msg
