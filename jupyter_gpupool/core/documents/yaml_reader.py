"""YAML documents that remember where each value came from.

Cluster files and pool files are both checked field by field, and every problem is reported as
``FILE:LINE: field.path: message`` so an admin can jump straight to it. PyYAML throws line numbers
away once a document is constructed, so this module composes the node tree first, records the line
of every mapping key and sequence item by path, and only then builds the plain Python value.

Documents here are small, flat configuration written by people, so the loader refuses what such a
document never needs and what lets a few hundred bytes cost minutes and gigabytes to load: anchors
and aliases (nested aliases expand exponentially, "billion laughs"), texts over
:data:`MAX_TEXT_BYTES` and nesting deeper than :data:`MAX_DEPTH`. It also refuses what would
otherwise be read wrong or not at all: a key given twice in one mapping (PyYAML keeps the last one
silently: a quota naming a pool twice would keep its second limit), and whole numbers longer than
:data:`MAX_NUMBER_DIGITS` (Python refuses to convert more than 4,300 digits, with a ValueError
that would escape as a crash). Each refusal names the line.

Scanning and parsing are libyaml's when PyYAML was built with it (six times faster than PyYAML's
own, which a pool set of a thousand documents notices); the checks above run on its events, in
the composer, so both parsers refuse the same documents.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.composer import Composer

from .whole_numbers import MAX_NUMBER_DIGITS

if yaml.__with_libyaml__:
    from yaml._yaml import CParser

PathElem = str | int
Path = tuple[PathElem, ...]

MAX_TEXT_BYTES = 4 * 1024 * 1024
"""The largest text loaded (a pool of 5,000 nodes, one line each, is about 150 KB)."""

MAX_DEPTH = 32
"""The deepest nesting of mappings and sequences (a pool document's deepest field, a template
toleration's key, is 4 levels down; a cluster file's is about as deep)."""

_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"  # ``<<``: merges the mapping it names, not a key


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


class _Refused(yaml.YAMLError):
    """Something the strict loader does not accept, the line (1-based) where it starts, and the
    path of the field when it is known."""

    def __init__(self, line: int, message: str, path: Path | None = None):
        super().__init__(message)
        self.line = line
        self.message = message
        self.path = path


def _line(mark: Any) -> int:
    return mark.line + 1 if mark is not None else 1


class StrictComposer(Composer):
    """PyYAML's composer without anchors or aliases, with a nesting limit, refusing a key given
    twice in a mapping and whole numbers over :data:`MAX_NUMBER_DIGITS` digits.

    The checks sit in the composer, before any node is shared or built, so a refused document
    costs no more than reading it up to the offending line. The composer keeps the path of the
    node being composed, so a refusal names the field as the documents' checks do.
    """

    peek_event: Callable[[], Any]  # the parser's, beside this class in each loader

    def __init__(self) -> None:
        Composer.__init__(self)  # not super(): the loaders' other bases take the stream
        self._depth = 0
        self._path: list[PathElem] = []

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        line = _line(event.start_mark)
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                line,
                f"YAML aliases (*{event.anchor}) are not accepted; write the value out",
            )
        if getattr(event, "anchor", None) is not None:
            raise _Refused(
                line,
                f"YAML anchors (&{event.anchor}) are not accepted; write the value out",
            )
        nests = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        if nests:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Refused(line, f"nested more than {MAX_DEPTH} levels deep")
        # index: None for a mapping's key, the key's node for its value, a sequence item's index
        named = index is not None
        if named:
            self._path.append(_key_of(index) if isinstance(index, yaml.Node) else index)
        try:
            return super().compose_node(parent, index)
        finally:
            if nests:
                self._depth -= 1
            if named:
                self._path.pop()

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        node: yaml.ScalarNode = super().compose_scalar_node(anchor)
        if node.tag == _INT_TAG and len(node.value) > MAX_NUMBER_DIGITS:
            digits = sum(c.isalnum() for c in node.value.lstrip("+-").removeprefix("0x"))
            raise _Refused(
                _line(node.start_mark),
                f"a whole number of {digits:,} digits is not accepted "
                f"(at most {MAX_NUMBER_DIGITS})",
                tuple(self._path),
            )
        return node

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        node: yaml.MappingNode = super().compose_mapping_node(anchor)
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            # the key as Python will hold it: "1" and 1 differ, "true" and "True" do not
            key = ("str", key_node.value) if key_node.tag == _STR_TAG else self._key(key_node)
            line = _line(key_node.start_mark)
            if key in first:
                raise _Refused(
                    line,
                    f"the key {_key_of(key_node)!r} is given twice in this mapping (first at "
                    f"line {first[key]}); give each key once",
                    (*self._path, _key_of(key_node)),
                )
            first[key] = line
        return node

    def _key(self, node: yaml.ScalarNode) -> tuple[Any, ...]:
        constructor: Any = self  # the loaders below are constructors too
        value = constructor.construct_object(node)  # built once: the constructor keeps it
        try:
            hash(value)
        except TypeError:  # pragma: no cover - a safe loader's scalars are hashable
            return ("text", node.tag, node.value)
        return ("value", value)


def _key_of(node: yaml.Node) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else str(node)


class _ReadableConstructor(yaml.constructor.SafeConstructor):
    """A value PyYAML cannot build (a date ``2001-13-45``) is an error at its line, not a
    ValueError out of the loader."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as e:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {node.value!r}: {e}", node.start_mark
            ) from None


