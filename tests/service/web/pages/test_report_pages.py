"""What the database gives the pages (issue 16): the Reports page (GPU-hours table, bars, CSV),
the pools page's chart over 6h / 24h / 7d / 30d that goes on across restarts, and each user's
own GPU-hours on *My GPUs*; and what the pages say without their database.

Sessions are made by starting and stopping pods while the clock (the simulator's and the
service's) is moved, not waited for. The expected GPU-hours are computed by the test from its
own ledger of the sessions it ran (GPUs x hours inside the window, within or over quota as the
admission said, per user, charged group or pool), and compared with what the page shows.
"""

from __future__ import annotations

import asyncio
import csv
import io
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from html import unescape

import pytest
from service_kit import Running, delete_pod, start_pod
from test_pages import Browser, text
from test_records import until
from waiting import async_wait_for

from jupyter_gpupool.service import clock
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE
from jupyter_gpupool.service.web.pages import reports as reportpages
from jupyter_gpupool.service.web.pages.charts import Usage, downsample, hour_bars, usage_chart
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

HOUR, DAY = 3600.0, 86400.0
T0 = datetime(2027, 1, 15, 20, tzinfo=timezone.utc).timestamp()  # 20:00 UTC
JAN_15 = datetime(2027, 1, 15, tzinfo=timezone.utc).timestamp()
JAN_16 = datetime(2027, 1, 16, tzinfo=timezone.utc).timestamp()
DOWN_DB = "postgresql+psycopg://gpupool@127.0.0.1:9/gpupool"  # nothing listens there


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The service's clock, at ``now[0]`` until the test moves it."""
    moved = [T0]
    monkeypatch.setattr(clock, "now", lambda: moved[0])
    return moved


# --- the test's own ledger -----------------------------------------------------------------------


@dataclass
class Ran:
    """A session the test ran: who, where, how many GPUs, from when to when (None: running)."""

    user: str
    pool: str
    gpus: int
    over_quota: bool
    charged: str
    start: float
    stop: float | None = None


class Sessions:
    """Starts and stops servers' pods at the moved clock, and keeps the test's ledger."""

    def __init__(self, service: Running, db_url: str, now: list[float]):
        self.service, self.db_url, self.now = service, db_url, now
        self.ran: dict[str, Ran] = {}

    async def start(self, user: str, groups: list[str], pool: str, gpus: int, pod: str) -> Ran:
        a = await self.service.admin().admit(user=user, groups=groups, pools=[pool], gpus=gpus)
        assert a["pool"] == pool
        await start_pod(self.service.cluster, a, pod)
        self.ran[pod] = Ran(user, pool, gpus, a["over_quota"], a["charged"], self.now[0])
        await until(
            self.db_url,
            "SELECT pod FROM server_sessions",
            lambda rows: (pod,) in rows,
            f"the session of {pod} to be recorded",
        )
        return self.ran[pod]

    async def stop(self, pod: str) -> None:
        await delete_pod(self.service.cluster, pod)
        self.ran[pod].stop = self.now[0]
        await until(
            self.db_url,
            f"SELECT stopped FROM server_sessions WHERE pod = '{pod}'",
            lambda rows: rows == [(self.now[0],)],
            f"the session of {pod} to end now",
        )

    def expected(
        self, since: float, end: float, by: str, user: str | None = None
    ) -> dict[str, tuple[float, ...]]:
        """subject -> (within quota, over quota, GPU-hours, sessions) in ``[since, end)``, of
        ``user``'s sessions only when given."""
        out: dict[str, list[float]] = {}
        for r in self.ran.values():
            if user is not None and r.user != user:
                continue
            begin, stop = max(r.start, since), min(r.stop if r.stop is not None else end, end)
            if stop <= begin:
                continue
            group = r.charged.split(":", 1)[1] if r.charged.startswith("group:") else "(no group)"
            subject = {"user": r.user, "pool": r.pool, "group": group}[by]
            hours = r.gpus * (stop - begin) / HOUR
            row = out.setdefault(subject, [0.0, 0.0, 0.0, 0])
            row[1 if r.over_quota else 0] += hours
            row[2] += hours
            row[3] += 1
        return {k: tuple(v) for k, v in out.items()}


