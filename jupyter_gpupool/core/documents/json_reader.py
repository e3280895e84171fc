"""JSON texts read strictly: each key once per object, and whole numbers of a sane length.

Python's ``json`` keeps the last of a key given twice (``{"gpus": 1, "gpus": 9999}`` asks for
9999 GPUs), and converts a whole number of any length until ``int()`` refuses at 4,300 digits
with a ValueError that is not a JSONDecodeError. :func:`loads` refuses the first with
:class:`KeyTwice`, naming the key and its line, and keeps the second as a :class:`LongNumber`,
which no check takes for a number, so the check of its field refuses it by name.

A key given twice is found in one pass of the C decoder; only then is the text walked again to
find the line (``object_pairs_hook`` is not told where it is).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .whole_numbers import MAX_NUMBER_DIGITS

_WS = re.compile(r"[ \t\n\r]*")


class LongNumber:
    """A JSON whole number of more than :data:`~.whole_numbers.MAX_NUMBER_DIGITS` digits, unconverted."""

    __slots__ = ("digits",)

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __str__(self) -> str:
        return f"a number of {self.digits:,} digits"

    __repr__ = __str__


def _whole(text: str) -> int | LongNumber:
    return int(text) if len(text.lstrip("-")) <= MAX_NUMBER_DIGITS else LongNumber(text)


class KeyTwice(ValueError):
    """An object of the text gives ``key`` twice; ``line``/``column`` of the second (1-based;
    None when the walk to find it gave up)."""

    def __init__(self, key: str, line: int | None = None, column: int | None = None):
        self.key = key
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"the key {json.dumps(key)} is given twice in one object{where}")


class _Twice(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Twice(key)
            seen.add(key)
    return out


def loads(text: str) -> Any:
    """``json.loads(text)``, refusing a key given twice (:class:`KeyTwice`) and keeping whole
    numbers over :data:`~.whole_numbers.MAX_NUMBER_DIGITS` digits as :class:`LongNumber`.

    Syntax errors raise :class:`json.JSONDecodeError` as ``json.loads`` does.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_int=_whole)
    except _Twice as e:
        raise _locate(text, e.key) from None


def _locate(text: str, key: str) -> KeyTwice:
    """The first key given twice in ``text`` (in reading order) with its line and column."""
    try:
        _Walk(text).value(0)
    except KeyTwice as found:
        return found
    except (RecursionError, IndexError, ValueError):  # pragma: no cover - deeper than a walk
        pass
    return KeyTwice(key)  # pragma: no cover - the decoder found it, so does the walk


class _Walk:
    """Objects and lists walked by hand (scalars by the decoder's scanner), to find where a key
    is given twice. Only run on text the decoder read up to that key, so it is valid there."""

    def __init__(self, text: str):
        self.s = text
        self.scalar: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(  # type: ignore[attr-defined]
            json.JSONDecoder(parse_int=_whole)
        )

    def skip(self, i: int) -> int:
        return _WS.match(self.s, i).end()  # type: ignore[union-attr]

    def value(self, i: int) -> int:
        i = self.skip(i)
        if self.s[i] == "{":
            return self.object(i + 1)
        if self.s[i] == "[":
            return self.list(i + 1)
        return self.scalar(self.s, i)[1]

    def object(self, i: int) -> int:
        seen: set[str] = set()
        i = self.skip(i)
        if self.s[i] == "}":
            return i + 1
        while True:
            i = self.skip(i)
            key, end = json.decoder.scanstring(self.s, i + 1)  # type: ignore[attr-defined]
            if key in seen:
                line = self.s.count("\n", 0, i) + 1
                raise KeyTwice(key, line, i - self.s.rfind("\n", 0, i))
            seen.add(key)
            i = self.value(self.skip(end) + 1)  # past the ':'
            i = self.skip(i)
            if self.s[i] == "}":
                return i + 1
            i += 1  # past the ','

    def list(self, i: int) -> int:
        i = self.skip(i)
        if self.s[i] == "]":
            return i + 1
        while True:
            i = self.skip(self.value(i))
            if self.s[i] == "]":
                return i + 1
            i += 1
