"""`gpupool demo` stops even when a child ignores SIGTERM: it kills it after the grace period and
says so, instead of leaving it running (a service stuck in a CPU-bound request never gets back to
its signal handler)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from proctree import alive, cmdline, descendants, mentioning
from quiet import quiet
from waiting import wait_for

from jupyter_gpupool.demo.run import HUB_EXTRA_GRACE
from jupyter_gpupool.demo.testing import DemoProcess, _stop

GRACE = 3.0
#: The hub's own cleanup would kill the stand-in after SIGINT (10 s) and SIGTERM (5 s) timeouts:
#: the demo must kill it well before, and the hub must not need killing itself. The hub may then
#: take up to 5 s to see the stand-in gone (its polls back off to 5 s) and a moment to finish.
MARGIN = 10.0

# The service's place in the demo, held by a process that ignores SIGINT and SIGTERM (as the
# hub's cleanup and the demo send them) and runs the real service as its own child, so that the
# demo still becomes ready and the stuck process has a child of its own (which must not be left
# behind either: once its parent is killed, it is no longer below the hub).
STAND_IN = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    service = subprocess.Popen(sys.argv[2:])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump({"stuck": os.getpid(), "service": service.pid}, f)
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(3600)
    """
)


def _kill_if_left(pid, script):
    """When the demo fails to, so that a failing run leaves nothing behind (by pid, once its
    command line shows it is still the stand-in)."""
    if alive(pid) and script in cmdline(pid):
        os.kill(pid, signal.SIGKILL)


def _kill_left(tmp_path):
    """When the demo fails to, so that a failing run leaves nothing behind: what still runs
    from this test's directory (by pid)."""
    for pid in mentioning(str(tmp_path)):
        os.kill(pid, signal.SIGKILL)


def test_stop_kills_a_child_that_ignores_sigterm_and_says_so(tmp_path, monkeypatch, request):
    script, pids_file = tmp_path / "stuck_service.py", tmp_path / "pids.json"
    script.write_text(STAND_IN)
    service = ["{python}", "-m", "jupyter_gpupool.service", "--port={port}"]
    service += ["--kubeconfig={kubeconfig}", "--pools={pools}"]
    command = [sys.executable, str(script), str(pids_file), *service]
    monkeypatch.setenv("GPUPOOL_DEMO_SERVICE_COMMAND", json.dumps(command))
    monkeypatch.setenv("GPUPOOL_DEMO_STOP_GRACE", str(GRACE))
    request.addfinalizer(lambda: _kill_left(tmp_path))
    state = tmp_path / "state"

    with DemoProcess.start(state) as demo:
        code, _ = demo.api("GET", "/services/gpupool/api/v1/pools")
        assert code == 200  # the real service answers behind the stand-in
        pids = wait_for(
            lambda: pids_file.exists() and json.loads(pids_file.read_text()),
            what="the stand-in to write its pid and the service's",
        )
        stuck, inner = pids["stuck"], pids["service"]
        assert alive(stuck) and alive(inner)

        with quiet():  # the grace periods are wall-clock time: no other test runs meanwhile
            began = time.monotonic()
            demo.proc.send_signal(signal.SIGTERM)
            code = demo.proc.wait(timeout=GRACE + 60)
            took = time.monotonic() - began

    stderr = (state / "demo-stderr.log").read_text()
    assert not alive(stuck), cmdline(stuck)
    assert not alive(inner), cmdline(inner)
    left = mentioning(str(tmp_path))  # whatever the demo started, however it was started
    assert left == [], [cmdline(pid) for pid in left]
    kills = [line for line in stderr.splitlines() if "killed it with SIGKILL" in line]
    assert len(kills) == 1, stderr  # the stand-in only: the hub then finished on its own
    said = re.match(
        rf"gpupool demo: stuck_service\.py \(pid {stuck}\) ignored SIGTERM for ([0-9.]+)s; ",
        kills[0],
    )
    assert said, kills[0]
    assert GRACE <= float(said[1]) < GRACE + 2, kills[0]
    assert code == 0, stderr
    assert took < GRACE + MARGIN, f"the demo took {took:.1f}s to stop"


