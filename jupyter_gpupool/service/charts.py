"""The usage-over-time chart of the pools page, as plain SVG geometry (no JavaScript library).

:func:`usage_chart` turns the sampled history (:mod:`.history`) into polylines: GPUs in use per
pool (the largest pools by capacity, the rest summed as "other pools"), all pools together, and
the total capacity as a dashed line; with axis ticks that fit the time span shown. The template
``usage-chart.svg`` draws it. Pure, so it is tested directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .history import Sample

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
)
OTHER_COLOR = "#bcbd22"
ALL_COLOR = "#444444"
MIN_SPAN = 600.0  # a young history is still shown over ten minutes


@dataclass(frozen=True)
class Line:
    name: str
    color: str
    points: str  # "x,y x,y ..." for <polyline points>
    last: int  # GPUs at the latest sample
    dashed: bool = False
    width: float = 1.5


@dataclass
class Chart:
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    lines: list[Line] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    empty: bool = True


def _nice_step(top: float) -> int:
    """A tick step for 0..top that gives at most ~5 ticks: 1, 2, 5, 10, 20, 50..."""
    base = 1
    while True:
        for m in (1, 2, 5):
            if top / (base * m) <= 5:
                return base * m
        base *= 10


def _time_step(span: float) -> tuple[float, str]:
    for seconds, unit in ((300, "m"), (900, "m"), (1800, "m"), (3600, "h"), (7200, "h")):
        if span / seconds <= 6:
            return seconds, unit
    return 3 * 3600, "h"


def _label(ago: float, unit: str) -> str:
    if ago < 1:
        return "now"
    return f"-{round(ago / 60)}m" if unit == "m" else f"-{round(ago / 3600)}h"


def _sum(series_list: Sequence[Sequence[Sample]]) -> list[Sample]:
    """Samples of several pools added up, time by time (pools sampled together share times)."""
    by_time: dict[float, list[int]] = {}
    for series in series_list:
        for s in series:
            acc = by_time.setdefault(s.time, [0, 0])
            acc[0] += s.used
            acc[1] += s.total
    return [Sample(t, u, c) for t, (u, c) in sorted(by_time.items())]


def usage_chart(
    history: Mapping[str, Sequence[Sample]],
    now: float,
    hours: float,
    *,
    width: int = 760,
    height: int = 220,
    max_lines: int = 8,
) -> Chart:
    """The chart of ``history`` (per pool, oldest first) up to ``now``, over at most ``hours``."""
    left, top, right, bottom = 44, 12, 150, 24
    chart = Chart(width, height, left, top, width - left - right, height - top - bottom)
    series = {n: [s for s in ss if s.time >= now - hours * 3600] for n, ss in history.items()}
    series = {n: ss for n, ss in series.items() if ss}
    if not series:
        return chart
    chart.empty = False
    start = min(ss[0].time for ss in series.values())
    span = min(max(now - start, MIN_SPAN), hours * 3600)
    start = now - span
    everything = _sum(list(series.values()))
    ymax = max((s.total for s in everything), default=0)
    ymax = max(ymax, max((s.used for s in everything), default=0), 1)
    step = _nice_step(ymax)
    ymax = ((ymax + step - 1) // step) * step

    def points(samples: Sequence[Sample], value: str) -> str:
        out = []
        for s in samples:
            x = left + (s.time - start) / span * chart.plot_width
            v = s.used if value == "used" else s.total
            y = top + chart.plot_height - v / ymax * chart.plot_height
            out.append(f"{x:.1f},{y:.1f}")
        return " ".join(out)

    # the largest pools (by capacity) get their own line; the others are summed
    ranked = sorted(series, key=lambda n: (-series[n][-1].total, n))
    own, rest = ranked[:max_lines], ranked[max_lines:]
    chart.lines.append(
        Line("capacity", ALL_COLOR, points(everything, "total"), everything[-1].total, True, 1)
    )
    chart.lines.append(
        Line("all pools", ALL_COLOR, points(everything, "used"), everything[-1].used, False, 2.5)
    )
    for i, name in enumerate(own):
        ss = series[name]
        chart.lines.append(Line(name, PALETTE[i % len(PALETTE)], points(ss, "used"), ss[-1].used))
    if rest:
        other = _sum([series[n] for n in rest])
        chart.lines.append(
            Line(f"{len(rest)} other pools", OTHER_COLOR, points(other, "used"), other[-1].used)
        )
    for v in range(0, ymax + 1, step):
        chart.y_ticks.append((top + chart.plot_height - v / ymax * chart.plot_height, str(v)))
    tstep, unit = _time_step(span)
    ago = 0.0
    while ago <= span + 1e-6:
        chart.x_ticks.append((left + (span - ago) / span * chart.plot_width, _label(ago, unit)))
        ago += tstep
    return chart
