"""tests/quiet.py in a parallel run: a quiet test's call, and a quiet stretch inside a test, run
while no other test of the run runs, and the tests that run meanwhile on other workers end first.
A run of pytest with two xdist workers and this suite's hooks, on a small suite whose tests write
when they ran (CLOCK_MONOTONIC is the same clock in every process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_configure = suite.pytest_configure
pytest_runtest_protocol = suite.pytest_runtest_protocol
pytest_runtest_call = suite.pytest_runtest_call
"""

SUITE = """
import asyncio, json, os, time
import pytest
from quiet import quiet, quiet_async

def ran(name, seconds):
    began = time.monotonic()
    time.sleep(seconds)
    with open(os.environ["RAN"], "a") as f:
        f.write(json.dumps([name, os.environ["PYTEST_XDIST_WORKER"], began, time.monotonic()]))
        f.write("\\n")

@pytest.mark.quiet
def test_quiet():
    ran("quiet", 1.0)

def test_with_a_quiet_stretch():
    ran("before", 0.2)
    with quiet():
        ran("stretch", 1.0)

def test_with_a_quiet_stretch_on_an_event_loop():
    async def stretch():
        async with quiet_async():
            ran("async-stretch", 1.0)
    asyncio.run(stretch())

@pytest.mark.parametrize("i", range(12))
def test_other(i):
    ran(f"other-{i}", 0.3)
"""


def test_quiet_tests_and_stretches_run_alone(tmp_path: Path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    ran = tmp_path / "ran.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2"],
        cwd=tmp_path,
        env={**env, "RAN": str(ran), "CI": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = [json.loads(line) for line in ran.read_text().splitlines()]
    assert len(runs) == 16 and {w for _, w, _, _ in runs} == {"gw0", "gw1"}, runs
    for alone in ("quiet", "stretch", "async-stretch"):
        [(_, _, began, ended)] = [r for r in runs if r[0] == alone]
        overlapping = [r for r in runs if r[0] != alone and r[2] < ended and r[3] > began]
        assert overlapping == [], (alone, runs)
