"""Runs one of ``benchmarks/`` at the size asked and returns its one JSON line (the benchmarks'
smoke tests, ``test_bench_smoke*.py``)."""

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
