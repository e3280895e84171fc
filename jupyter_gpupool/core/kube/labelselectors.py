"""Label selectors (``?labelSelector=``, ``kubectl -l``, ``metav1.LabelSelector``), as
``k8s.io/apimachinery/pkg/labels`` parses and matches them.

Parsing turns selector strings or API structures into small immutable objects; matching only
reads the label dictionaries it is given. The requirement type is shared with node affinity,
whose ``matchExpressions`` are label requirements plus ``Gt``/``Lt``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .names import label_key_problem, label_value_problem


class SelectorError(ValueError):
    """A selector (string or API structure) that Kubernetes would reject; the server sends 400."""


_INT64_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: None when it would fail."""
    if not _INT64_RE.match(text):
        return None
    n = int(text)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


# Canonical operator spellings, as ``labels.Requirement.String`` writes them ("==" becomes "=").
EQUALS, NOT_EQUALS, IN, NOT_IN = "=", "!=", "in", "notin"
EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN = "exists", "!", ">", "<"

_OPERATORS = (EQUALS, NOT_EQUALS, IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN)


@dataclass(frozen=True)
class Requirement:
    """One label requirement, e.g. ``tier in (gpu,cpu)``.

    ``values`` is sorted and de-duplicated for ``in``/``notin``; it holds exactly one value for
    ``=``, ``!=``, ``>`` and ``<``, and none for ``exists``/``!``.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def create(cls, key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
        """Build and validate a requirement the way ``labels.NewRequirement`` does.

        Raises SelectorError (without the "invalid label selector" prefix) when invalid.
        """
        vals = list(values)
        problem = label_key_problem(key)
        if problem:
            raise SelectorError(problem)
        if operator not in _OPERATORS:
            raise SelectorError(f"operator {operator!r} is not recognized")
        if operator in (IN, NOT_IN):
            if not vals:
                raise SelectorError(f"for 'in' and 'notin' operators, {key!r} needs values")
        elif operator in (EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                raise SelectorError(f"for '=' and '!=' operators, {key!r} needs exactly one value")
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                raise SelectorError(
                    f"values set must be empty for exists and does-not-exist (key {key!r})"
                )
        else:  # GREATER_THAN, LESS_THAN
            if len(vals) != 1:
                raise SelectorError(f"for 'Gt' and 'Lt' operators, {key!r} needs exactly one value")
            if _parse_int64(vals[0]) is None:
                raise SelectorError(
                    f"for 'Gt' and 'Lt' operators, the value {vals[0]!r} must be an integer"
                )
        for v in vals:
            problem = label_value_problem(v)
            if problem:
                raise SelectorError(problem)
        return cls(key, operator, tuple(sorted(set(vals))))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes ``Requirement.Matches``.

        ``!=`` and ``notin`` also match objects that lack the key altogether, and ``>``/``<``
        never match a label whose value is not an integer.
        """
        present = self.key in labels
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if self.operator in (NOT_EQUALS, NOT_IN):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        if self.operator in (EQUALS, IN):
            return labels[self.key] in self.values
        have = _parse_int64(labels[self.key])
        if have is None:
            return False
        want = int(self.values[0])  # validated in create()
        return have > want if self.operator == GREATER_THAN else have < want

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.operator in (IN, NOT_IN):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        return f"{self.key}{self.operator}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; with none it matches everything.

    Requirements are kept sorted by key (stable for repeated keys), as Kubernetes does, so two
    selectors that differ only in requirement order compare equal and print the same.
    """

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> LabelSelector:
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @property
    def empty(self) -> bool:
        """True when the selector has no requirements (matches every object)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """True when every requirement holds for ``labels`` (None means no labels)."""
        lbls: Mapping[str, str] = labels or {}
        return all(r.matches(lbls) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# Characters that end an identifier in the Kubernetes selector lexer.
_SPECIAL = "=!(),<>"


@dataclass(frozen=True)
class _Token:
    kind: str  # "id", "in", "notin", "(", ")", ",", "!", "=", "==", "!=", ">", "<", "end"
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _SPECIAL:
            two = text[i : i + 2]
            if two in ("==", "!="):
                tokens.append(_Token(two, two, i))
                i += 2
            else:
                tokens.append(_Token(c, c, i))
                i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            word = text[start:i]
            # "in" and "notin" are keywords wherever an operator may appear; the parser turns them
            # back into plain identifiers where a value is expected (so "tier=in" works).
            tokens.append(_Token(word if word in (IN, NOT_IN) else "id", word, start))
    tokens.append(_Token("end", "", n))
    return tokens


def _describe(tok: _Token) -> str:
    return "end of string" if tok.kind == "end" else repr(tok.text)


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    def fail(self, message: str) -> SelectorError:
        return SelectorError(f'invalid label selector "{self.text}": {message}')

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def parse(self) -> LabelSelector:
        if self.peek().kind == "end":
            return LabelSelector()
        reqs = [self.requirement()]
        while True:
            tok = self.take()
            if tok.kind == "end":
                return LabelSelector.of(reqs)
            if tok.kind != ",":
                raise self.fail(f"found {_describe(tok)}, expected ',' or end of string")
            if self.peek().kind == "end":
                raise self.fail("expected a requirement after ','")
            reqs.append(self.requirement())

    def requirement(self) -> Requirement:
        tok = self.take()
        if tok.kind == "!":
            name = self.take()
            if name.kind != "id":
                raise self.fail(f"found {_describe(name)}, expected a label key after '!'")
            return self.build(name.text, DOES_NOT_EXIST, [])
        if tok.kind != "id":
            raise self.fail(f"found {_describe(tok)}, expected a label key or '!'")
        key = tok.text
        op = self.peek()
        if op.kind in (",", "end"):
            return self.build(key, EXISTS, [])
        self.take()
        if op.kind in ("=", "=="):
            return self.build(key, EQUALS, [self.single_value()])
        if op.kind in ("!=", ">", "<"):
            return self.build(key, op.kind, [self.single_value()])
        if op.kind in (IN, NOT_IN):
            return self.build(key, op.kind, self.value_list(op.kind))
        raise self.fail(
            f"found {_describe(op)} after key {key!r}, expected one of "
            "'=', '==', '!=', 'in', 'notin', '>', '<', ',' or end of string"
        )

    def single_value(self) -> str:
        tok = self.peek()
        # "key=" with nothing after it selects the empty value, as in Kubernetes.
        if tok.kind in (",", "end"):
            return ""
        if tok.kind in ("id", IN, NOT_IN):
            self.take()
            return tok.text
        raise self.fail(f"found {_describe(tok)}, expected a value")

    def value_list(self, op: str) -> list[str]:
        opening = self.take()
        if opening.kind != "(":
            raise self.fail(f"found {_describe(opening)}, expected '(' after '{op}'")
        # Items are separated by commas and may be empty: "(a,)" is {"a", ""} and "()" is {""},
        # exactly what the Kubernetes parser produces.
        values: list[str] = []
        current = ""
        while True:
            tok = self.take()
            if tok.kind == "end":
                raise self.fail("missing ')'")
            if tok.kind == ")":
                values.append(current)
                return values
            if tok.kind == ",":
                values.append(current)
                current = ""
            elif tok.kind in ("id", IN, NOT_IN) and current == "":
                current = tok.text
            elif tok.kind in ("id", IN, NOT_IN):
                raise self.fail(f"found {_describe(tok)}, expected ',' or ')'")
            else:
                raise self.fail(f"found {_describe(tok)} in value list, expected a value")

    def build(self, key: str, op: str, values: list[str]) -> Requirement:
        try:
            return Requirement.create(key, op, values)
        except SelectorError as e:
            raise self.fail(str(e)) from None


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the label selector string syntax of ``?labelSelector=`` / ``kubectl -l``.

    Comma-separated requirements, all of which must hold: ``k=v``, ``k==v``, ``k!=v``,
    ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not exist), and the integer
    comparisons ``k>5`` / ``k<5``. Whitespace between tokens is ignored and an empty (or blank)
    string selects everything. Keys must be qualified names and values valid label values.
    """
    return _LabelParser(text).parse()


_API_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_api(sel: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` (``matchLabels`` + ``matchExpressions``).

    Like ``LabelSelectorAsSelector`` an empty selector matches everything; unlike it, None also
    matches everything here (Kubernetes treats a nil selector as matching nothing).
    """
    if not sel:
        return LabelSelector()

    def fail(message: str) -> SelectorError:
        return SelectorError(f"invalid label selector {dict(sel)!r}: {message}")

    reqs: list[Requirement] = []
    match_labels = sel.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise fail("matchLabels must be a map of strings")
    for key, value in match_labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise fail("matchLabels must be a map of strings")
        try:
            reqs.append(Requirement.create(key, EQUALS, [value]))
        except SelectorError as e:
            raise fail(str(e)) from None
    exprs = sel.get("matchExpressions") or []
    if not isinstance(exprs, Sequence) or isinstance(exprs, str):
        raise fail("matchExpressions must be a list")
    for expr in exprs:
        if not isinstance(expr, Mapping):
            raise fail("each matchExpressions item must be a map")
        op = expr.get("operator")
        if op not in _API_OPERATORS:
            raise fail(
                f"operator {op!r} is not one of In, NotIn, Exists, DoesNotExist "
                f"(key {expr.get('key')!r})"
            )
        key = expr.get("key")
        values = expr.get("values") or []
        if not isinstance(key, str):
            raise fail("each matchExpressions item needs a string key")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise fail(f"values of key {key!r} must be a list of strings")
        try:
            reqs.append(Requirement.create(key, _API_OPERATORS[op], values))
        except SelectorError as e:
            raise fail(str(e)) from None
    return LabelSelector.of(reqs)
