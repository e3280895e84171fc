"""Declarative shapes of YAML documents: one description gives both the checker and the schema.

Pool files are checked field by field with every problem reported at once, and an editor schema
is shipped for the same files. Writing the checks and the schema by hand would let them disagree,
so both come from the same tree of :class:`Spec` objects: ``check`` walks a parsed document and
records :class:`~jupyter_gpupool.core.documents.yaml_reader.Problem` s with file and line, ``schema`` emits
JSON Schema. The pool and quota shapes built from them are in :mod:`..pools.document_spec`.

Checks here are per field (types, ranges, label syntax, unknown keys); rules that relate several
fields (guaranteed <= limit, duplicate names across files) belong to the loader that uses this.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..kube.names import is_label_key, is_label_value, is_node_name
from ..kube.quantities import parse_quantity
from .durations import duration_seconds, window_seconds
from .whole_numbers import parse_whole
from .yaml_reader import Document, PathElem, Problem, unknown_key_message

JSON = dict[str, Any]
Path = tuple[PathElem, ...]


class _Invalid:
    """Returned by :meth:`Spec.check` for a value that had problems (they are already recorded)."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()


@dataclass
class Checker:
    """Collects the problems of one document."""

    doc: Document
    problems: list[Problem] = field(default_factory=list)

    def add(self, path: Sequence[PathElem], message: str) -> None:
        self.problems.append(self.doc.problem(path, message))


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