# --- reading the pages ---------------------------------------------------------------------------


def number(cell: str) -> float:
    return float(text(cell).strip().replace(",", ""))


def table_rows(html: str, table_id: str) -> dict[str, dict[str, str]]:
    """The body rows of a table: key -> {data-field: cell HTML}."""
    table = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html, re.S)
    assert table, f"no table #{table_id} on the page: {text(html)[:600]}"
    body = re.search(r"<tbody>(.*?)</tbody>", table.group(0), re.S).group(1)
    rows = {}
    for key, row in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', body, re.S):
        rows[unescape(key)] = dict(re.findall(r'data-field="([^"]+)">(.*?)</td>', row, re.S))
    return rows


def report_table(html: str) -> dict[str, tuple[float, ...]]:
    """The Reports table as a reader takes it: subject -> (within, over, GPU-hours, sessions)."""
    return {
        subject: tuple(
            number(cells[k]) for k in ("within_quota", "over_quota", "gpu_hours", "sessions")
        )
        for subject, cells in table_rows(html, "report").items()
    }


def bars(html: str) -> dict[str, tuple[float, float]]:
    """subject -> (width within quota, width over quota) of its bar, in %."""
    out = {}
    for key, row in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', html, re.S):
        widths = re.findall(r'gpupool-hours-(within|over)" style="width: ([\d.]+)%"', row)
        if widths:
            w = dict(widths)
            out[unescape(key)] = (float(w["within"]), float(w["over"]))
    return out


def rounded(table: dict[str, tuple[float, ...]], digits: int) -> dict[str, tuple[float, ...]]:
    return {k: tuple(round(v, digits) for v in row) for k, row in table.items()}


def svg_of(html: str) -> str:
    found = re.search(r"<svg.*?</svg>", html, re.S)
    assert found, "no chart on the page"
    return found.group(0)


def chart_lines(svg: str) -> dict[str, list[float]]:
    """Each line of the chart as the GPUs of its points, read against the y axis's ticks."""
    ticks = [
        (float(y) - 4, float(v))  # a tick's label sits 4 px below its grid line
        for y, v in re.findall(
            r'<text x="[^"]+" y="([^"]+)" text-anchor="end" class="gpupool-svg-tick">([\d.]+)<', svg
        )
    ]
    (y0, v0), (y1, v1) = ticks[0], ticks[-1]

    def gpus(y: float) -> float:
        return round(v0 + (y - y0) * (v1 - v0) / (y1 - y0), 2)

    return {
        unescape(name): [gpus(float(p.split(",")[1])) for p in points.split()]
        for points, name in re.findall(
            r'<polyline points="([^"]*)"[^>]*><title>([^<]*?): [^<]*</title>', svg
        )
    }


def x_labels(svg: str) -> list[str]:
    return re.findall(r'text-anchor="middle" class="gpupool-svg-tick">([^<]+)<', svg)


@pytest.fixture
def browsers(request: pytest.FixtureRequest) -> Callable[..., Browser]:
    """``browsers(service, name, groups, scopes)``: a page visitor, closed after the test."""
    made: list[Browser] = []

    def make(service: Running, name: str, groups: list[str], scopes: list[str] | None = None):
        b = Browser(service, service.hub.user(name, groups, scopes))
        made.append(b)
        return b

    yield make
    for b in made:
        b.http.close()


# --- the Reports page ----------------------------------------------------------------------------


