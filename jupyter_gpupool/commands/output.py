"""How ``gpupool`` verbs print what the service answers: gpuctl's tables, or JSON, YAML, CSV.

Pure functions, no I/O, tested directly. A table is gpuctl's: upper-case headers, left-aligned
columns two spaces apart, each as wide as its widest cell. ``-o json`` and ``-o yaml`` print the
service's own answer (every field); ``-o csv`` prints the table's columns under machine-friendly
names (the JSON keys); ``-o wide`` adds the columns marked ``wide``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..core.reports import age

__all__ = ["OUTPUTS", "Column", "age", "format_table", "render"]

#: What ``-o`` accepts on every ``get`` (``describe`` takes the last three and ``table``).
OUTPUTS = ("table", "wide", "json", "yaml", "csv")

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Column:
    """One column: its table header, its key in the record (and CSV header), and how to read it."""

    header: str
    key: str
    get: Callable[[Row], Any] | None = None
    wide: bool = False

    def value(self, row: Row) -> Any:
        return self.get(row) if self.get is not None else row.get(self.key)


def cell(value: Any) -> str:
    """A value as a table cell: ``-`` for nothing, lists joined with commas."""
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: empty for nothing, lists joined with ``;`` (as the service's CSV)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value  # keep spreadsheets from running a cell as a formula
    return str(value)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """gpuctl's table: columns two spaces apart, each as wide as its widest cell.

    Cells are formatted with :func:`cell`; trailing blanks are dropped. Only the header line is
    printed when there are no rows (as gpuctl does), so the output stays parseable.
    """
    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    lines = []
    for row in [list(headers), *body]:
        line = "  ".join(text.ljust(widths[i]) for i, text in enumerate(row))
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def to_csv(records: Iterable[Row], columns: Sequence[Column]) -> str:
    """CSV under the columns' keys, with the records' raw values (a time stays a time, where
    the table shows an age)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in columns])
    for row in records:
        w.writerow([csv_cell(row[c.key] if c.key in row else c.value(row)) for c in columns])
    return buf.getvalue()


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def to_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def render(
    output: str,
    records: Sequence[Row],
    columns: Sequence[Column],
    raw: Any = None,
) -> str:
    """``records`` as ``output`` (one of :data:`OUTPUTS`).

    ``raw`` is what ``json`` and ``yaml`` print (the service's answer), ``records`` when None.
    """
    if output in ("json", "yaml"):
        data = list(records) if raw is None else raw
        return to_json(data) if output == "json" else to_yaml(data)
    shown = [c for c in columns if output in ("wide", "csv") or not c.wide]
    if output == "csv":
        return to_csv(records, shown)
    if output not in ("table", "wide"):
        raise ValueError(f"unknown output format {output!r}")
    return format_table([c.header for c in shown], ([c.value(r) for c in shown] for r in records))


def indent(text: str, prefix: str = "  ") -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))
