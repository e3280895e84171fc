from __future__ import annotations

import pytest
from needs import under_ci

pytest_plugins = ["jupyter_gpupool.sim.pytest_plugin"]


@pytest.fixture(scope="session")
def realk8s_kubeconfig(tmp_path_factory: pytest.TempPathFactory):
    """A real control plane for the whole run (tests/realk8s.py), started on first use."""
    import realk8s

    yield from realk8s.start(tmp_path_factory.mktemp("realk8s") / "cp")


def _skipped(session: pytest.Session) -> list[pytest.TestReport]:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    return list(reporter.stats.get("skipped", [])) if reporter is not None else []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI a skipped test fails the run: every test must run there (see tests/needs.py)."""
    if under_ci() and _skipped(session) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if under_ci() and skipped:
        terminalreporter.write_line(
            f"CI: {len(skipped)} test(s) skipped, and under CI every test must run; "
            "the reasons are in the short test summary (-rs)",
            red=True,
        )
