"""Whole numbers written as text, read by one rule: ASCII digits, and not too many of them.

``str.isdigit()`` is true of ``"²"``, which ``int()`` refuses; and ``int()`` refuses more than
4,300 digits with a ValueError (Python's guard against quadratic conversion). Both escaped as
crashes from places that checked ``isdigit()`` and then converted. No count, size, limit or
duration here needs more than twenty digits; :data:`MAX_NUMBER_DIGITS` leaves room.
"""

from __future__ import annotations

import re

MAX_NUMBER_DIGITS = 100
"""The longest whole number read, in digits."""

_WHOLE = re.compile(r"[+-]?[0-9]+")


def parse_whole(text: str, *, signed: bool = False) -> int | None:
    """``text`` (stripped) as an int: ASCII digits, a sign only when ``signed``, at most
    :data:`MAX_NUMBER_DIGITS` of them; None otherwise."""
    t = text.strip()
    if not _WHOLE.fullmatch(t) or (not signed and t[0] in "+-"):
        return None
    if len(t.lstrip("+-")) > MAX_NUMBER_DIGITS:
        return None
    return int(t)
