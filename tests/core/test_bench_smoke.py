"""The benchmarks run at a tiny size and measure what they were asked to (no timing target).

Each prints one JSON line; the checks are on its shape and its counts: every figure present, as
many measurements as requests asked for, every request answered as it should be (a benchmark of
401s or 500s measures nothing), percentiles in order, and the baseline measured in the same run
slower than what it is the baseline of. bench_spawn's smoke test is in
``tests/spawner/test_spawner_docs.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run(script: str, *args: object) -> dict:
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    [line] = out.splitlines()
    return json.loads(line)


def test_admission_benchmark():
    nodes, pools, pods, admissions = 20, 4, 2000, 200
    result = run(
        "bench_admission.py",
        *("--nodes", nodes, "--pools", pools, "--pods", pods, "--users", 30, "--groups", 6),
        *("--admissions", admissions, "--baseline-admissions", 5),
    )
    assert set(result) == {
        "events_per_s",
        "admissions_per_s",
        "admission_p50_ms",
        "admission_p99_ms",
        "rss_mb",
        "baseline_ratio",
        "events",
        "admissions",
        "admitted",
        "baseline_ms",
        "peak_rss_mb",
        "nodes",
        "pods",
        "pools",
    }
    assert (result["nodes"], result["pods"], result["pools"]) == (nodes, pods, pools)
    # every node added; every pod created pending then bound; one pod in ten (0, 10, ...) ends
    assert result["events"] == nodes + 2 * pods + (pods + 9) // 10
    assert result["admissions"] == admissions
    assert 0 < result["admitted"] <= admissions
    assert 0 < result["admission_p50_ms"] <= result["admission_p99_ms"]
    assert result["events_per_s"] > 0 and result["admissions_per_s"] > 0
    assert result["rss_mb"] > 0 and result["peak_rss_mb"] > 0
    # the naive recount scans 2,000 pods per decision: slower than the index, in the same run
    assert result["baseline_ms"] > 0 and result["baseline_ratio"] > 1


def test_service_benchmark():
    requests = 20
    result = run(
        "bench_service.py",
        *("--nodes", 20, "--pools", 3, "--pods", 40, "--groups", 4),
        *("--clients", 2, "--requests", requests),
    )
    assert set(result) == {
        "nodes",
        "pods",
        "pools",
        "clients",
        "keepalive",
        "requests_per_phase",
        "admission_p50_ms",
        "admission_p99_ms",
        "admissions_per_s",
        "admission_status",
        "pools_p50_ms",
        "pools_p99_ms",
        "pools_per_s",
        "pools_status",
        "service_rss_mb",
        "startup_s",
        "populate_s",
    }
    assert result["requests_per_phase"] == requests
    # 160 GPUs, one per admission: every admission is admitted, every pool list answered
    assert result["admission_status"] == {"201": requests}
    assert result["pools_status"] == {"200": requests}
    assert 0 < result["admission_p50_ms"] <= result["admission_p99_ms"]
    assert 0 < result["pools_p50_ms"] <= result["pools_p99_ms"]
    assert result["admissions_per_s"] > 0 and result["pools_per_s"] > 0
    assert result["service_rss_mb"] > 0 and result["startup_s"] > 0


def test_pages_benchmark():
    result = run(
        "bench_pages.py",
        *("--nodes", 20, "--pools", 2, "--pods", 40, "--groups", 4, "--requests", 2),
    )
    assert (result["nodes"], result["pods"], result["pools"]) == (20, 40, 2)
    pages = result["pages"]
    assert set(pages) == {
        "user",
        "pools",
        "pool",
        "nodes",
        "nodes_last_page",
        "nodes_status_filter",
        "nodes_name_filter",
        "quotas",
        "admin",
        "usage_chart",
        "api_nodes_page",
        "api_pool_servers",
        "api_quota_rows",
        "baseline_api_all_nodes",
    }
    for name, page in pages.items():
        assert page["status"] == 200, (name, page)
        assert 0 < page["p50_ms"] <= page["p99_ms"], (name, page)
        assert page["kb"] > 0, (name, page)


def test_database_benchmark():
    result = run("bench_database.py", "--quick")
    admission, size = result["admission"], result["size"]
    assert (admission["nodes"], admission["pods"], admission["pools"]) == (20, 40, 3)
    runs = admission["runs"]
    assert runs["postgresql"] == {"skipped": "left out (--no-postgresql)"}
    for name in ("off", "sqlite"):
        run_ = runs[name]
        # every admission admitted and every release answered: a run of refusals measures nothing
        assert run_["admission_status"] == {"201": run_["admissions"]}, (name, run_)
        assert run_["release_status"] == {"200": run_["admissions"]}, (name, run_)
        assert 0 < run_["admission_p50_ms"] <= run_["admission_p99_ms"], (name, run_)
        assert run_["churn_pods"] > 0, (name, run_)
    # the database run wrote while it was measured: samples, and a session per churned pod
    sqlite = runs["sqlite"]
    assert sqlite["samples_written"] > 0
    assert sqlite["sessions_written"] >= sqlite["churn_pods"]
    assert "samples_written" not in runs["off"]
    assert admission["ratio_on_off"]["sqlite_p99"] == round(
        sqlite["admission_p99_ms"] / runs["off"]["admission_p99_ms"], 2
    )
    # one simulated day: a sample per pool a minute, no downsampling before raw_days
    rows = size["rows"]
    assert rows["usage_samples_raw"] == 3 * 24 * 60 and rows["usage_samples_hourly"] == 0
    assert rows["server_sessions"] == size["sessions_opened"]
    assert rows["server_sessions_open"] == size["sessions_opened"] - size["sessions_closed"]
    assert size["size_mb"] > 0 and size["bytes_per_sample"] > 0 and size["api_rows_per_s"] > 0


def test_utilization_benchmark():
    result = run("bench_utilization.py", "--quick")
    # 20 nodes x 8 GPUs, 2 GPUs to a server: 80 servers measured
    assert (result["nodes"], result["gpus"], result["servers"]) == (20, 160, 80)
    assert 0 < result["poll_p50_ms"] <= result["poll_max_ms"]
    assert result["baseline_p50_ms"] > 0 and result["held_mb"] >= 0
    # the ratio of the unrounded times: within rounding of the ratio of the rounded ones
    ratio = result["baseline_p50_ms"] / result["poll_p50_ms"]
    assert abs(result["baseline_x_poll"] - ratio) < 0.05 * ratio
    # part 2: the service polled its 40 servers' GPUs (a poll that measured nothing would not
    # be counted) and both runs' RSS was read
    assert result["service_pods"] == 40 and result["service_polls"] >= 3
    assert result["service_rss_mb"] > 0 and result["service_rss_without_mb"] > 0
    rss_ratio = result["service_rss_mb"] / result["service_rss_without_mb"]
    assert abs(result["service_rss_x_without"] - rss_ratio) < 0.02


def test_queue_benchmark():
    result = run(
        "bench_queue.py",
        *("--nodes", 50, "--pools", 5, "--users", 40, "--groups", 8),
        *("--queued", 40, "--releases", 20),
    )
    assert (result["queued"], result["releases"], result["nodes"]) == (40, 20, 50)
    # every release of a full node lets a request of its pool in (the line keeps one there)
    assert result["admitted"] == 20
    assert 0 < result["release_to_admission_p50_ms"] <= result["release_to_admission_p99_ms"]
    assert 0 < result["immediate_p50_ms"] <= result["immediate_p99_ms"]
    ratio = result["release_to_admission_p50_ms"] / result["immediate_p50_ms"]
    assert abs(result["ratio"] - ratio) < 0.05 * ratio + 0.1
