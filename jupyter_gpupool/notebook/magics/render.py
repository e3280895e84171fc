"""What the magics show, as text (a terminal) and HTML (a notebook). Pure: data in, strings out.

:class:`Report` carries both; IPython's display picks the one its frontend shows.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.pools.placement import TIMES, Placement
from ...core.time.notices import notice_line, notice_of
from ...core.words.gpu_use import idle_line, utilization_line
from ...core.words.launch_options import Catalog, budget_text, pool_status, quota_text
from ...core.words.shape_choice import kind_words
from ...core.words.tables import aligned_lines, human_duration, server_words
from ..session import NO_POD, ServerUse


@dataclass(frozen=True)
class Report:
    """A table (or a list of fields) shown as text in a terminal and HTML in a notebook."""

    text: str
    html: str

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": self.html}

    def __repr__(self) -> str:
        return self.text


def table_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, as a terminal shows them (gpuctl's table, as the
    CLI prints it)."""
    return "\n".join(aligned_lines([[str(c) for c in r] for r in [header, *rows]]))


def table_html(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    e = html.escape
    head = "".join(f"<th style='text-align:left'>{e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{e(str(c))}</td>" for c in r) + "</tr>"
        for r in rows
    )
    cap = f"<caption style='text-align:left'>{e(caption)}</caption>" if caption else ""
    return f"<table class='gpupool-table'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# --- %gpupool status ----------------------------------------------------------------------------


def status_fields(
    placement: Placement,
    nvidia_smi: str | None,
    use: ServerUse | None = None,
    now: float | None = None,
) -> list[tuple[str, str]]:
    """``(field, value)`` pairs of ``%gpupool status``; ``use`` (what the service says of the
    server's GPUs, when it was asked) adds the ``GPU utilization`` line and, while the GPUs are
    idle, a ``warning``."""
    p = placement
    if p.pool is None:
        where = "not started in a GPU pool (no GPUPOOL_POOL in the environment)"
    else:
        where = p.pool + (f" (platform {p.platform})" if p.platform else "")
    fields = [
        ("server", _server_name(p)),
        ("pool", where),
        ("node", p.node or "unknown"),
        ("GPUs", _gpus_words(p)),
    ]
    if use is not None:
        fields += use_fields(use, time.time() if now is None else now)
    if p.pool is not None:
        fields.append(
            (
                "quota",
                "over quota: this server borrows idle GPUs and may be stopped (reclaimed) when "
                "their owners need them back"
                if p.over_quota
                else "within quota (not reclaimed)",
            )
        )
    fields.append(("CUDA_VISIBLE_DEVICES", _unset(p.cuda_visible_devices)))
    fields.append(("NVIDIA_VISIBLE_DEVICES", _unset(p.nvidia_visible_devices)))
    if nvidia_smi is not None:
        fields.append(("nvidia-smi -L", nvidia_smi.strip() or "(no GPUs listed)"))
    return fields


def use_fields(use: ServerUse, now: float) -> list[tuple[str, str]]:
    """``GPU utilization``: ``50% (max 90%), memory 31.0 of 160 GiB``, ``not measured (the
    source's problem)`` or ``unknown: why``; then a ``warning`` while the GPUs are idle
    (``idle since 14:05 UTC; will be stopped at 16:05 UTC``), and one for the server's most
    urgent other notice (runtime, budget, booking) with the time left (``... (stops in 4m)``)."""
    if use.error is not None:
        return [("GPU utilization", f"unknown: {use.error}")]
    if use.row is None:
        return [("GPU utilization", f"unknown: {NO_POD}")]
    measured = utilization_line(use.row)
    if measured is None:
        measured = "not measured" + (f" ({use.problem})" if use.problem else "")
    fields = [("GPU utilization", measured)]
    idle = idle_line(use.row.get("idle"), now)
    if idle is not None:
        fields.append(("warning", idle))
    notice = notice_of(use.row.get("notice"))
    if notice is not None and notice.kind != "idle":  # the idle line says that one
        fields.append(("warning", notice_line(notice, now)))
    return fields


