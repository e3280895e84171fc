"""How ``gpupool`` verbs print what the service answers: gpuctl's tables, or JSON, YAML, CSV.

Pure functions, no I/O, tested directly. A table is gpuctl's: upper-case headers, left-aligned
columns two spaces apart, each as wide as its widest cell. ``-o json`` and ``-o yaml`` print the
service's own answer (every field); ``-o csv`` prints the table's columns under machine-friendly
names (the JSON keys); ``-o wide`` adds the columns marked ``wide``. Cells, tables, CSV cells and
ages come from :mod:`jupyter_gpupool.core.words.tables`, which the magics and the service share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.words.tables import csv_text, format_table

__all__ = ["OUTPUTS", "Column", "render"]

#: What ``-o`` accepts on every ``get`` (``describe`` takes the last three and ``table``).
OUTPUTS = ("table", "wide", "json", "yaml", "csv")

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Column:
    """One column: its table header, its key in the record (and CSV header), and how to read it.

    ``raw`` reads the CSV cell where the record has no ``key`` (default: ``get``); a
    ``csv_only`` column is left out of tables (a raw value the table shows in another column's
    words, as a GPU memory's total).
    """

    header: str
    key: str
    get: Callable[[Row], Any] | None = None
    wide: bool = False
    raw: Callable[[Row], Any] | None = None
    csv_only: bool = False

    def value(self, row: Row) -> Any:
        return self.get(row) if self.get is not None else row.get(self.key)

    def csv_value(self, row: Row) -> Any:
        if self.key in row:
            return row[self.key]
        return self.raw(row) if self.raw is not None else self.value(row)


def to_csv(records: Iterable[Row], columns: Sequence[Column]) -> str:
    """CSV under the columns' keys, with the records' raw values (a time stays a time, where
    the table shows an age)."""
    return csv_text([c.key for c in columns], ([c.csv_value(r) for c in columns] for r in records))


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def to_yaml(data: Any) -> str:
    import yaml  # not at the top: only -o yaml needs it, and it is slow to import

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
    shown = [c for c in shown if not c.csv_only]
    return format_table([c.header for c in shown], ([c.value(r) for c in shown] for r in records))


def indent(text: str, prefix: str = "  ") -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))