async def test_the_reports_page_shows_the_ledgers_gpu_hours_with_bars_and_its_csv(
    db_url, start_service, now, browsers, monkeypatch
):
    """Four servers over six hours (one across midnight, two still running): per user, group
    and pool, over the last 7 days, since a date and between two dates, the table says what
    the test's ledger says, each bar is as long as its total compared with the largest, split
    within/over, and the CSV button gives the same numbers."""
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        s = Sessions(service, db_url, now)
        alice = await s.start("alice", ["ml-research"], "training-pool", 2, "alice-nb")  # 20:00
        dave = await s.start("dave", [], "training-pool", 4, "dave-nb")
        now[0] += 2 * HOUR
        await s.stop("dave-nb")  # 22:00
        erin = await s.start("erin", ["students"], "dev-pool", 1, "erin-nb")
        now[0] += HOUR
        carol = await s.start("carol", ["students"], "training-pool", 2, "carol-nb")  # 23:00
        now[0] += 2 * HOUR
        await s.stop("alice-nb")  # 01:00 the next day
        now[0] += HOUR  # 02:00: carol and erin still run
        assert [r.over_quota for r in (alice, dave, erin, carol)] == [False, True, False, True]

        admin = browsers(service, "admin", [], [ADMIN_SCOPE])
        windows = [
            ("since=7d", now[0] - 7 * DAY, now[0]),
            ("since=date&from=2027-01-16", JAN_16, now[0]),  # the form's date field
            ("since=2027-01-15&until=2027-01-16", JAN_15, JAN_16),
        ]
        for by in ("user", "group", "pool"):
            for query, since, end in windows:
                status, html, _ = await admin.get(f"reports?by={by}&{query}")
                assert status == 200, text(html)[:500]
                want = s.expected(since, end, by)
                table = report_table(html)
                assert table == rounded(want, 1), (by, query)
                # most hours first
                assert list(table) == sorted(want, key=lambda k: (-want[k][2], k))
                total = text(re.search(r'<tr[^>]*id="report-total">.*?</tr>', html, re.S)[0])
                assert total.split()[1:4] == [
                    f"{sum(w[i] for w in want.values()):.1f}" for i in range(3)
                ]
                # the bars: as long as each total against the largest, split within / over
                widths = bars(html)
                largest = max(w[2] for w in want.values())
                for subject, (within, over) in widths.items():
                    w = want[subject]
                    assert within == pytest.approx(100 * w[0] / largest, abs=0.01)
                    assert over == pytest.approx(100 * w[1] / largest, abs=0.01)
                assert set(widths) == set(table)
                lengths = [sum(widths[k]) for k in table]  # in the table's order: most first
                assert lengths[0] == pytest.approx(100, abs=0.02)
                assert all(a >= b - 0.02 for a, b in itertools.pairwise(lengths)), lengths
                # the CSV button: the same report
                href = unescape(re.search(r'id="report-csv" href="([^"]+)"', html)[1])
                assert href.startswith(service.app.base_url + "api/v1/reports/gpu-hours.csv?")
                status, body, headers = await admin.get(href.removeprefix(service.app.base_url))
                assert status == 200 and headers["Content-Type"].startswith("text/csv")
                lines = list(csv.DictReader(io.StringIO(body)))
                got = {
                    r["subject"]: tuple(
                        float(r[k]) for k in ("within_quota", "over_quota", "gpu_hours", "sessions")
                    )
                    for r in lines
                }
                assert got == rounded(want, 4), (by, query)
        # a long report shows its largest rows; the total is of all, the CSV has every row
        shown = reportpages.REPORT_ROWS
        monkeypatch.setattr(reportpages, "REPORT_ROWS", 2)
        status, html, _ = await admin.get("reports?by=user&since=7d")
        want = s.expected(now[0] - 7 * DAY, now[0], "user")
        largest = sorted(want, key=lambda k: (-want[k][2], k))
        assert list(report_table(html)) == largest[:2] and len(want) == 4
        assert "The 2 largest of 4; the CSV has every one." in text(html)
        total = text(re.search(r'<tr[^>]*id="report-total">.*?</tr>', html, re.S)[0])
        assert total.split()[3] == f"{sum(w[2] for w in want.values()):.1f}"
        monkeypatch.setattr(reportpages, "REPORT_ROWS", shown)
        # the window is said in words, and the admin navigation leads here
        status, html, _ = await admin.get("reports?by=pool&since=30d")
        assert "Per pool, from 2026-12-17T02:00:00Z to 2027-01-16T02:00:00Z (now)" in text(html)
        assert (
            'class="nav-link active" aria-current="page" href="/services/gpupool/reports"' in html
        )
        # users may not see everyone's hours
        status, html, _ = await browsers(service, "alice", ["ml-research"]).get("reports")
        assert status == 403 and "needs the custom:gpupool:admin scope" in text(html)


