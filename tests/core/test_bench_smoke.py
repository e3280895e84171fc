"""The admission benchmark runs (at a tiny size; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_admission.py"


def test_benchmark_prints_one_json_line():
    out = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--nodes",
            "20",
            "--pools",
            "4",
            "--pods",
            "300",
            "--users",
            "30",
            "--groups",
            "6",
            "--admissions",
            "200",
            "--baseline-admissions",
            "3",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    [line] = out.splitlines()
    result = json.loads(line)
    for key in (
        "events_per_s",
        "admissions_per_s",
        "admission_p50_ms",
        "admission_p99_ms",
        "rss_mb",
        "baseline_ratio",
    ):
        assert result[key] > 0, key
    assert result["events"] > 300 and result["admissions"] == 200
