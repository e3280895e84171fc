"""The usage chart's time axis spans the range chosen (issue 28): "last 30 days" is 30 days wide
whatever the database holds, and a history ten minutes old is drawn in the axis's last ten
minutes, not stretched over all of it. Read from the SVG the pools page refreshes
(``pools/usage.svg?range=...``): the time ticks' labels and positions, the plot's edges, and the
x of each point of a pool's line.
"""

from __future__ import annotations

import itertools
import re
from html import unescape

import pytest
from service_kit import start_pod
from test_pages import Browser
from test_report_pages import chart_lines, sampled

from jupyter_gpupool.service.web.auth import ADMIN_SCOPE
from jupyter_gpupool.service.web.pages.charts import Usage
from jupyter_gpupool.service.web.pages.pools import CHART_POINTS, database_chart

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
#: Each range's span and the labels of its time ticks, from the right edge (now) to the left.
AXES = {
    "6h": (6 * HOUR, ["now", "-1h", "-2h", "-3h", "-4h", "-5h", "-6h"]),
    "24h": (24 * HOUR, ["now", "-6h", "-12h", "-18h", "-24h"]),
    "7d": (7 * DAY, ["now", "-1d", "-2d", "-3d", "-4d", "-5d", "-6d", "-7d"]),
    "30d": (30 * DAY, ["now", "-5d", "-10d", "-15d", "-20d", "-25d", "-30d"]),
}


def time_ticks(svg: str) -> list[tuple[float, str]]:
    """The time axis's ticks: ``(x, label)``, as drawn."""
    found = re.findall(
        r'<text x="([^"]+)" y="[^"]+" text-anchor="middle" class="gpupool-svg-tick">([^<]+)<', svg
    )
    return [(float(x), label) for x, label in found]


def plot_edges(svg: str) -> tuple[float, float]:
    """The plot's left and right edges: where its grid lines start and end."""
    x1, x2 = re.search(
        r'<line x1="([^"]+)" x2="([^"]+)"[^>]*class="gpupool-svg-grid"', svg
    ).groups()
    return float(x1), float(x2)


def line_xs(svg: str, name: str) -> list[float]:
    """The x of each point of the line called ``name``."""
    for points, title in re.findall(
        r'<polyline points="([^"]*)"[^>]*><title>([^<]*?): [^<]*</title>', svg
    ):
        if unescape(title) == name:
            return [float(p.split(",")[0]) for p in points.split()]
    raise AssertionError(f"no line {name!r} in the chart")


async def test_the_time_axis_spans_the_range_chosen_with_the_data_where_it_lies(start_service, now):
    """The database's first sample (dev-pool: alice's 2 GPUs) is ten minutes old: each range's
    axis runs from now - range to now, its ticks evenly spaced, and the line's first point is
    ten minutes left of "now" on that scale: about 16 px on the 6-hour axis, a sliver on the
    30-day one."""
    service = await start_service(history_interval=3600)
    admission = await service.admin().admit(
        user="alice", groups=["students"], pools=["dev-pool"], gpus=2
    )
    await start_pod(service.cluster, admission, "alice-nb")
    await service.settled()
    await sampled(service)
    now[0] += 10 * MINUTE
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    try:
        for range_, (span, labels) in AXES.items():
            status, svg, _ = await admin.get(f"pools/usage.svg?range={range_}")
            assert status == 200
            ticks = time_ticks(svg)
            assert [label for _, label in ticks] == labels, range_
            left, right = plot_edges(svg)
            assert ticks[0][0] == pytest.approx(right, abs=0.1)  # now at the right edge
            assert ticks[-1][0] == pytest.approx(left, abs=0.1)  # now - range at the left
            per_second = (right - left) / span
            steps = [a - b for (a, _), (b, _) in itertools.pairwise(ticks)]
            assert steps == pytest.approx([steps[0]] * len(steps), abs=0.15)  # evenly spaced
            xs = line_xs(svg, "dev-pool")
            assert xs[0] == pytest.approx(right - 10 * MINUTE * per_second, abs=0.1), range_
            assert xs[-1] == pytest.approx(right, abs=0.1)
            assert chart_lines(svg)["dev-pool"][-1] == 2
        assert right - 10 * MINUTE * (right - left) / (30 * DAY) > right - 0.2  # the sliver
    finally:
        admin.http.close()


async def test_without_a_database_the_axis_spans_the_hours_kept_in_memory(start_service):
    """The in-memory chart's axis is its ``history_hours`` (the page's "last 6 hours") wide,
    though the service has just started."""
    service = await start_service(db_url="")
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    try:
        status, svg, _ = await admin.get("pools/usage.svg")
        assert status == 200
        ticks = time_ticks(svg)
        assert [label for _, label in ticks] == AXES["6h"][1]
        left, right = plot_edges(svg)
        assert ticks[0][0] == pytest.approx(right, abs=0.1)
        assert ticks[-1][0] == pytest.approx(left, abs=0.1)
        assert line_xs(svg, "all pools")[0] > right - 1  # one point, now
    finally:
        admin.http.close()


def test_a_history_shorter_than_the_range_keeps_about_one_point_per_pixel_column():
    """Two days of samples a minute apart (2,880 rows) on the 7-day chart: averaged over the
    chart's own pixel columns, so they take 2/7 of the axis with about one point per column
    (not the 600 points of a full chart squeezed into it), ending with the current point."""
    end = 1_800_000_000.0
    rows = [[end - 2 * DAY + 60 * i, i % 2 * 4, 8, 0, 0] for i in range(2 * 24 * 60)]
    chart = database_chart({"a": rows}, {"a": Usage(end, 1, 8)}, end, 7 * 24)
    line = next(line for line in chart.lines if line.name == "a")
    xs = [float(p.split(",")[0]) for p in line.points.split()]
    column = chart.plot_width / CHART_POINTS
    assert len(xs) - 1 == pytest.approx(CHART_POINTS * 2 / 7, abs=1)
    assert xs[0] == pytest.approx(chart.left + chart.plot_width * 5 / 7, abs=column)
    assert [b - a for a, b in itertools.pairwise(xs[:-1])] == pytest.approx(
        [column] * (len(xs) - 2), abs=0.11
    )
    assert xs[-1] == pytest.approx(chart.left + chart.plot_width)