async def test_small_gpu_hours_are_not_shown_as_none_and_the_footnote_reads(
    db_url, start_service, now, browsers
):
    """dave's server ran 86 s on 1 GPU (0.024 GPU-hours), erin's 10 s (0.003): each has a bar,
    and its number is not 0.0; alice's 2 hours on 4 GPUs read as usual. The footnote says what
    the ``(no group)`` row is in a sentence of its own."""
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        s = Sessions(service, db_url, now)
        for user, groups, pod, seconds in [
            ("dave", [], "dave-nb", 86),
            ("erin", [], "erin-nb", 10),
            ("alice", ["ml-research"], "alice-nb", 2 * HOUR),
        ]:
            await s.start(user, groups, "training-pool", 4 if user == "alice" else 1, pod)
            now[0] += seconds
            await s.stop(pod)
        admin = browsers(service, "admin", [], [ADMIN_SCOPE])
        status, html, _ = await admin.get("reports?by=user&since=7d")
        assert status == 200, text(html)[:500]
        cells = table_rows(html, "report")
        shown = {user: text(cells[user]["gpu_hours"]).strip() for user in cells}
        assert shown == {"alice": "8.0", "dave": "0.02", "erin": "<0.01"}
        assert all(sum(widths) > 0 for widths in bars(html).values())
        status, html, _ = await admin.get("reports?by=group&since=7d")
        assert text(table_rows(html, "report")["(no group)"]["gpu_hours"]).strip() == "0.03"
        page = text(html)
        footnote = "(no group) is what was charged to users themselves, outside any group."
        assert f"for the group it was charged to. {footnote}" in page
        assert "((no group)" not in page


async def test_the_reports_page_says_what_is_wrong_with_its_question(start_service, browsers):
    service = await start_service()
    admin = browsers(service, "admin", [], [ADMIN_SCOPE])
    for query, said in [
        ("since=last+week", "Since must be a number of days or hours (7d, 24h) or a date"),
        ("since=date&from=", "Choose the date the report starts from."),
        ("by=team", "By must be user, group, pool or shape, not 'team'."),
        ("since=2027-01-16&until=2027-01-15", "Until must be after since."),
    ]:
        status, html, _ = await admin.get(f"reports?{query}")
        assert status == 400 and said in text(html), (query, text(html)[:800])
        assert 'id="report-form"' in html and 'id="report-csv"' not in html
    # a fresh service: no session yet, an empty report, and no error
    status, html, _ = await admin.get("reports")
    assert status == 200 and "No server ran on GPUs in this window." in text(html)


# --- My GPUs -------------------------------------------------------------------------------------


async def test_my_gpus_shows_my_own_gpu_hours_over_7_and_30_days(
    db_url, start_service, now, browsers
):
    """alice runs 2 GPUs for 2 h (within quota), ten days later 1 GPU for 3 h (over quota, in
    dev-pool where her group has no guarantee); bob runs 8 GPUs meanwhile. Her page shows her
    hours only: 3 over the last 7 days, 7 over 30."""
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        s = Sessions(service, db_url, now)
        await s.start("alice", ["ml-research"], "training-pool", 2, "alice-1")
        await s.start("bob", ["ml-research"], "training-pool", 8, "bob-1")
        now[0] += 2 * HOUR
        await s.stop("alice-1")
        now[0] += 10 * DAY
        await s.stop("bob-1")
        late = await s.start("alice", ["ml-research"], "dev-pool", 1, "alice-2")
        assert late.over_quota
        now[0] += 3 * HOUR

        periods = (("Last 7 days", 7 * DAY), ("Last 30 days", 30 * DAY))
        for user in ("alice", "bob"):
            status, html, _ = await browsers(service, user, ["ml-research"]).get("")
            assert status == 200
            shown = {
                period: tuple(
                    number(c[k]) for k in ("within_quota", "over_quota", "gpu_hours", "sessions")
                )
                for period, c in table_rows(html, "my-hours").items()
            }
            want = {
                label: s.expected(now[0] - span, now[0], "user", user).get(user, (0, 0, 0, 0))
                for label, span in periods
            }
            assert shown == rounded(want, 1), user
            if user == "alice":
                assert shown == {
                    "Last 7 days": (0.0, 3.0, 3.0, 1.0),
                    "Last 30 days": (4.0, 3.0, 7.0, 2.0),
                }