class Spec:
    """One kind of value. ``description`` ends up in the schema."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        raise NotImplementedError

    def schema(self) -> JSON:
        raise NotImplementedError

    def _with_description(self, s: JSON) -> JSON:
        if self.description:
            s = {"description": self.description, **s}
        return s


@dataclass
class Int(Spec):
    """A whole number. Booleans and floats are refused (YAML ``yes`` is not 1, ``1.5`` GPUs isn't)."""

    minimum: int = 0
    allow_str: bool = False  # gpuctl's quota files may write gpu: "8"
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if self.allow_str and isinstance(value, str):
            number = parse_whole(value, signed=True)
            value = value if number is None else number
        if isinstance(value, bool) or not isinstance(value, int):
            c.add(path, f"must be a whole number, not {_describe(value)}")
            return INVALID
        if value < self.minimum:
            if self.minimum == 0:
                c.add(path, f"must not be negative, not {value}")
            else:
                c.add(path, f"must be at least {self.minimum}, not {value}")
            return INVALID
        return value

    def schema(self) -> JSON:
        s: JSON = {"type": "integer", "minimum": self.minimum}
        if self.allow_str:
            s = {"anyOf": [s, {"type": "string", "pattern": r"^\s*\+?[0-9]+\s*$"}]}
        return self._with_description(s)


@dataclass
class Number(Spec):
    """A number, whole or not (``12.5`` GPU-hours). Booleans are refused."""

    minimum: float = 0
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            c.add(path, f"must be a number, not {_describe(value)}")
            return INVALID
        if value < self.minimum:
            c.add(path, f"must not be below {self.minimum:g}, not {value:g}")
            return INVALID
        return value

    def schema(self) -> JSON:
        return self._with_description({"type": "number", "minimum": self.minimum})


def _is_window(text: str) -> bool:
    try:
        window_seconds(text)
    except ValueError:
        return False
    return True


def _is_duration(text: str) -> bool:
    try:
        duration_seconds(text)
    except ValueError:
        return False
    return True


_STR_RULES: dict[str, tuple[Callable[[str], bool], str, JSON]] = {
    "duration": (
        _is_duration,
        "is not a duration such as 20s, 15m, 2h or 1d (a whole number and a unit)",
        {"pattern": r"^[0-9]+[smhd]$"},
    ),
    "window": (
        _is_window,
        "is not a window such as 24h or 30d (a whole number of hours or days, at most 366d)",
        {"pattern": r"^[0-9]+[hd]$"},
    ),
    "label-value": (
        is_label_value,
        "is not a valid Kubernetes label value (at most 63 letters, digits, '-', '_' or '.', "
        "starting and ending with a letter or digit)",
        {"maxLength": 63, "pattern": r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"},
    ),
    "label-key": (
        is_label_key,
        "is not a valid Kubernetes label key (NAME or PREFIX/NAME)",
        {
            "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
        },
    ),
    "node-name": (
        is_node_name,
        "is not a valid node name (lowercase letters, digits, '-' and '.')",
        {"maxLength": 253, "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
    ),
}


@dataclass
class Str(Spec):
    """A string, optionally with Kubernetes syntax (``syntax`` is a key of ``_STR_RULES``)."""

    syntax: str | None = None
    nullable: bool = False
    nonempty: bool = False
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if value is None and self.nullable:
            return None
        if not isinstance(value, str):
            hint = ""
            if isinstance(value, (bool, int, float)):
                hint = f' (quote it: "{_describe(value)}")'
            c.add(path, f"must be a string, not {_describe(value)}{hint}")
            return INVALID
        if self.nonempty and not value:
            c.add(path, "must not be empty")
            return INVALID
        if self.syntax:
            ok, message, _ = _STR_RULES[self.syntax]
            if not ok(value):
                c.add(path, f"{value!r} {message}")
                return INVALID
        return value

    def schema(self) -> JSON:
        s: JSON = {"type": ["string", "null"] if self.nullable else "string"}
        if self.nonempty:
            s["minLength"] = 1
        if self.syntax:
            s.update(_STR_RULES[self.syntax][2])
        return self._with_description(s)


@dataclass
class Bool(Spec):
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if not isinstance(value, bool):
            c.add(path, f"must be true or false, not {_describe(value)}")
            return INVALID
        return value

    def schema(self) -> JSON:
        return self._with_description({"type": "boolean"})


@dataclass
class Quantity(Spec):
    """A Kubernetes resource quantity: ``8``, ``0.5``, ``500m``, ``64Gi``."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        try:
            if parse_quantity(value) < 0:  # Kubernetes' grammar has a sign; resources don't
                raise ValueError(value)
        except ValueError:
            c.add(path, f"{_describe(value)} is not a resource quantity such as 8, 500m or 64Gi")
            return INVALID
        return value

    def schema(self) -> JSON:
        return self._with_description(
            {
                "anyOf": [
                    {"type": "number", "minimum": 0},
                    {
                        "type": "string",
                        "pattern": r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?"
                        r"(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$",
                    },
                ]
            }
        )


@dataclass
class Enum(Spec):
    values: tuple[str, ...] = ()
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if value not in self.values or not isinstance(value, str):
            c.add(path, f"must be one of {', '.join(self.values)}, not {_describe(value)}")
            return INVALID
        return value

    def schema(self) -> JSON:
        return self._with_description({"enum": list(self.values)})


@dataclass
class AnyValue(Spec):
    """Free-form value passed through to Kubernetes as written (e.g. ``env[].valueFrom``)."""

    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        return value

    def schema(self) -> JSON:
        return self._with_description({})


@dataclass
class Field:
    """A key of a :class:`Record`. ``aliases`` are other accepted spellings (gpuctl's ``gpuType``)."""

    key: str
    spec: Spec
    required: bool = False
    aliases: tuple[str, ...] = ()


def _as_mapping(c: Checker, value: Any, path: Path) -> Mapping[Any, Any] | None:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        c.add(path, f"must be a mapping (key: value lines), not {_describe(value)}")
        return None
    return value


def _suggested(key: str, misspelt: list[str]) -> bool:
    """Whether an unknown key was already reported with ``key`` as its suggestion."""
    return any(unknown_key_message(m, [key]).endswith(f"did you mean {key!r}?") for m in misspelt)


@dataclass
class Record(Spec):
    """A mapping with a fixed set of keys; unknown keys get a did-you-mean suggestion."""

    fields: tuple[Field, ...] = ()
    description: str = ""
    title: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        data = _as_mapping(c, value, path)
        if data is None:
            return INVALID
        by_key: dict[str, Field] = {}
        for f in self.fields:
            by_key[f.key] = f
            for alias in f.aliases:
                by_key[alias] = f
        out: dict[str, Any] = {}
        seen: dict[str, str] = {}
        misspelt: list[str] = []
        for raw_key, raw_value in data.items():
            key = str(raw_key)
            found = by_key.get(key)
            if found is None:
                c.add((*path, key), unknown_key_message(key, [f.key for f in self.fields]))
                misspelt.append(key)
                continue
            if found.key in seen:
                c.add((*path, key), f"give either {seen[found.key]!r} or {key!r}, not both")
                continue
            seen[found.key] = key
            checked = found.spec.check(c, raw_value, (*path, key))
            if checked is not INVALID:
                out[found.key] = checked
        for f in self.fields:
            if f.required and f.key not in seen and not _suggested(f.key, misspelt):
                c.add(path, f"missing required key {f.key!r}")
        return out

    def schema(self) -> JSON:
        props: JSON = {}
        for f in self.fields:
            props[f.key] = f.spec.schema()
            for alias in f.aliases:
                props[alias] = {**f.spec.schema(), "description": f"Same as '{f.key}'."}
        s: JSON = {"type": ["object", "null"], "properties": props, "additionalProperties": False}
        required = [f.key for f in self.fields if f.required]
        if required:
            s["type"] = "object"
            s["required"] = required
        if self.title:
            s = {"title": self.title, **s}
        return self._with_description(s)


@dataclass
class MapOf(Spec):
    """A mapping with free keys (node names, group names), every value of one kind."""

    value: Spec = field(default_factory=AnyValue)
    key_syntax: str | None = None
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        data = _as_mapping(c, value, path)
        if data is None:
            return INVALID
        out: dict[str, Any] = {}
        for raw_key, raw_value in data.items():
            key = str(raw_key)
            ok = True
            if self.key_syntax:
                valid, message, _ = _STR_RULES[self.key_syntax]
                if not valid(key):
                    c.add((*path, key), f"{key!r} {message}")
                    ok = False
            checked = self.value.check(c, raw_value, (*path, key))
            if ok and checked is not INVALID:
                out[key] = checked
        return out

    def schema(self) -> JSON:
        s: JSON = {"type": ["object", "null"], "additionalProperties": self.value.schema()}
        if self.key_syntax:
            s["propertyNames"] = _STR_RULES[self.key_syntax][2]
        return self._with_description(s)


@dataclass
class ListOf(Spec):
    item: Spec = field(default_factory=AnyValue)
    unique: bool = False
    description: str = ""

    def check(self, c: Checker, value: Any, path: Path) -> Any:
        if value is None:
            return []
        if not isinstance(value, list):
            c.add(path, f"must be a list (- item lines), not {_describe(value)}")
            return INVALID
        out: list[Any] = []
        for i, item in enumerate(value):
            checked = self.item.check(c, item, (*path, i))
            if checked is INVALID:
                continue
            if self.unique and checked in out:
                c.add((*path, i), f"{_describe(checked)} is listed twice")
                continue
            out.append(checked)
        return out

    def schema(self) -> JSON:
        s: JSON = {"type": ["array", "null"], "items": self.item.schema()}
        if self.unique:
            s["uniqueItems"] = True
        return self._with_description(s)
