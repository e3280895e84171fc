"""GPU utilization on the pages, in the history and in the metrics (issue 17): the pool page's
and *My GPUs*' servers tables show what each server's GPUs do, the pools page the GPUs actually
busy next to those in use (a column, and a dotted line per pool on the chart, kept in the
database's samples as ``gpu_busy``), and the Prometheus metrics ``gpupool_pool_gpus_busy`` and
``gpupool_pool_gpus_measured`` per pool.

The test sets each server's utilization in the simulated cluster (served by its DCGM exporter
page) and computes what to expect itself: GPUs busy = sum of GPUs x percent / 100 over the
servers measured. The pages are read as HTML; the samples with the test's own SQL.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from needs import need
from service_kit import Running, start_pod
from test_pages import Browser, text
from test_records import until
from test_report_pages import chart_lines
from test_utilization import exporter, page  # noqa: F401 - the fixture, and its page
from waiting import WaitTimeout, async_wait_for

from jupyter_gpupool.core.usage.rows import ServerUsage
from jupyter_gpupool.core.usage.utilization import (
    PodUtilization,
    busy_gpus,
    hourly_busy,
    measured_gpus,
)
from jupyter_gpupool.service import clock
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE, USE_SCOPE
from jupyter_gpupool.service.web.pages.parts import (
    idle_text,
    memory_text,
    sparkline,
    utilization_cell_text,
    utilization_text,
    utilization_title,
)
from jupyter_gpupool.service.web.pages.templating import make_environment

POOL = "training-pool"
DCGM = {"utilization_source": "dcgm", "dcgm_urls": ["/sim/v1/dcgm/metrics"]}
#: A poll every half second: a measurement is stale after 1.5 s, more than a loaded machine
#: takes between two polls (the stale test waits for that).
INTERVAL = 0.5
#: The test that reads every page at leisure polls every 2 s: its measurements stay fresh for
#: 6 s after a poll. At 0.5 s, a loaded CI machine once let one go stale between two pages
#: (the *My GPUs* cell read "—").
LEISURE = 2.0


def sample_now(service: Running) -> None:
    """One usage sample of every pool into the database now, as the service takes them every
    ``history_interval`` (app.py's ``_sample``), with the service's utilization."""
    ctx = service.ctx
    ctx.records.sample(clock.now(), ctx.state.pool_summaries(), ctx.state.index, ctx.utilization)


def server_cells(html: str, table_id: str) -> dict[str, dict[str, str]]:
    """Per server row (``namespace/pod``) of a table: the text of each ``data-format`` element
    of its utilization cell (util, memory, idle) and the spark's ``points``."""
    table = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html, re.S)
    assert table, f"no table #{table_id}: {text(html)[:600]}"
    body = re.search(r"<tbody[^>]*>(.*?)</tbody>", table.group(0), re.S)
    assert body
    out = {}
    for key, row in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', body.group(1), re.S):
        cells = {
            fmt: " ".join(unescape(value).split())
            for fmt, value in re.findall(r'data-format="(util|memory|idle)"[^>]*>([^<]*)<', row)
        }
        spark = re.search(r'data-format="spark" points="([^"]*)"', row)
        cells["spark"] = spark.group(1) if spark else ""
        out[unescape(key)] = cells
    return out


def header(html: str, table_id: str) -> list[str]:
    table = re.search(rf'<table[^>]*id="{table_id}".*?</thead>', html, re.S)
    assert table
    return [text(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table.group(0), re.S)]


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f}"


async def start_servers(service: Running, want: Mapping[str, tuple[str, int, int]]) -> None:
    """Start ``pod -> (user, GPUs, percent)`` in the pool and set their utilization."""
    admin = service.admin()
    for pod, (user, gpus, percent) in want.items():
        a = await admin.admit(user=user, groups=["ml-research"], pools=[POOL], gpus=gpus)
        assert a["pool"] == POOL
        await start_pod(service.cluster, a, pod)
        service.cluster.set_gpu_utilization("default", pod, percent)


async def measured_rows(service: Running, want: Mapping[str, tuple[str, int, int]]) -> dict:
    """The servers' API rows once each shows its percent with at least two polls of history."""

    async def check() -> dict | None:
        rows = {r["name"]: r for r in await service.admin().servers(pool=POOL)}
        for pod, (_, _, percent) in want.items():
            row = rows.get(pod)
            if row is None or row["gpu_utilization"] != percent:
                return None
            if len(row["gpu_utilization_history"]) < 2:
                return None
        return rows

    return await async_wait_for(check, what="every server measured twice", timeout=20)