# --- the pools page's chart ----------------------------------------------------------------------


async def sampled(service: Running) -> None:
    """Until the service's first usage sample is in its database: a page drawn before it was
    committed has only the current point, one drawn after has both (at the same moved time)."""
    loop = next(loop for loop in service.ctx.loops if loop.name == "usage.samples")
    await async_wait_for(lambda: loop.runs >= 1, what="the first usage sample")
    assert await asyncio.to_thread(service.ctx.records.db.flush), "the sample was not written"


async def test_the_pools_chart_goes_on_across_restarts_and_shows_the_range_chosen(
    db_url, start_service, now, browsers
):
    """dev-pool: 0 GPUs in use when the service first samples, 2 after a restart a minute
    later (alice's server), 0 again three days later after another restart. The 6-hour chart
    after the first restart still has the sample from before it; three days on, the 24-hour
    chart has only zeros and the 7-day chart still shows the 2 GPUs of three days ago."""
    service = await start_service(db_url=db_url, history_interval=3600)
    a = await service.admin().admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    await start_pod(service.cluster, a, "alice-nb")
    await service.stop()
    now[0] += 60
    service = await start_service(db_url=db_url, history_interval=3600)
    await service.settled()
    await sampled(service)
    admin = browsers(service, "admin", [], [ADMIN_SCOPE])
    status, html, _ = await admin.get("pools")  # 6 hours unless asked
    assert status == 200
    dev = chart_lines(svg_of(html))["dev-pool"]
    assert dev[0] == 0 and dev[-1] == 2  # the first sample is from before the restart
    assert "GPUs in use, last 6 hours" in text(html) and "goes on across restarts" in text(html)
    assert 'href="/services/gpupool/pools?range=6h#usage" aria-current="true"' in html

    await delete_pod(service.cluster, "alice-nb")
    await service.stop()
    now[0] += 3 * DAY
    service = await start_service(db_url=db_url, history_interval=3600)
    await service.settled()
    await sampled(service)
    admin = browsers(service, "admin", [], [ADMIN_SCOPE])
    status, html, _ = await admin.get("pools?range=24h")
    assert status == 200 and "GPUs in use, last 24 hours" in text(html)
    day = svg_of(html)
    assert max(chart_lines(day)["dev-pool"]) == 0  # three days ago is not in the last 24 hours
    assert not any(label.endswith("d") for label in x_labels(day))
    week_page = (await admin.get("pools?range=7d"))[1]
    week = svg_of(week_page)
    assert "GPUs in use, last 7 days" in text(week_page)
    assert max(chart_lines(week)["dev-pool"]) == 2 and chart_lines(week)["dev-pool"][-1] == 0
    assert "-2d" in x_labels(week)  # the time axis reaches three days back
    # the chart alone (the page's refresh) draws the same, for the range the page shows
    assert 'data-live-svg="/services/gpupool/pools/usage.svg?range=7d"' in week_page
    status, svg, _ = await admin.get("pools/usage.svg?range=7d")
    assert status == 200 and chart_lines(svg) == chart_lines(week)
    assert chart_lines((await admin.get("pools/usage.svg?range=24h"))[1]) == chart_lines(day)
    status, html, _ = await admin.get("pools?range=1y")
    assert status == 400 and "range must be one of 6h, 24h, 7d, 30d, not '1y'" in text(html)


