"""Under CI a skipped test fails the run (tests/conftest.py), in parallel runs too: a run of
pytest on a small suite that skips one test, with this suite's hooks, fails under ``CI=true``,
with two xdist workers and serially, and passes without CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# the suite's own conftest, loaded under another name, its end-of-run hooks taken as they are
CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_sessionfinish = suite.pytest_sessionfinish
pytest_terminal_summary = suite.pytest_terminal_summary
"""

SUITE = """
import pytest

def test_runs():
    pass

def test_skipped():
    pytest.skip("nothing to test here")

def test_runs_too():
    pass
"""


def run(where: Path, ci: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CI": ci}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    return tmp_path


@pytest.mark.parametrize("how", [["-n", "2"], ["-p", "no:xdist"]], ids=["xdist", "serial"])
def test_a_skip_fails_the_run_under_ci(suite: Path, how: list[str]):
    done = run(suite, "true", *how)
    assert "2 passed, 1 skipped" in done.stdout, done.stdout + done.stderr
    assert "CI: 1 test(s) skipped" in done.stdout
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr


def test_without_ci_a_skip_is_only_reported(suite: Path):
    done = run(suite, "", "-p", "no:xdist")
    assert "2 passed, 1 skipped" in done.stdout, done.stdout + done.stderr
    assert "CI:" not in done.stdout
    assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
