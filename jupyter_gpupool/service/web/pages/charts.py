"""The pages' pictures, as plain geometry (no JavaScript library): the usage-over-time chart of
the pools page and the GPU-hours bars of the reports page.

:func:`usage_chart` turns sampled usage (the database's history, :func:`history_series`, or the
in-memory one of :mod:`.history`) into polylines: GPUs in use per pool (the largest pools by
capacity, the rest summed as "other pools"), all pools together, and the total capacity as a
dashed line; where GPU utilization was measured, the GPUs actually busy as a finer dashed line
beside each (broken where nothing was measured). The time axis spans the whole range asked for
(the last 6 hours, 30 days...), whatever part of it has samples, with ticks in minutes, hours or
days to fit it. Long series are averaged into about one point per pixel column
(:func:`downsample`). The template ``usage-chart.svg`` draws it.

:func:`hour_bars` gives each row of a GPU-hours report its bar: within and over quota, as
percentages of the largest total. Pure, so they are tested directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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


class Point(Protocol):
    """A sample: :class:`~.history.Sample` (in memory) or :class:`Usage` (from the database)."""

    @property
    def time(self) -> float: ...

    @property
    def used(self) -> float: ...

    @property
    def total(self) -> float: ...


@dataclass(frozen=True)
class Usage:
    """GPUs in use and in total at ``time`` (averages, for samples from the database), and of
    those the GPUs actually busy (None: not measured)."""

    time: float
    used: float
    total: float
    busy: float | None = None


def busy_of(s: Point) -> float | None:
    """A sample's GPUs busy; None when not measured (the in-memory samples never are)."""
    return getattr(s, "busy", None)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def tidy(value: float) -> float:
    """A GPU figure as shown: whole numbers as such (16, not 16.0), else one decimal."""
    rounded = round(value, 1)
    return int(rounded) if rounded == int(rounded) else rounded


#: The dashes of the capacity line and of the GPUs busy lines.
CAPACITY_DASH, BUSY_DASH = "5 4", "2 2"


@dataclass(frozen=True)
class Line:
    name: str
    color: str
    points: str  # "x,y x,y ..." for <polyline points>
    last: float  # GPUs at the latest sample (a whole number when it is one)
    dashed: bool = False
    width: float = 1.5
    dash: str = CAPACITY_DASH  # stroke-dasharray when dashed
    #: Pieces drawn apart (a line broken where nothing was measured); empty: ``points`` whole.
    segments: tuple[str, ...] = ()
    legend: bool = True  # an entry of its own in the legend


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


HOUR, DAY = 3600, 86400
TIME_STEPS = (
    (300, "m"),
    (900, "m"),
    (1800, "m"),
    (HOUR, "h"),
    (2 * HOUR, "h"),
    (3 * HOUR, "h"),
    (6 * HOUR, "h"),
    (12 * HOUR, "h"),
    (DAY, "d"),
    (2 * DAY, "d"),
    (5 * DAY, "d"),
)


def _time_step(span: float) -> tuple[float, str]:
    """The first step that cuts ``span`` in at most seven: 6 hours by the hour, 24 hours by 6
    hours, 7 days by the day, 30 days by 5 days."""
    for seconds, unit in TIME_STEPS:
        if span / seconds <= 7:
            return seconds, unit
    return 10 * DAY, "d"


def _label(ago: float, unit: str) -> str:
    if ago < 1:
        return "now"
    size = {"m": 60, "h": HOUR, "d": DAY}[unit]
    return f"-{round(ago / size)}{unit}"


def _sum(series_list: Sequence[Sequence[Point]]) -> list[Usage]:
    """Samples of several pools added up, time by time (pools sampled together share times);
    GPUs busy over the pools measured then (None when none was)."""
    by_time: dict[float, list[float]] = {}
    busy: dict[float, float] = {}
    for series in series_list:
        for s in series:
            acc = by_time.setdefault(s.time, [0, 0])
            acc[0] += s.used
            acc[1] += s.total
            b = busy_of(s)
            if b is not None:
                busy[s.time] = busy.get(s.time, 0.0) + b
    return [Usage(t, u, c, busy.get(t)) for t, (u, c) in sorted(by_time.items())]


