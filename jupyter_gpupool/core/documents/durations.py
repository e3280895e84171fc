"""Durations as documents write them: ``15m`` or ``2h`` for an idle rule or a runtime limit,
``24h`` or ``30d`` for a budget's window. Each reader raises ValueError with what is wrong, which
the document checkers (:mod:`.spec`) report at the value's line.
"""

from __future__ import annotations

from .whole_numbers import parse_whole

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float:
    """``20s``, ``15m``, ``2h``, ``1d`` in seconds; ValueError says what is wrong."""
    t = text.strip() if isinstance(text, str) else ""
    count = parse_whole(t[:-1])
    if t[-1:] in DURATION_UNITS and count is not None:
        return float(count * DURATION_UNITS[t[-1]])
    raise ValueError(
        f"a duration is a whole number of s, m, h or d such as 15m or 2h, not {text!r}"
    )


#: Windows are written as a whole number of hours or days.
WINDOW_UNITS = {"h": 3600, "d": 86400}
#: The longest window a budget may have.
MAX_WINDOW_DAYS = 366


def window_seconds(text: str) -> float:
    """``30d`` -> 2592000.0, ``12h`` -> 43200.0; ValueError says what is wrong."""
    t = text.strip() if isinstance(text, str) else ""
    unit = t[-1:]
    count = parse_whole(t[:-1])
    if unit in WINDOW_UNITS and count is not None and count > 0:
        seconds = float(count * WINDOW_UNITS[unit])
        if seconds > MAX_WINDOW_DAYS * 86400:
            raise ValueError(f"a budget window may be at most {MAX_WINDOW_DAYS}d, not {text!r}")
        return seconds
    raise ValueError(
        f"a window is a whole number of hours or days such as 24h or 30d, not {text!r}"
    )