# A hub whose cleanup never ends: it keeps running its event loop, and so restarts the proxy that
# the demo stops (JupyterHub checks every 5 s; here every second, to see it happen).
HANGING_HUB = textwrap.dedent(
    """
    import asyncio
    import jupyterhub.app

    async def cleanup_forever(self):
        await asyncio.sleep(3600)

    jupyterhub.app.JupyterHub.cleanup = cleanup_forever
    c.ConfigurableHTTPProxy.check_running_interval = 1
    """
)


def test_stop_kills_a_hub_that_hangs_and_what_it_restarted(tmp_path, monkeypatch, request):
    extra = tmp_path / "hanging_hub.py"
    extra.write_text(HANGING_HUB)
    monkeypatch.setenv("GPUPOOL_DEMO_EXTRA_CONFIG", str(extra))
    monkeypatch.setenv("GPUPOOL_DEMO_STOP_GRACE", str(GRACE))
    request.addfinalizer(lambda: _kill_left(tmp_path))
    state = tmp_path / "state"

    with DemoProcess.start(state) as demo:
        [hub] = [p for p in descendants(demo.proc.pid) if " -m jupyterhub " in cmdline(p)]
        with quiet():  # the grace periods are wall-clock time: no other test runs meanwhile
            began = time.monotonic()
            demo.proc.send_signal(signal.SIGTERM)
            code = demo.proc.wait(timeout=GRACE + 60)
            took = time.monotonic() - began

    stderr = (state / "demo-stderr.log").read_text()
    assert not alive(hub)
    left = mentioning(str(tmp_path))  # the proxies the hub restarted meanwhile included
    assert left == [], [cmdline(pid) for pid in left]
    kills = [line for line in stderr.splitlines() if "killed it with SIGKILL" in line]
    said = [
        re.match(rf"gpupool demo: JupyterHub \(pid {hub}\) ignored SIGTERM for ([0-9.]+)s; ", k)
        for k in kills
    ]
    ignored = [float(m[1]) for m in said if m]
    assert len(ignored) == 1 and ignored[0] >= GRACE + HUB_EXTRA_GRACE, stderr
    assert code == 0, stderr
    assert took < GRACE + HUB_EXTRA_GRACE + MARGIN, f"the demo took {took:.1f}s to stop"


# A parent (stuck or not on SIGTERM) with a child of its own session that ignores SIGTERM: what
# DemoProcess and SimProcess do when `gpupool demo|sim` itself hangs or leaves something behind.
PARENT = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    child = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
         " print('ignoring', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    child.stdout.readline()
    if sys.argv[1] == "stuck":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("parent", ["stuck", "polite"])
def test_the_test_harness_kills_what_ignores_sigterm_and_says_so(tmp_path, capsys, parent):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.Popen(
        [sys.executable, str(script), parent], stdout=subprocess.PIPE, text=True
    )
    child = int(proc.stdout.readline())
    try:
        began = time.monotonic()
        _stop(proc, grace=0.5, leftover_grace=0.5)
        took = time.monotonic() - began
        said = capsys.readouterr().err.splitlines()
        assert not alive(proc.pid) and not alive(child), said
        expected = [rf"\(pid {child}\) ignored SIGTERM for 0\.[5-9]s; killed it with SIGKILL"]
        if parent == "stuck":
            expected.insert(0, rf"parent\.py \(pid {proc.pid}\) ignored SIGTERM for 0\.[5-9]s; ")
        assert len(said) == len(expected), said
        for line, pattern in zip(said, expected, strict=True):
            assert line.startswith("jupyter_gpupool.demo.testing: ") and re.search(pattern, line)
        assert took < 5
    finally:
        _kill_if_left(child, "print('ignoring'")