# --- without the database ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("db", "reason"),
    [("", "no database is configured"), (DOWN_DB, "127.0.0.1:9")],
    ids=["no-database", "database-down"],
)
async def test_without_their_database_the_pages_say_why_and_show_what_they_can(
    start_service, browsers, db, reason
):
    # alice's server, admitted before (a service whose database is down admits nothing)
    before = await start_service(db_url="")
    a = await before.admin().admit(user="alice", groups=["ml-research"], pools=["dev-pool"], gpus=1)
    await start_pod(before.cluster, a, "alice-nb")
    await before.stop()
    service = await start_service(db_url=db)
    await service.settled()
    admin = browsers(service, "admin", [], [ADMIN_SCOPE])
    # the pools page: the chart kept in memory, and why
    status, html, _ = await admin.get("pools?range=7d")
    page = text(html)
    assert status == 200 and "No usage history from the database: " in page and reason in page
    assert "hours kept in the service's memory, which start again when the service restarts" in page
    assert "GPUs in use, last 6 hours" in page and 'aria-label="time range' not in html
    assert chart_lines(svg_of(html))["dev-pool"][-1] == 1
    # the Reports page: the reason instead of the table (and no CSV to download)
    status, html, _ = await admin.get("reports?by=group&since=30d")
    page = text(html)
    assert status == 200 and "GPU-hours are not available: " in page and reason in page
    assert 'id="report"' not in html and 'id="report-csv"' not in html
    # My GPUs: the same reason, the rest of the page as ever
    status, html, _ = await browsers(service, "alice", ["ml-research"]).get("")
    page = text(html)
    assert status == 200 and "GPU-hours are not available: " in page and reason in page
    assert "Signed in as alice" in page and 'id="my-hours"' not in html


# --- the pure parts ------------------------------------------------------------------------------


def test_a_month_of_samples_is_averaged_to_the_charts_width_with_day_ticks():
    """30 days sampled every minute (two pools, sampled together): about one point per pixel
    column, each the average of its slice, and the time axis in days, all 30 of them."""
    start, minutes = T0, 30 * 24 * 60
    history = {
        "a": [Usage(start + 60 * i, i % 2 * 4, 8) for i in range(minutes)],  # 0, 4, 0, 4...
        "b": [Usage(start + 60 * i, 1, 4) for i in range(minutes)],
    }
    end = start + 60 * minutes
    points = downsample(history, start, end, 600)
    assert len(points["a"]) == len(points["b"]) == 600
    assert [p.time for p in points["a"]] == [p.time for p in points["b"]]  # still summable
    assert {p.used for p in points["a"]} == {2.0} and {p.total for p in points["b"]} == {4.0}
    assert downsample({"a": history["a"][:10]}, start, end, 600)["a"] == history["a"][:10]
    chart = usage_chart(points, end, 30 * 24)
    assert [label for _, label in chart.x_ticks] == [
        "now",
        "-5d",
        "-10d",
        "-15d",
        "-20d",
        "-25d",
        "-30d",
    ]
    assert chart.lines[1].name == "all pools" and chart.lines[1].last == 3  # 2 + 1, averaged
    assert len(chart.lines[1].points.split()) == 600


def test_hour_bars_are_as_long_as_each_total_against_the_largest():
    rows = [
        {"subject": "a", "gpu_hours": 8.0, "within_quota": 6.0, "over_quota": 2.0},
        {"subject": "b", "gpu_hours": 2.0, "within_quota": 0.0, "over_quota": 2.0},
    ]
    assert [(r["within_width"], r["over_width"]) for r in hour_bars(rows)] == [
        (75.0, 25.0),
        (0.0, 25.0),
    ]
    zero = [{"subject": "a", "gpu_hours": 0.0, "within_quota": 0.0, "over_quota": 0.0}]
    assert hour_bars(zero)[0]["within_width"] == 0.0 and hour_bars([]) == []