def _gpus_words(p: Placement) -> str:
    """``2 \u00d7 A100-80G``; a part of a GPU in the service's words, with what it counts as:
    ``MIG 1g.10gb of an A100-80G (1/7 of a GPU)``."""
    if p.shaped:
        share = f" ({p.gpu_equivalents} of a GPU)" if p.gpu_equivalents else ""
        return f"{p.shape_text}{share}"
    return f"{p.gpus} {TIMES} {p.gpu_type}" if p.gpus and p.gpu_type else str(p.gpus)


def _unset(value: str | None) -> str:
    return "(not set)" if value is None else value or "(empty)"


def _server_name(p: Placement) -> str:
    if not p.user:
        return "not a JupyterHub server"
    return f"{p.user}/{server_words(p.server)}"


def status_report(
    placement: Placement,
    nvidia_smi: str | None,
    use: ServerUse | None = None,
    now: float | None = None,
) -> Report:
    fields = status_fields(placement, nvidia_smi, use, now)
    width = max(len(k) for k, _ in fields)
    text_lines = []
    for key, value in fields:
        first, *more = value.splitlines() or [""]
        text_lines.append(f"{key.ljust(width)}  {first}")
        text_lines += [" " * (width + 2) + line for line in more]
    e = html.escape
    # one style attribute: a browser ignores a second one on the same element
    warn = ";color:#b45309;font-weight:bold"

    def warned(key: str) -> bool:
        return key == "warning" or (key == "quota" and placement.over_quota)

    rows = "".join(
        f"<tr><th style='text-align:left'>{e(k)}</th>"
        f"<td style='text-align:left{warn if warned(k) else ''}'>"
        f"{'<pre>' + e(v) + '</pre>' if k == 'nvidia-smi -L' else e(v)}</td></tr>"
        for k, v in fields
    )
    return Report("\n".join(text_lines), f"<table class='gpupool-status'>{rows}</table>")


# --- %gpupool pools -----------------------------------------------------------------------------

POOL_HEADER = ("pool", "GPU types", "free / total", "largest free block", "your quota", "status")
#: The column added where some pool offers parts of GPUs: each shape's words and id.
SHAPES_HEADER = "shapes [id for launch --pools POOL:SHAPE]"


def offers_parts(catalog: Catalog) -> bool:
    """Whether some pool offers parts of GPUs (MIG instances, shared GPUs...), not only whole
    ones: then the pools are listed with their shapes."""
    return any(p.offers_parts for p in catalog.pools)


