"""Text every front end prints the same way: aligned tables, CSV cells, and kubectl's ages.

The ``gpupool`` CLI, the ``%gpupool`` magics and the service (its CSV answers and the ages on its
pages) all format through here, so a table, a CSV cell or an AGE reads the same wherever it is
shown. Pure: values in, strings out.

- Tables are gpuctl's: columns two spaces apart, each as wide as its widest cell, trailing
  blanks dropped.
- CSV cells never start a formula: a text cell that begins with ``=``, ``+``, ``-``, ``@``, a tab
  or a carriage return gets a leading ``'``, as OWASP's "CSV Injection" page advises
  (https://owasp.org/www-community/attacks/CSV_Injection). Numbers are left alone: ``-1`` is a
  number to a spreadsheet, not a formula.
- Ages follow kubectl's AGE column, which is ``k8s.io/apimachinery/pkg/util/duration``'s
  ``HumanDuration``: two or three significant figures (``119s``, ``9m59s``, ``179m``, ``3h1m``,
  ``47h``, ``7d23h``, ``729d``, ``2y1d``, ``8y``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "DEFAULT_SERVER",
    "FORMULA_STARTS",
    "age",
    "aligned_lines",
    "cell",
    "csv_cell",
    "csv_text",
    "format_table",
    "human_duration",
    "parse_time",
    "server_words",
]

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

_MINUTE, _HOUR, _DAY, _YEAR = 60, 3600, 86400, 365 * 86400

#: A user's default server (JupyterHub's server named ""), as every surface names it: the pages,
#: the CLI, the magics and the lab (``labextension/src/panel.ts``).
DEFAULT_SERVER = "(default)"


def server_words(name: str | None) -> str:
    """A server's name in a table, ``(default)`` for the default one."""
    return name or DEFAULT_SERVER


# --- tables ---------------------------------------------------------------------------------------


def cell(value: Any) -> str:
    """A value as a table cell: ``-`` for nothing, lists joined with commas, ``yes``/``no``."""
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def aligned_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the header first) as lines of columns two spaces apart, each column as wide as
    its widest cell; trailing blanks dropped so that a terminal shows no ragged spaces."""
    widths: list[int] = []
    for row in rows:
        for i, text in enumerate(row):
            if i == len(widths):
                widths.append(0)
            widths[i] = max(widths[i], len(text))
    return ["  ".join(t.ljust(widths[i]) for i, t in enumerate(row)).rstrip() for row in rows]


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """gpuctl's table, each line ending in a newline; cells formatted with :func:`cell`.

    Only the header line is printed when there are no rows (as gpuctl does), so the output
    stays parseable.
    """
    body = [[cell(v) for v in row] for row in rows]
    return "".join(line + "\n" for line in aligned_lines([list(headers), *body]))


# --- CSV ------------------------------------------------------------------------------------------


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: empty for nothing, ``true``/``false`` as JSON spells them, lists
    joined with ``;``, and text that a spreadsheet would run as a formula prefixed with ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return str(value)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """CSV with a header row, each cell through :func:`csv_cell` (quoting is the ``csv``
    module's: cells holding a comma, quote or line break are quoted)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow([csv_cell(v) for v in row])
    return buf.getvalue()


# --- ages -----------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """kubectl's ``HumanDuration``: a duration with two or three significant figures.

    Less than two seconds in the future counts as now (``0s``, clocks drift); further ahead is
    ``<invalid>``, as kubectl prints it.
    """
    whole = int(seconds)  # toward zero, as Go's int(d.Seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 2 * _MINUTE:
        return f"{whole}s"
    minutes = whole // _MINUTE
    if minutes < 10:
        s = whole % _MINUTE
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = whole // _HOUR
    if hours < 8:
        m = minutes % 60
        return f"{hours}h{m}m" if m else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 8 * 24:
        h = hours % 24
        return f"{hours // 24}d{h}h" if h else f"{hours // 24}d"
    days = hours // 24
    if hours < 2 * 365 * 24:
        return f"{days}d"
    if hours < 8 * 365 * 24:
        d = days % 365
        return f"{days // 365}y{d}d" if d else f"{days // 365}y"
    return f"{days // 365}y"


def parse_time(timestamp: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 UTC time as the API gives it
    (``2025-01-31T12:00:00Z``), None when it is not one."""
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        return None
    return then.replace(tzinfo=timezone.utc).timestamp()


def age(timestamp: str | None, now: float, unknown: str = "-") -> str:
    """kubectl's AGE of an ISO 8601 UTC time at ``now``: ``42s``, ``9m59s``, ``179m``, ``3h``,
    ``12d``. ``unknown`` (``-``; kubectl says ``<unknown>``) when there is no time or it is not
    one."""
    then = parse_time(timestamp) if timestamp else None
    if then is None:
        return unknown
    return human_duration(now - then)