def metric(metrics: str, name: str, pool: str) -> float | None:
    found = re.search(rf'^{name}{{pool="{pool}"}} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else None


async def test_pages_metrics_and_history_show_what_the_gpus_do(start_service):
    """Two GPUs at 50% and one at 0%: 1 GPU busy of 3 in use, on every page that shows it."""
    service = await start_service(**DCGM, utilization_interval=LEISURE)
    want = {"alice-nb": ("alice", 2, 50), "bob-nb": ("bob", 1, 0)}
    await start_servers(service, want)
    rows = await measured_rows(service, want)
    busy = sum(gpus * percent / 100 for _, gpus, percent in want.values())
    measured = sum(gpus for _, gpus, _ in want.values())
    assert (busy, measured) == (1.0, 3)
    [pool] = [p for p in await service.admin().pools() if p["name"] == POOL]
    assert pool["gpu_used"] == measured  # nothing else runs there

    # the metrics: busy against allocated, per pool
    metrics = await service.admin().metrics()
    assert metric(metrics, "gpupool_pool_gpus_busy", POOL) == busy
    assert f'gpupool_pool_gpus_busy{{pool="{POOL}"}} {busy}' in metrics.splitlines()
    assert metric(metrics, "gpupool_pool_gpus_measured", POOL) == measured
    assert metric(metrics, "gpupool_pool_gpus_used", POOL) == pool["gpu_used"]
    # a pool with nothing measured: 0 GPUs measured, and no busy figure (not measured is not idle)
    assert metric(metrics, "gpupool_pool_gpus_measured", "dev-pool") == 0
    assert metric(metrics, "gpupool_pool_gpus_busy", "dev-pool") is None

    # the database: the sample's gpu_busy (NULL where nothing was measured)
    db_url = service.app.db_url
    before = clock.now()
    sample_now(service)
    got = await until(
        db_url,
        f"SELECT pool, gpu_used, gpu_busy FROM usage_samples WHERE time >= {before!r}",
        lambda r: {p for p, _, _ in r} >= {POOL, "dev-pool"},
        "a sample of every pool",
    )
    samples = {p: (used, b) for p, used, b in got}
    assert samples[POOL] == (measured, busy) and samples["dev-pool"][1] is None
    # ... and the history API's column
    history = await service.admin().usage_history("6h", pool=POOL)
    assert history["columns"][-1] == "gpu_busy"
    latest = [r for r in history["pools"][POOL] if r[0] >= before]
    assert latest and latest[-1][history["columns"].index("gpu_busy")] == busy

    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    alice = Browser(service, service.hub.user("alice", ["ml-research"], [USE_SCOPE]))
    try:
        # the pool page: a utilization cell per server
        status, html, _ = await admin.get(f"pools/{POOL}")
        assert status == 200
        assert "GPU utilization" in header(html, "servers")
        cells = server_cells(html, "servers")
        for pod, (_, _, percent) in want.items():
            row, cell = rows[pod], cells[f"default/{pod}"]
            assert cell["util"] == f"{percent}%", (pod, cell)
            used, total = row["gpu_memory_used_mib"], row["gpu_memory_total_mib"]
            assert cell["memory"] == f"{gib(used)} of {gib(total)} GiB memory", (pod, cell)
            assert cell["idle"] == ""  # no idle policy says so
            heights = {float(p.split(",")[1]) for p in cell["spark"].split()}
            assert heights == {16 - percent / 100 * 16}, (pod, cell)  # flat, at its percent
        assert "gpupool-utilization-problem" not in html

        # My GPUs: alice's own server only, with its cell
        status, html, _ = await alice.get("")
        assert status == 200 and "GPU utilization" in header(html, "my-servers")
        mine = server_cells(html, "my-servers")
        assert list(mine) == ["default/alice-nb"] and mine["default/alice-nb"]["util"] == "50%"

        # the pools page: GPUs busy of those in use, and the chart's busy line
        status, html, _ = await admin.get("pools")
        assert status == 200 and "GPUs busy" in header(html, "pools")
        row = re.search(rf'<tr data-key="{POOL}">(.*?)</tr>', html, re.S)
        assert row
        busy_cell = re.search(r'<td class="n gpupool-busy">(.*?)</td>', row.group(1), re.S)
        assert busy_cell and text(busy_cell.group(1)).split() == [
            f"{busy:g}",
            "of",
            str(pool["gpu_used"]),
            "in",
            "use",
        ]
        status, svg, _ = await admin.get("pools/usage.svg")
        assert status == 200
        lines = chart_lines(svg)
        assert lines[f"{POOL} busy"][-1] == pytest.approx(busy, abs=0.05)
        assert lines[POOL][-1] == pytest.approx(pool["gpu_used"], abs=0.05)
        assert re.search(rf'stroke-dasharray="2 2"[^>]*><title>{POOL} busy: ', svg)
        assert f"all pools busy ({busy:g})" in svg  # the legend's entry
    finally:
        admin.http.close()
        alice.http.close()


async def test_stale_measurements_are_shown_and_counted_as_none(start_service, exporter):  # noqa: F811
    """The exporter stops answering: once the measurements are stale, the pages show "—" with
    the reason once above the table, and the metrics count no GPU busy or measured."""
    service = await start_service(
        utilization_source="dcgm", dcgm_urls=[exporter.url], utilization_interval=INTERVAL
    )
    admin = service.admin()
    a = await admin.admit(user="alice", groups=["ml-research"], pools=[POOL], gpus=2)
    await start_pod(service.cluster, a, "alice-nb")
    exporter.text = page({"alice-nb": (90, 10)})

    async def figures() -> tuple[float | None, float | None]:
        text_ = await admin.metrics()
        return (
            metric(text_, "gpupool_pool_gpus_busy", POOL),
            metric(text_, "gpupool_pool_gpus_measured", POOL),
        )

    async def metrics_say(want: tuple[float | None, int], what: str) -> None:
        async def same() -> bool:
            return await figures() == want

        try:
            await async_wait_for(same, what=f"{what}: (busy, measured) = {want}", timeout=15)
        except WaitTimeout as e:
            raise AssertionError(f"{e}; the metrics say {await figures()}") from None

    await metrics_say((1.0, 2), "2 GPUs at 90% and 10% measured")
    exporter.status = 503
    await metrics_say((None, 0), "the measurement stale")
    browser = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    try:
        status, html, _ = await browser.get(f"pools/{POOL}")
    finally:
        browser.http.close()
    assert status == 200
    assert server_cells(html, "servers")["default/alice-nb"]["util"] == "—"
    problems = re.findall(
        r'class="[^"]*gpupool-utilization-problem[^"]*"[^>]*>(.*?)</div>', html, re.S
    )
    assert len(problems) == 1 and "HTTP 503" in text(problems[0]), problems


async def test_without_a_source_the_pages_have_no_utilization_column(start_service):
    """No source configured: no utilization column, no busy column, no busy gauge."""
    service = await start_service()
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    try:
        _, pool_page, _ = await admin.get(f"pools/{POOL}")
        _, pools_page, _ = await admin.get("pools")
    finally:
        admin.http.close()
    assert "GPU utilization" not in header(pool_page, "servers")
    assert "gpupool-utilization-problem" not in pool_page
    assert "GPUs busy" not in header(pools_page, "pools")
    assert "gpupool_pool_gpus_busy" not in await service.admin().metrics()


# --- the pure parts ------------------------------------------------------------------------------


def server(name: str, gpus: int, state: str = "running") -> ServerUsage:
    return ServerUsage(
        "default", name, "u", "", POOL, "n1", gpus, state, False, None, None, None, ""
    )


def measured_at(percent: float) -> PodUtilization:
    return PodUtilization(
        gpus=0, util=percent, util_max=percent, mem_used=None, mem_total=None, at=0
    )


def test_busy_gpus_weigh_each_servers_utilization_by_its_gpus():
    """Busy = GPUs x percent / 100 over running measured servers; None when none is measured."""
    servers = [server("a", 4), server("b", 2), server("c", 1), server("d", 8, "pending")]
    table = {("default", "a"): measured_at(25), ("default", "b"): measured_at(100)}
    table[("default", "d")] = measured_at(100)  # pending: its GPUs are not its yet

    def measure(namespace: str, pod: str) -> PodUtilization | None:
        return table.get((namespace, pod))

    assert busy_gpus(servers, measure) == 4 * 0.25 + 2 * 1.0
    assert measured_gpus(servers, measure) == 4 + 2  # c is not measured
    assert busy_gpus(servers[2:], measure) is None and measured_gpus(servers[2:], measure) == 0


def test_hourly_busy_averages_the_measured_samples_only():
    """An unmeasured sample is not a 0 in the hour's average; an hour of none has no value."""
    rows = [
        {"time": 7200 + 60, "pool": "p", "gpu_busy": 1.0},
        {"time": 7200 + 120, "pool": "p", "gpu_busy": None},
        {"time": 7200 + 180, "pool": "p", "gpu_busy": 2.0},
        {"time": 7200 + 240, "pool": "q", "gpu_busy": None},
        {"time": 3600 * 3 + 5, "pool": "p"},
    ]
    assert hourly_busy(rows) == {(7200.0, "p"): 1.5}


def test_an_idle_server_says_since_when_and_until_when():
    """The idle policy's ``idle`` in words, and in the server row's cell."""
    since, stops = 1_800_000_000.0, 1_800_000_000.0 + 2 * 3600  # 08:00 and 10:00 UTC
    assert idle_text({"since": since, "warned": True, "stops_at": stops, "action": "stop"}) == (
        "idle since 08:00 UTC, stops at 10:00 UTC; its user was warned"
    )
    assert idle_text({"since": since, "warned": False, "stops_at": None, "action": "report"}) == (
        "idle since 08:00 UTC, reported (not stopped)"
    )
    assert idle_text(None) == ""
    row = {
        "namespace": "default",
        "name": "alice-nb",
        "gpu_utilization": 0.0,
        "util_text": "0%",
        "idle_text": idle_text({"since": since, "stops_at": stops, "action": "stop"}),
    }
    macros = make_environment().from_string(
        '{% import "macros.html" as m %}<table id="t"><tbody>'
        '{{ m.server_row(row, "/", "", "", stop=False, utilization=True) }}</tbody></table>'
    )
    cells = server_cells(macros.render(row=row), "t")["default/alice-nb"]
    assert cells["idle"] == "idle since 08:00 UTC, stops at 10:00 UTC"


NODE = shutil.which("node")
SCRIPT = Path(__file__).resolve().parents[4] / "jupyter_gpupool/service/web/pages/static/gpupool.js"
# The utilization cell's helpers of the page script, called on the cases given.
RUNNER = r"""
const src = require("fs").readFileSync(process.argv[1], "utf8");
const start = src.indexOf("  function oneDecimal(x)");
const end = src.indexOf("  function keyOf(");
const f = new Function(
  src.slice(start, end) + "; return {percentText, utilText, utilTitle, memory, idle, spark};"
)();
const cases = JSON.parse(process.argv[2]);
console.log(JSON.stringify({
  memory: cases.memory.map(([u, t]) => f.memory(u, t)),
  idle: cases.idle.map((v) => f.idle(v)),
  spark: cases.spark.map((h) => f.spark(h)),
  util: cases.util.map((v) => f.percentText(v)),
  rows: cases.rows.map((r) => [f.utilText(r), f.utilTitle(r)]),
}));
"""


def test_the_pages_script_writes_the_cell_as_the_server_does():
    """A refreshed utilization cell reads as the first one did (the same rounding)."""
    need(NODE, "node (runs the pages' script)")
    cases: dict[str, list[Any]] = {
        "memory": [[81920, 163840], [1280, 81920], [100, None], [None, None], [41, 8192]],
        "idle": [
            {"since": 1_800_000_000, "stops_at": 1_800_007_260, "warned": True, "action": "stop"},
            {"since": 1_800_000_059, "stops_at": None, "warned": False, "action": "report"},
            None,
        ],
        "spark": [
            [[0, 50.0], [30, 33.3], [90, 100.0]],
            [[5, 10.0]],
            [],
            [[1, 0], [1, 150]],
            [[30 * i, i * 7 % 101] for i in range(240)],  # a full history: 60 points of it
        ],
        "util": [50.0, 33.3, 0.0, None],
        # whole GPUs, a MIG instance, a shared GPU, a shared GPU not measured
        "rows": [
            {"gpu_utilization": 50.0, "gpu_utilization_max": 90.0},
            {
                "gpu_utilization": 35.0,
                "gpu_utilization_max": 35.0,
                "gpu_utilization_field": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            },
            {"gpu_utilization": 41.0, "gpu_utilization_shared": True},
            {"gpu_utilization": None, "gpu_utilization_shared": None},
        ],
    }
    run = subprocess.run(
        [NODE or "node", "-e", RUNNER, str(SCRIPT), json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    browser = json.loads(run.stdout)
    assert len(browser["spark"][-1].split()) == 60
    assert browser == {
        "memory": [memory_text(u, t) for u, t in cases["memory"]],
        "idle": [idle_text(v) for v in cases["idle"]],
        "spark": [sparkline(h) for h in cases["spark"]],
        "util": [utilization_text(v) for v in cases["util"]],
        "rows": [[utilization_cell_text(r), utilization_title(r)] for r in cases["rows"]],
    }
    assert browser["rows"][2][0] == "41% (shared GPU: all its servers)"