def history_series(
    pools: Mapping[str, Sequence[Sequence[float]]],
    end: float,
    buckets: int = 600,
    start: float | None = None,
) -> dict[str, list[Usage]]:
    """The ``pools`` of ``GET api/v1/usage/history`` (rows ``[time, gpu_used, gpu_total,
    gpu_over_quota, gpu_pending, gpu_busy]``, oldest first; ``gpu_busy`` may be None or
    missing) as series of :class:`Usage` up to ``end``: as they are, or, when a pool has more
    rows than ``buckets``, every pool averaged over ``buckets`` equal slices from ``start``
    (the chart's left edge; unless given, the oldest row) to ``end`` (see :func:`downsample`;
    GPUs busy over the rows that have it). One pass over the rows."""
    if start is None:
        start = min((rows[0][0] for rows in pools.values() if rows), default=end)

    def busy(r: Sequence[float | None]) -> float | None:
        return None if len(r) < 6 or r[5] is None else float(r[5])

    if all(len(rows) <= buckets for rows in pools.values()) or end <= start:
        return {
            name: [Usage(float(r[0]), float(r[1]), float(r[2]), busy(r)) for r in rows]
            for name, rows in pools.items()
        }
    width = (end - start) / buckets
    out: dict[str, list[Usage]] = {}
    for name, rows in pools.items():
        used, total, count = [0.0] * buckets, [0.0] * buckets, [0] * buckets
        busy_sum, busy_count = [0.0] * buckets, [0] * buckets
        for r in rows:
            b = min(buckets - 1, max(0, int((r[0] - start) // width)))
            used[b] += r[1]
            total[b] += r[2]
            count[b] += 1
            value = busy(r)
            if value is not None:
                busy_sum[b] += value
                busy_count[b] += 1
        out[name] = [
            Usage(
                start + (b + 0.5) * width,
                used[b] / n,
                total[b] / n,
                busy_sum[b] / busy_count[b] if busy_count[b] else None,
            )
            for b, n in enumerate(count)
            if n
        ]
    return out


def downsample(
    history: Mapping[str, Sequence[Point]], start: float, end: float, buckets: int
) -> dict[str, list[Usage]]:
    """Each series averaged over ``buckets`` equal slices of ``[start, end]``, a point per slice
    that has samples, at the slice's middle (so pools sampled together still share times).
    Series no longer than ``buckets`` are left as they are."""
    if all(len(ss) <= buckets for ss in history.values()) or end <= start:
        return {
            n: [Usage(s.time, s.used, s.total, busy_of(s)) for s in ss] for n, ss in history.items()
        }
    width = (end - start) / buckets
    out: dict[str, list[Usage]] = {}
    for name, ss in history.items():
        sums: dict[int, list[float]] = {}
        busy: dict[int, list[float]] = {}
        for s in ss:
            b = min(buckets - 1, max(0, int((s.time - start) // width)))
            acc = sums.setdefault(b, [0.0, 0.0, 0.0])
            acc[0] += s.used
            acc[1] += s.total
            acc[2] += 1
            value = busy_of(s)
            if value is not None:
                busy.setdefault(b, []).append(value)
        out[name] = [
            Usage(start + (b + 0.5) * width, u / n, c / n, _mean(busy.get(b, ())))
            for b, (u, c, n) in sorted(sums.items())
        ]
    return out


def usage_chart(
    history: Mapping[str, Sequence[Point]],
    now: float,
    hours: float,
    *,
    width: int = 760,
    height: int = 220,
    max_lines: int = 8,
) -> Chart:
    """The chart of ``history`` (per pool, oldest first) over the ``hours`` up to ``now``: the
    time axis spans all of them, and a history younger than that is drawn where it lies (a
    line that starts ten minutes ago takes the last sliver of a 30-day axis)."""
    left, top, right, bottom = 44, 12, 150, 24
    chart = Chart(width, height, left, top, width - left - right, height - top - bottom)
    series = {n: [s for s in ss if s.time >= now - hours * 3600] for n, ss in history.items()}
    series = {n: ss for n, ss in series.items() if ss}
    if not series:
        return chart
    chart.empty = False
    span = hours * 3600
    start = now - span
    everything = _sum(list(series.values()))
    top_value = max((s.total for s in everything), default=0)
    top_value = max(top_value, max((s.used for s in everything), default=0), 1)
    step = _nice_step(top_value)
    ymax = int(-(-top_value // step)) * step  # rounded up to a step

    def xy(t: float, v: float) -> str:
        x = left + (t - start) / span * chart.plot_width
        y = top + chart.plot_height - v / ymax * chart.plot_height
        return f"{x:.1f},{y:.1f}"

    def points(samples: Sequence[Point], value: str) -> str:
        return " ".join(xy(s.time, s.used if value == "used" else s.total) for s in samples)

    def busy_line(name: str, color: str, samples: Sequence[Point], width: float) -> Line | None:
        """GPUs busy, in pieces where measured (a lone point as a dot); None if never."""
        pieces: list[list[str]] = [[]]
        last = None
        for s in samples:
            b = busy_of(s)
            if b is None:
                if pieces[-1]:
                    pieces.append([])
                continue
            pieces[-1].append(xy(s.time, b))
            last = b
        pieces = [p * 2 if len(p) == 1 else p for p in pieces if p]
        if last is None:
            return None
        segments = tuple(" ".join(p) for p in pieces)
        return Line(
            f"{name} busy",
            color,
            " ".join(segments),
            tidy(last),
            True,
            width,
            BUSY_DASH,
            segments,
            legend=name == "all pools",
        )

    # the largest pools (by capacity) get their own line; the others are summed
    ranked = sorted(series, key=lambda n: (-series[n][-1].total, n))
    own, rest = ranked[:max_lines], ranked[max_lines:]
    last = everything[-1]
    chart.lines.append(
        Line("capacity", ALL_COLOR, points(everything, "total"), tidy(last.total), True, 1)
    )
    chart.lines.append(
        Line("all pools", ALL_COLOR, points(everything, "used"), tidy(last.used), False, 2.5)
    )
    busy = [busy_line("all pools", ALL_COLOR, everything, 2.5)]
    for i, name in enumerate(own):
        ss = series[name]
        color = PALETTE[i % len(PALETTE)]
        chart.lines.append(Line(name, color, points(ss, "used"), tidy(ss[-1].used)))
        busy.append(busy_line(name, color, ss, 1.5))
    if rest:
        other = _sum([series[n] for n in rest])
        name = f"{len(rest)} other pools"
        chart.lines.append(Line(name, OTHER_COLOR, points(other, "used"), tidy(other[-1].used)))
        busy.append(busy_line(name, OTHER_COLOR, other, 1.5))
    # the GPUs actually busy, after the lines in use; one legend entry says what dashes mean
    chart.lines.extend(line for line in busy if line is not None)
    for v in range(0, ymax + 1, step):
        chart.y_ticks.append((top + chart.plot_height - v / ymax * chart.plot_height, str(v)))
    tstep, unit = _time_step(span)
    ago = 0.0
    while ago <= span + 1e-6:
        chart.x_ticks.append((left + (span - ago) / span * chart.plot_width, _label(ago, unit)))
        ago += tstep
    return chart


# --- GPU-hours bars ------------------------------------------------------------------------------


def hour_bars(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of a GPU-hours report (``gpu_hours``, ``within_quota``, ``over_quota``) with
    their bar: ``within_width`` and ``over_width``, percentages of the largest total, so the
    bars' lengths compare the subjects and each shows its split."""
    largest = max((float(r["gpu_hours"]) for r in rows), default=0.0)

    def width(value: float) -> float:
        return round(100.0 * value / largest, 2) if largest > 0 else 0.0

    return [
        {
            **r,
            "within_width": width(float(r["within_quota"])),
            "over_width": width(float(r["over_quota"])),
        }
        for r in rows
    ]
