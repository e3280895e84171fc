"""Field selectors (``?fieldSelector=``, ``kubectl --field-selector``), as
``k8s.io/apimachinery/pkg/fields`` parses, escapes and matches them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .labelselectors import EQUALS, NOT_EQUALS, SelectorError


def _escape_field_value(value: str) -> str:
    """``fields.EscapeValue``: backslash-escape ``\\``, ``,`` and ``=``."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _field_string(value: Any) -> str:
    """The string a field compares as: missing/null is "", booleans are true/false."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class FieldRequirement:
    """``path=value`` (``operator`` "=") or ``path!=value`` (``operator`` "!=")."""

    path: str
    operator: str
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Compare the field at the dotted ``path`` (missing counts as "") with ``value``."""
        current: Any = obj
        for part in self.path.split("."):
            if not isinstance(current, Mapping) or part not in current:
                current = None
                break
            current = current[part]
        equal = _field_string(current) == self.value
        return equal if self.operator == EQUALS else not equal

    def __str__(self) -> str:
        return f"{self.path}{self.operator}{_escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements; with none it matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def paths(self) -> frozenset[str]:
        """The field paths used, so the server can reject ones a kind does not support."""
        return frozenset(r.path for r in self.requirements)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on ``sep`` where it is not preceded by an escaping backslash."""
    parts: list[str] = []
    start, i = 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _split_field_term(term: str) -> tuple[str, str, str] | None:
    """``fields.splitTerm``: the leftmost unescaped ``!=``, ``==`` or ``=`` splits the term."""
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def _unescape_field_value(value: str) -> str:
    """``fields.UnescapeValue``: only ``\\\\``, ``\\,`` and ``\\=`` are valid escapes, and bare
    ``,`` or ``=`` are not allowed in a value."""
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in "\\,=":
                raise ValueError(f"invalid escape sequence '\\{c}'")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise ValueError(f"invalid field selector value: unescaped {c!r}")
        else:
            out.append(c)
    if escaped:
        raise ValueError("invalid escape sequence '\\' at end of value")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the field selector syntax of ``?fieldSelector=`` / ``kubectl --field-selector``.

    Comma-separated ``path=value``, ``path==value`` or ``path!=value`` terms, all of which must
    hold. Values may contain the escapes ``\\,``, ``\\=`` and ``\\\\``. An empty string selects
    everything. Which paths a kind supports is left to the caller (see ``FieldSelector.paths``).
    Unlike Kubernetes, whitespace around paths and values is ignored.
    """
    reqs: list[FieldRequirement] = []
    for raw in _split_unescaped(text, ","):
        term = raw.strip()
        if not term:
            continue
        split = _split_field_term(term)
        if split is None:
            raise SelectorError(
                f'invalid field selector "{text}": {term!r} is not of the form '
                "path=value, path==value or path!=value"
            )
        path, op, value = (split[0].strip(), split[1], split[2].strip())
        if not path or any(c.isspace() for c in path) or "\\" in path:
            raise SelectorError(f'invalid field selector "{text}": {path!r} is not a field path')
        try:
            value = _unescape_field_value(value)
        except ValueError as e:
            raise SelectorError(f'invalid field selector "{text}": {e}') from None
        reqs.append(FieldRequirement(path, NOT_EQUALS if op == "!=" else EQUALS, value))
    return FieldSelector(tuple(reqs))