class PyStrictLoader(StrictComposer, yaml.SafeLoader, _ReadableConstructor):
    """The strict loader over PyYAML's own scanner and parser."""

    def __init__(self, stream: str | bytes):
        yaml.SafeLoader.__init__(self, stream)
        StrictComposer.__init__(self)  # again, after SafeLoader's own Composer.__init__


if yaml.__with_libyaml__:

    class CStrictLoader(StrictComposer, CParser, _ReadableConstructor, yaml.resolver.Resolver):
        """The strict loader over libyaml's scanner and parser (its events, this composer)."""

        def __init__(self, stream: str | bytes):
            CParser.__init__(self, stream)
            StrictComposer.__init__(self)
            _ReadableConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    StrictLoader: type = CStrictLoader
else:  # pragma: no cover - PyYAML built without libyaml
    StrictLoader = PyStrictLoader


def _check_size(text: str | bytes, file: str) -> None:
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_TEXT_BYTES:
        raise DocumentError(
            [Problem(file, 1, "(yaml)", f"{size} bytes is too large; at most {MAX_TEXT_BYTES}")]
        )


def safe_load(text: str | bytes, file: str = "<string>") -> Any:
    """One YAML document as plain Python values, refused as :func:`load_documents` refuses.

    Raises :class:`DocumentError` (a ``ValueError``) naming the line.
    """
    _check_size(text, file)
    try:
        loader = StrictLoader(text)
    except yaml.YAMLError as e:
        raise DocumentError([Problem(file, 1, "(yaml)", f"invalid YAML: {e}")]) from None
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        raise DocumentError([_yaml_problem(e, file)]) from None
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise DocumentError([Problem(file, 1, "(yaml)", "nested too deeply")]) from None
    finally:
        loader.dispose()


def _yaml_problem(e: yaml.YAMLError, file: str) -> Problem:
    if isinstance(e, _Refused):
        path = format_path(e.path) if e.path else "(yaml)"
        return Problem(file, e.line, path, e.message)
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        msg = " ".join(str(x) for x in (e.context, e.problem) if x)
        return Problem(file, line, "(yaml)", f"invalid YAML: {msg}")
    return Problem(file, 1, "(yaml)", f"invalid YAML: {e}")


def load_documents(
    text: str, file: str = "<string>", max_documents: int | None = None
) -> list[Document]:
    """Parse every ``---`` separated document in ``text``.

    Raises :class:`DocumentError` for YAML syntax errors, pointing at the line PyYAML blames,
    and for what :class:`StrictComposer` refuses (anchors, aliases, deep nesting, a key given
    twice, a number too long) and texts over :data:`MAX_TEXT_BYTES`. Empty documents are
    skipped. With ``max_documents``, a text with more is refused (path ``(documents)``) as soon
    as the one too many is read.
    """
    _check_size(text, file)
    try:
        # the reader rejects some characters (NUL...) as soon as it is made
        loader = StrictLoader(text)
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
            if max_documents is not None and len(docs) >= max_documents:
                line = node.start_mark.line + 1
                message = f"more than {max_documents} documents"
                raise DocumentError([Problem(file, line, "(documents)", message)])
            docs.append(Document(data, file, node.start_mark.line + 1, lines))
    except yaml.YAMLError as e:
        raise DocumentError([_yaml_problem(e, file)]) from None
    except RecursionError:  # pragma: no cover - the depth limit comes first
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


def load_written_document(text: str, file: str) -> Document:
    """The one document of a text this program dumped itself from checked values (a registry
    change's new files): parsed and composed by libyaml where PyYAML has it, without the
    strict checks, which such a text never needs (no duplicate key, alias or long number can
    be in it). A thousand of them take a third of the time :func:`load_documents` takes."""
    loader = (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise DocumentError([Problem(file, 1, "(yaml)", "no document")])
        data = loader.construct_document(node)
    except yaml.YAMLError as e:  # pragma: no cover - dumped by yaml.safe_dump
        raise DocumentError([_yaml_problem(e, file)]) from None
    finally:
        loader.dispose()
    lines: dict[Path, int] = {}
    _record(node, (), lines)
    return Document(data, file, node.start_mark.line + 1, lines)
