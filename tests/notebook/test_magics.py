"""%gpupool in a real IPython shell, against a scripted hub and service (tests/notebook/fakehub.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from fakehub import FAILING_GPUS, QUICK_GPUS, REFUSAL, REFUSED_GPUS, WAITING_GPUS
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_gpupool.notebook.magics import magic as magic_module
from jupyter_gpupool.notebook.magics.magic import GPUPoolMagics


@pytest.fixture
def shell():
    return InteractiveShell.instance()


@pytest.fixture
def gpupool(shell, hub_env):
    """``%gpupool LINE`` in a server of alice's, as a function."""
    magics = GPUPoolMagics(shell)
    shell.register_magics(magics)

    def run(line):
        return shell.run_line_magic("gpupool", line)

    run.magics = magics
    return run


def test_load_ext(shell):
    shell.extension_manager.load_extension("jupyter_gpupool")
    assert "gpupool" in shell.magics_manager.magics["line"]


def test_importing_the_package_does_not_import_ipython():
    code = (
        "import sys, jupyter_gpupool; print('IPython' in sys.modules, 'kubespawner' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_status(gpupool, capsys):
    gpupool("status")
    out = capsys.readouterr().out
    assert "pool                    training-pool" in out
    assert "GPUs                    2 \u00d7 A100-80G" in out
    assert "within quota (not reclaimed)" in out
    assert "node                    gpu-node-1" in out


def test_pools(gpupool, fake_hub, capsys):
    gpupool("pools")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Pools alice may use (default order: training-pool, dev-pool)"
    assert "training-pool  A100-80G" in out
    assert ("GET", "/services/gpupool/api/v1/launch-options") in fake_hub.requests


def test_launch_wait_then_release(gpupool, fake_hub, capsys):
    gpupool("launch big --pools dev-pool,training-pool --gpus 1 --wait")
    assert fake_hub.started == [("big", {"pools": ["dev-pool", "training-pool"], "gpus": 1})]
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "[ 10%] admitted to dev-pool within quota (1 GPU)",
        "[ 50%] scheduled on node gpu-node-5",
        "[100%] ready at /user/alice/big/",
        # where it went, in the service's words: alice has no guaranteed GPUs in dev-pool
        "big is ready at /user/alice/big/ in dev-pool, over quota: may be reclaimed",
    ]
    gpupool("release")  # the last one launched here
    assert fake_hub.stopped == ["big"]
    assert capsys.readouterr().out == "server 'big' stopped\n"
    gpupool("release big")
    assert capsys.readouterr().out == "server 'big' is not running\n"


def test_launch_wait_shows_the_steps_of_a_start_over_before_the_hub_answers(gpupool, capsys):
    # JupyterHub answers a start only when it is over (or after slow_spawn_timeout): progress
    # asked for after that answer is only "ready", so it is followed while the answer waits
    gpupool(f"launch quick --pools dev-pool --gpus {QUICK_GPUS} --wait")
    assert capsys.readouterr().out.splitlines() == [
        "[ 10%] admitted to dev-pool within quota (1 GPU)",
        "[ 50%] scheduled on node gpu-node-5",
        "[100%] ready at /user/alice/quick/",
        "quick is ready at /user/alice/quick/ in dev-pool, over quota: may be reclaimed",
    ]


def test_launch_wait_says_a_server_within_quota_is_so(gpupool, capsys):
    # ml-research is guaranteed 10 GPUs of training-pool, of which alice and bob use 6
    gpupool("launch mine --pools training-pool --gpus 2 --wait")
    assert capsys.readouterr().out.splitlines()[-1] == (
        "mine is ready at /user/alice/mine/ in training-pool, within quota"
    )


def test_launch_queue_wait_shows_the_place_in_line_until_the_server_is_ready(
    gpupool, fake_hub, capsys
):
    """``--queue`` asks the hub to wait in line (``"queue": true``); with ``--wait`` the hub's
    progress says the place in line, one line per change (the spawner says a place that
    holds again and again), then the start goes on to ready."""
    gpupool("launch big --pools dev-pool --gpus 2 --queue --wait")
    assert fake_hub.started == [("big", {"pools": ["dev-pool"], "gpus": 2, "queue": True})]
    assert capsys.readouterr().out.splitlines() == [
        "[  0%] waiting for 2 GPUs: position 2 in line for dev-pool",
        "[  0%] waiting for 2 GPUs: position 1 in line for dev-pool",
        "[ 10%] admitted to dev-pool within quota (1 GPU)",
        "[ 50%] scheduled on node gpu-node-5",
        "[100%] ready at /user/alice/big/",
        "big is ready at /user/alice/big/ in dev-pool, over quota: may be reclaimed",
    ]
    assert fake_hub.admitted == ["big"]