def pool_rows(launch_options: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One row per pool the user may use, in the service's order (their default pools first,
    as on the spawn form); with :data:`SHAPES_HEADER`'s column where some pool offers parts of
    GPUs."""
    catalog = Catalog.from_json(launch_options)
    shaped = offers_parts(catalog)
    return [
        (
            p.name,
            ", ".join(p.gpu_types) or "—",
            p.free_text,
            str(p.largest_free_block),
            quota_text(p),
            pool_status(p)[1],
            *(("; ".join(f"{s.text} [{s.id}]" for s in p.shapes) or "—",) if shaped else ()),
        )
        for p in catalog.pools
    ]


def isolation_lines(launch_options: Mapping[str, Any]) -> list[str]:
    """What each kind of shape the pools offer isolates: ``A MIG instance isolates memory and
    faults...``; nothing where every pool offers whole GPUs only."""
    catalog = Catalog.from_json(launch_options)
    if not offers_parts(catalog):
        return []
    seen: dict[str, str] = {}
    for s in (s for p in catalog.pools for s in p.shapes):
        seen.setdefault(kind_words(s.kind), s.isolates)
    return [f"{k[:1].upper()}{k[1:]} isolates {words}" for k, words in seen.items() if words]


def pools_report(launch_options: Mapping[str, Any]) -> Report:
    rows = pool_rows(launch_options)
    defaults = ", ".join(launch_options.get("default_pools") or ()) or "none"
    user = str(launch_options.get("user") or "")
    caption = f"Pools {user} may use (default order: {defaults})"
    budgets = [budget_text(b) for b in Catalog.from_json(launch_options).budgets]
    isolation = isolation_lines(launch_options)
    budget_lines = "".join(f"\nbudget: {b}" for b in budgets) + "".join(
        f"\n{line}" for line in isolation
    )
    budget_html = "".join(
        f"<p class='gpupool-budget'>budget: {html.escape(b)}</p>" for b in budgets
    ) + "".join(f"<p class='gpupool-isolation'>{html.escape(line)}</p>" for line in isolation)
    if not rows:
        text = f"{user} may use no pool: ask an admin for access"
        return Report(text + budget_lines, f"<p>{html.escape(text)}</p>{budget_html}")
    header = POOL_HEADER + ((SHAPES_HEADER,) if len(rows[0]) > len(POOL_HEADER) else ())
    return Report(
        caption + "\n" + table_text(header, rows) + budget_lines,
        table_html(header, rows, caption) + budget_html,
    )


# --- %gpupool queue -----------------------------------------------------------------------------

QUEUE_HEADER = ("server", "GPUs", "pools", "place in line", "quota", "waiting", "expected")
#: What ``%gpupool queue`` says when nothing of the user's waits.
NOTHING_WAITS = "nothing of yours waits in line"


def queue_rows(entries: Sequence[Mapping[str, Any]], now: float) -> list[tuple[str, ...]]:
    """One row per request of the user's waiting in line (the service's order)."""
    return [
        (
            server_words(e.get("server")),
            str(e.get("gpus", "")),
            ", ".join(e.get("pools") or ()) or "your default pools",
            str(e["position"]) if e.get("position") is not None else "not placed yet",
            "within quota" if e.get("within_quota") else "over quota (borrows)",
            _waited(e.get("waiting_since"), now),
            # when it should get in, and on what basis
            str(e.get("estimate_words") or "—"),
        )
        for e in entries
    ]


def _waited(since: Any, now: float) -> str:
    if isinstance(since, bool) or not isinstance(since, (int, float)):
        return "—"
    return human_duration(now - since)


def queue_report(entries: Sequence[Mapping[str, Any]], now: float | None = None) -> Report:
    """``%gpupool queue``: the user's requests waiting in line, with their places (1 = next,
    among the requests for the same pools) and how long they have waited."""
    if not entries:
        return Report(NOTHING_WAITS, f"<p>{html.escape(NOTHING_WAITS)}</p>")
    rows = queue_rows(entries, time.time() if now is None else now)
    caption = "Your servers waiting in line for GPUs (place 1 is next)"
    return Report(
        caption + "\n" + table_text(QUEUE_HEADER, rows),
        table_html(QUEUE_HEADER, rows, caption),
    )


# --- %gpupool launch ----------------------------------------------------------------------------


def progress_value(event: Mapping[str, Any]) -> int:
    try:
        return max(0, min(100, int(event.get("progress") or 0)))
    except (TypeError, ValueError):
        return 0


def progress_text(event: Mapping[str, Any]) -> str:
    """``[ 40%] message`` — one line per event in a terminal."""
    return f"[{progress_value(event):3d}%] {event.get('message') or ''}".rstrip()


def progress_html(server: str, event: Mapping[str, Any]) -> str:
    """A progress bar with the latest message (redrawn in place in a notebook)."""
    e = html.escape
    value = progress_value(event)
    failed = bool(event.get("failed"))
    colour = "#b91c1c" if failed else "#2563eb"
    link = ""
    if event.get("ready") and event.get("url"):
        url = str(event["url"])
        link = f" <a href='{e(url, quote=True)}' target='_blank'>open {e(server)}</a>"
    return (
        f"<div class='gpupool-progress'><b>{e(server)}</b> "
        f"<progress value='{value}' max='100' style='accent-color:{colour}'></progress> "
        f"{value}% {e(str(event.get('message') or ''))}{link}</div>"
    )
