"""Label selectors, field selectors, node affinity and tolerations, as Kubernetes evaluates them.

Everything here is pure: parsing turns selector strings or API structures into small immutable
objects, and matching functions only read the dictionaries they are given.

The rules follow ``k8s.io/apimachinery/pkg/labels`` (label selector syntax and matching),
``k8s.io/apimachinery/pkg/fields`` (field selector syntax and escaping),
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` (node selector terms) and
``Toleration.ToleratesTaint`` from ``k8s.io/api/core/v1``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "label_selector_from_api",
    "node_selector_matches",
    "node_selector_term_matches",
    "parse_field_selector",
    "parse_label_selector",
    "preferred_affinity_score",
    "required_affinity_matches",
    "tolerates",
]


class SelectorError(ValueError):
    """A selector (string or API structure) that Kubernetes would reject; the server sends 400."""


# --------------------------------------------------------------------------------------------
# Validation of label keys and values (k8s.io/apimachinery/pkg/util/validation)
# --------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_INT64_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _key_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``), or None if it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"prefix part of key {key!r} must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return (
                f"prefix part of key {key!r} must be a DNS-1123 subdomain "
                "(lowercase alphanumerics, '-' and '.', at most 253 characters)"
            )
    if not name:
        return f"name part of key {key!r} must be non-empty"
    if len(name) > 63:
        return f"name part of key {key!r} must be no more than 63 characters"
    if not _NAME_RE.match(name):
        return (
            f"name part of key {key!r} must consist of alphanumerics, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def _value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None if it is one (empty is valid)."""
    if value == "":
        return None
    if len(value) > 63:
        return f"label value {value!r} must be no more than 63 characters"
    if not _NAME_RE.match(value):
        return (
            f"label value {value!r} must consist of alphanumerics, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: None when it would fail."""
    if not _INT64_RE.match(text):
        return None
    n = int(text)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


# --------------------------------------------------------------------------------------------
# Label selectors
# --------------------------------------------------------------------------------------------

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
        problem = _key_problem(key)
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
            problem = _value_problem(v)
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


# --------------------------------------------------------------------------------------------
# Field selectors
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Node affinity (scheduler)
# --------------------------------------------------------------------------------------------

_NODE_OPERATORS = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
    "Gt": GREATER_THAN,
    "Lt": LESS_THAN,
}


def _node_requirement(expr: Any) -> Requirement:
    """A ``NodeSelectorRequirement`` as a label requirement; SelectorError when malformed."""
    if not isinstance(expr, Mapping):
        raise SelectorError("node selector requirement must be a map")
    op = _NODE_OPERATORS.get(str(expr.get("operator")))
    if op is None:
        raise SelectorError(f"operator {expr.get('operator')!r} is not supported")
    key = expr.get("key")
    values = expr.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        raise SelectorError("node selector requirement needs a string key and a list of values")
    if not all(isinstance(v, str) for v in values):
        raise SelectorError("node selector requirement values must be strings")
    return Requirement.create(key, op, values)


def _field_requirement_matches(expr: Any, name: str) -> bool:
    """A ``matchFields`` item: Kubernetes only allows ``metadata.name`` with In/NotIn and exactly
    one value. Raises SelectorError for anything else."""
    if not isinstance(expr, Mapping) or expr.get("key") != "metadata.name":
        raise SelectorError("matchFields only supports the key metadata.name")
    values = expr.get("values") or []
    if not isinstance(values, list) or len(values) != 1:
        raise SelectorError("matchFields values must have exactly one element")
    if expr.get("operator") == "In":
        return name == values[0]
    if expr.get("operator") == "NotIn":
        return name != values[0]
    raise SelectorError("matchFields only supports the operators In and NotIn")


def node_selector_term_matches(
    term: Mapping[str, Any] | None, labels: Mapping[str, str] | None, name: str
) -> bool:
    """Whether a node with ``labels`` and ``name`` satisfies one ``NodeSelectorTerm``.

    All ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt against node labels) and
    all ``matchFields`` (``metadata.name`` In/NotIn) must hold. As in the scheduler, a term with
    no requirements matches nothing, and a malformed term (unknown operator, Gt with a
    non-integer, In without values, ...) also matches nothing instead of failing.
    """
    if not term:
        return False
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list) or not (exprs or fields):
        return False
    lbls: Mapping[str, str] = labels or {}
    try:
        # Parse everything before matching so a malformed requirement anywhere in the term
        # disables the term, whatever the order of evaluation.
        reqs = [_node_requirement(e) for e in exprs]
        field_results = [_field_requirement_matches(f, name) for f in fields]
    except SelectorError:
        return False
    return all(field_results) and all(r.matches(lbls) for r in reqs)


def node_selector_matches(
    node_selector: Mapping[str, str] | None, labels: Mapping[str, str] | None
) -> bool:
    """The pod's plain ``spec.nodeSelector``: every key must be a node label with that value."""
    if not node_selector:
        return True
    lbls: Mapping[str, str] = labels or {}
    return all(k in lbls and lbls[k] == v for k, v in node_selector.items())


def _node_affinity(affinity: Mapping[str, Any] | None) -> Mapping[str, Any]:
    node_affinity = (affinity or {}).get("nodeAffinity")
    return node_affinity if isinstance(node_affinity, Mapping) else {}


def required_affinity_matches(
    affinity: Mapping[str, Any] | None, labels: Mapping[str, str] | None, name: str
) -> bool:
    """``nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``: the node must match at
    least one of its ``nodeSelectorTerms`` (the terms are ORed). No required affinity means any
    node will do; a required affinity with no terms matches no node."""
    required = _node_affinity(affinity).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list):
        return False
    return any(
        isinstance(t, Mapping) and node_selector_term_matches(t, labels, name) for t in terms
    )


def preferred_affinity_score(
    affinity: Mapping[str, Any] | None, labels: Mapping[str, str] | None, name: str
) -> int:
    """Sum of the ``weight`` of every ``preferredDuringSchedulingIgnoredDuringExecution`` item
    whose ``preference`` term matches the node (the NodeAffinity score before normalisation).
    Items with weight 0 or an empty preference never count."""
    preferred = _node_affinity(affinity).get("preferredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(preferred, list):
        return 0
    score = 0
    for item in preferred:
        if not isinstance(item, Mapping):
            continue
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight == 0:
            continue
        preference = item.get("preference")
        if isinstance(preference, Mapping) and node_selector_term_matches(preference, labels, name):
            score += weight
    return score


# --------------------------------------------------------------------------------------------
# Taints and tolerations
# --------------------------------------------------------------------------------------------


def _toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = str(toleration.get("operator") or "Equal")
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerates(tolerations: Iterable[Mapping[str, Any]] | None, taint: Mapping[str, Any]) -> bool:
    """Whether any of a pod's tolerations tolerates ``taint``.

    Kubernetes rules: an empty toleration ``effect`` matches every effect; an empty ``key``
    matches every key (API validation only allows that with ``Exists``, so it tolerates
    everything); operator ``Equal`` (the default) also needs equal values, ``Exists`` does not
    look at the value; an unknown operator tolerates nothing.
    """
    return any(
        isinstance(t, Mapping) and _toleration_tolerates(t, taint) for t in tolerations or ()
    )