def test_launch_queue_then_queue_shows_its_place_and_release_leaves_the_line(
    gpupool, fake_hub, capsys
):
    """A queued launch without ``--wait`` says it may wait in line; ``%gpupool queue`` shows
    the user's requests in line with their places (as the service answers them); ``release``
    stops the pending start, which leaves the line."""
    gpupool(f"launch small --pools training-pool --gpus {WAITING_GPUS} --queue")
    assert fake_hub.started == [
        ("small", {"pools": ["training-pool"], "gpus": WAITING_GPUS, "queue": True})
    ]
    assert capsys.readouterr().out == (
        "small is starting; if no pool can take it now it waits in line "
        "(%gpupool queue shows its place)\n"
    )
    gpupool("queue")
    lines = capsys.readouterr().out.splitlines()
    assert ("GET", "/services/gpupool/api/v1/queue") in fake_hub.requests
    assert lines[0] == "Your servers waiting in line for GPUs (place 1 is next)"
    header, row = (re.split(r"\s{2,}", line) for line in lines[1:])
    assert header == ["server", "GPUs", "pools", "place in line", "quota", "waiting", "expected"]
    assert row[:5] == ["small", str(WAITING_GPUS), "training-pool", "1", "over quota (borrows)"]
    assert re.fullmatch(r"\d+s", row[5]), row
    assert row[6] == "\u2014"  # the fake service gives no estimate
    gpupool("release small")
    assert capsys.readouterr().out == "server 'small' stopped\n"
    assert fake_hub.line == {} and fake_hub.admitted == []
    gpupool("queue")
    assert capsys.readouterr().out == "nothing of yours waits in line\n"


def test_launch_names_a_server_after_its_first_pool(gpupool, fake_hub, capsys):
    gpupool("launch --pools training-pool --gpus 2 --gpu-type A100-80G")
    assert fake_hub.started == [
        ("training-pool-2gpu", {"pools": ["training-pool"], "gpus": 2, "gpu_type": "A100-80G"})
    ]
    assert (
        capsys.readouterr().out == "training-pool-2gpu is starting (the hub's home page shows it)\n"
    )


def test_a_refused_launch_is_a_usage_error_with_the_hubs_words(gpupool):
    with pytest.raises(UsageError, match="did not start: " + REFUSAL):
        gpupool(f"launch big --gpus {REFUSED_GPUS} --wait")


def test_a_failed_start_is_a_usage_error(gpupool, capsys):
    with pytest.raises(UsageError, match="did not start: Spawn failed: no luck"):
        gpupool(f"launch big --gpus {FAILING_GPUS} --wait")
    assert "[100%] Spawn failed: no luck" in capsys.readouterr().out


def test_this_server_cannot_be_launched_or_released(gpupool):
    with pytest.raises(UsageError, match="the default server is this server"):
        gpupool("release ''")


def test_release_without_a_name_and_nothing_launched(gpupool):
    with pytest.raises(UsageError, match="say which server to release"):
        gpupool("release")


def test_outside_a_hub_server(shell, hub_env, monkeypatch, capsys):
    for key in hub_env.environ():
        monkeypatch.delenv(key)
    shell.register_magics(GPUPoolMagics(shell))
    with pytest.raises(UsageError, match="GPUPOOL_SERVICE_URL is not set"):
        shell.run_line_magic("gpupool", "pools")
    with pytest.raises(UsageError, match="not in a JupyterHub server"):
        shell.run_line_magic("gpupool", "launch x --wait")
    shell.run_line_magic("gpupool", "status")
    assert "not a JupyterHub server" in capsys.readouterr().out


def test_a_bad_token_is_said(shell, hub_env, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "x")
    shell.register_magics(GPUPoolMagics(shell))
    with pytest.raises(UsageError, match="bad token"):
        shell.run_line_magic("gpupool", "pools")


async def test_in_a_running_event_loop_as_in_a_kernel(gpupool, fake_hub, capsys):
    # a kernel runs cells inside its loop: the calls go to a thread of their own
    gpupool("pools")
    gpupool("launch big --gpus 1 --wait")
    assert "big is ready" in capsys.readouterr().out


def test_html_in_a_notebook(gpupool, fake_hub, monkeypatch):
    shown = []

    class Handle:
        def update(self, obj):
            shown.append(("update", obj))

    def display(obj, display_id=False):
        shown.append(("display", obj))
        return Handle() if display_id else None

    monkeypatch.setattr(magic_module, "display", display)
    monkeypatch.setattr(GPUPoolMagics, "in_notebook", property(lambda self: True))
    gpupool("pools")
    kind, report = shown.pop()
    assert kind == "display" and report._repr_mimebundle_()["text/html"].startswith("<table")
    gpupool("launch big --gpus 1 --wait")
    assert shown[0][0] == "display" and "asking JupyterHub" in shown[0][1].data
    final = shown[-1][1].data
    assert "value='100'" in final and "href='/user/alice/big/'" in final
    assert "ready in training-pool, within quota" in final
