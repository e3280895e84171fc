"""binder/start and the tour notebook (examples/gpupool-tour.ipynb), on one demo.

binder/start runs the demo in the background and execs the command it is given, as on mybinder;
the tour then runs with nbclient in a kernel that has the environment binder/start exported and
examples/ as its working directory, as binder's notebook server gives it. Its connect() waits
for the demo, which is usually still starting. A laptop's demo is found from examples/ too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import nbclient
import nbformat
import pytest
from needs import need
from waiting import wait_for

from jupyter_gpupool.demo.connect import connect, find_demo
from jupyter_gpupool.demo.run import free_port
from jupyter_gpupool.demo.testing import DemoProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TOUR = EXAMPLES / "gpupool-tour.ipynb"

#: The command binder/start runs: print what it was given, then end (the demo goes on).
SHOW_ENV = (
    "import json, os; "
    "print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('GPUPOOL_')}))"
)


@dataclass
class Binder:
    proc: subprocess.Popen[str]
    home: Path
    port: int
    exported: dict[str, str]  # the GPUPOOL_* variables the command was run with

    def demo(self, timeout: float = 180) -> DemoProcess:
        """The demo binder/start runs, found as the tour finds it, once its state directory says
        it answers (the demo writes its url file then)."""
        deadline = time.monotonic() + timeout
        while True:
            found, missing = find_demo(self.exported)
            if not missing:
                return DemoProcess(self.proc, found.url, found.state_dir, found.token)
            if time.monotonic() > deadline:
                log = found.state_dir / "demo.log"
                pytest.fail(f"the demo did not start: {log.read_text() if log.exists() else ''}")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def binder(tmp_path_factory):
    home = tmp_path_factory.mktemp("binder-home")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUPOOL_", "JUPYTERHUB_"))}
    env.update(HOME=str(home), GPUPOOL_DEMO_PORT=str(port))
    proc = subprocess.Popen(
        [str(ROOT / "binder" / "start"), "python", "-c", SHOW_ENV],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # binder/start, its demo and the command: one process group
    )
    try:
        out, _ = proc.communicate(timeout=60)
        yield Binder(proc, home, port, json.loads(out))
    finally:
        stop_group(proc.pid)


def stop_group(pgid: int, timeout: float = 60) -> None:
    """SIGTERM to the demo (it stops the hub, the servers and the cluster), then wait for it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.killpg(pgid, 0)  # ProcessLookupError once every process of the group is gone
            time.sleep(0.1)
        os.killpg(pgid, signal.SIGKILL)


def test_binder_start_runs_the_demo_in_the_background_then_the_command(binder):
    state = binder.home / ".gpupool-demo"
    assert binder.exported == {
        "GPUPOOL_DEMO_DIR": str(state),
        "GPUPOOL_DEMO_PORT": str(binder.port),
        "GPUPOOL_URL": f"http://127.0.0.1:{binder.port}",
    }
    assert binder.proc.returncode == 0  # the command ran (and ended) while the demo starts
    demo = binder.demo()
    status, body = demo.api("GET", "/services/gpupool/api/v1/pools")
    assert status == 200
    assert {"training-pool", "inference-pool"} <= {p["name"] for p in body["pools"]}


def outputs(nb) -> dict[str, str]:
    """Each tagged code cell's text output, by tag."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        text = []
        for out in cell.outputs:
            if out.get("name") == "stdout":
                text.append(out["text"])
            elif "text/plain" in out.get("data", {}):
                text.append(out["data"]["text/plain"])
        # `!gpupool` runs in a terminal: its lines end with \r\n
        found[cell.metadata["tags"][0]] = "".join(text).replace("\r\n", "\n")
    return found


def rows(table: str) -> dict[tuple[str, str], list[str]]:
    """A `gpupool get jobs` table's rows by (user, server), with the GPUS cell's count of whole
    GPUs (`4 \u00d7 A100-80G`: 4) as its fifth column."""
    lines = [line.split() for line in table.splitlines() if line.strip()]
    lines = [r[:5] + r[7:] if len(r) > 6 and r[5] == "\u00d7" else r for r in lines]
    return {(r[0], r[1]): r for r in lines if r[0] != "USER"}


def jobs_table(text: str) -> str:
    return text[text.index("USER ") :]


def test_the_committed_tour_has_no_outputs():
    # the committed version: a tour someone ran and saved in their clone is theirs
    try:
        blob = subprocess.run(
            ["git", "show", f"HEAD:{TOUR.relative_to(ROOT)}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        need(False, f"the committed tour needs git and a git checkout ({e})")
    nb = nbformat.reads(blob, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def leave_an_earlier_try(demo: DemoProcess) -> None:
    """What an earlier try can leave in the demo: dave's server holds dev-pool's 4 GPUs, and a
    start of erin's waits in line for one of them (a tour stopped halfway, the spawn form's
    "wait in line" box). The tour's clean-up frees dev-pool: the line must not admit erin."""
    for user in ("dave", "erin"):
        demo.api("POST", f"/hub/api/users/{user}")
    status, body = demo.api(
        "POST", "/hub/api/users/dave/server", {"user_options": {"pools": ["dev-pool"], "gpus": 4}}
    )
    assert status in (201, 202), body
    # a server's start (its single-user process) took 5-11 s on a loaded 2-core machine
    wait_for(
        lambda: demo.server_running("dave") and ready(demo, "dave"),
        what="dave's server",
        timeout=60,
        interval=0.2,
    )
    options = {"pools": ["dev-pool"], "gpus": 1, "queue": True}
    status, body = demo.api("POST", "/hub/api/users/erin/server", {"user_options": options})
    assert status == 202, body  # still waiting when the hub answers
    wait_for(lambda: line(demo) == ["erin"], what="erin's start to wait in line", timeout=30)


def ready(demo: DemoProcess, user: str) -> bool:
    _, model = demo.api("GET", f"/hub/api/users/{user}")
    return bool((model.get("servers") or {}).get("", {}).get("ready"))


def line(demo: DemoProcess) -> list[str]:
    """Who waits in the service's line, first in line first."""
    status, body = demo.api("GET", "/services/gpupool/api/v1/queue")
    assert status == 200, body
    return [entry["user"] for entry in body["queue"]]


def test_the_tour_runs_on_binder_after_an_earlier_try_and_leaves_the_demo_clean(binder):
    leave_an_earlier_try(binder.demo())
    nb = nbformat.read(TOUR, as_version=4)
    kernel_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GPUPOOL_", "JUPYTERHUB_"))
    }
    kernel_env.update(binder.exported, HOME=str(binder.home))
    runner = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
    )
    try:
        runner.execute(env=kernel_env)  # a cell that fails raises CellExecutionError
    except nbclient.exceptions.CellExecutionError:
        # what the cells before it printed, so that a failure says how the tour got there
        for tag, text in outputs(nb).items():
            print(f"--- cell {tag} ---\n{text}")
        raise
    out = outputs(nb)

    # 1, 2: the pools and the quotas the markdown describes
    assert f"Connected to the gpupool demo at http://127.0.0.1:{binder.port}" in out["connect"]
    assert re.search(r"^training-pool\s+active\s+17\s+\d+\s+\d+\s+3$", out["pools"], re.M)
    assert re.search(r"^gpu-node-1\s+Ready\s+8\s.*A100-80G\s+training-pool", out["nodes"], re.M)
    assert re.search(r"^training-pool\s+group:ml-research\s+8\s+16\s", out["quotas"], re.M)
    assert re.search(r"^training-pool\s+\(each user\)\s+0\s+4\s", out["quotas"], re.M)
    assert re.search(r"^inference-pool\s+group:ml-ops\s+4\s+8\s", out["quotas"], re.M)

    # 3: alice's server lands in her first pool, within her group's guarantee
    assert "admitted to training-pool within quota (4 A100-80G GPUs)" in out["launch"]
    assert re.search(
        r"^alice/: 4 GPUs in training-pool on gpu-node-\d, within quota, charged to group:ml-research$",
        out["launch"],
        re.M,
    )

    # 4: bob within quota, dave and erin borrow, the pool is full; carol falls back
    fill = out["fill"]
    assert re.search(
        r"^bob/: 4 GPUs in training-pool .*, within quota, charged to group:ml-research$",
        fill,
        re.M,
    )
    assert re.search(
        r"^dave/: 4 GPUs in training-pool .*, over quota, charged to user:dave$", fill, re.M
    )
    assert re.search(
        r"^erin/: 4 GPUs in training-pool .*, over quota, charged to user:erin$", fill, re.M
    )
    assert re.search(r"^training-pool\s+active\s+17\s+16\s+1\s+3$", fill, re.M)
    fallback = out["fallback"].splitlines()
    assert fallback[0].strip() == (
        "skipped training-pool because no node has 4 free GPUs (largest free block: 0)"
    )
    assert fallback[1].strip() == "admitted to inference-pool within quota (4 A10-24G GPUs)"
    assert re.match(
        r"carol/: 4 GPUs in inference-pool on gpu-node-[34], within quota, charged to group:ml-ops$",
        fallback[-1],
    )

    # 5: carol's `extra` borrows alice's idle 4: 12 of 16 borrowed; alice's return reclaims it
    before = rows(jobs_table(out["borrow"]))
    assert set(before) == {
        ("bob", "(default)"),
        ("dave", "(default)"),
        ("erin", "(default)"),
        ("carol", "extra"),
    }
    assert sum(int(r[4]) for r in before.values() if r[6] == "yes") == 12
    assert before[("bob", "(default)")][6] == "no"
    reclaim = out["reclaim"]
    assert "stopped 1 server(s) borrowing your guaranteed GPUs: carol/extra" in reclaim
    assert re.search(
        r"^alice/: 4 GPUs in training-pool .*, within quota, charged to group:ml-research$",
        reclaim,
        re.M,
    )
    assert "carol's servers: carol/\n" in reclaim
    after = rows(jobs_table(reclaim))
    assert set(after) == {
        ("bob", "(default)"),
        ("dave", "(default)"),
        ("erin", "(default)"),
        ("alice", "(default)"),
    }
    assert {k[0] for k, r in after.items() if r[6] == "yes"} == {"dave", "erin"}

    # 6: everything stopped, seen by the service itself
    assert re.search(r"^training-pool\s+active\s+17\s+0\s+17\s+3$", out["cleanup"], re.M)
    demo = binder.demo()
    status, body = demo.api("GET", "/services/gpupool/api/v1/pools")
    assert status == 200
    assert {p["name"]: p["gpu_used"] for p in body["pools"] if p["gpu_used"]} == {}
    status, body = demo.api("GET", "/services/gpupool/api/v1/servers")
    assert (status, body["servers"]) == (200, [])
    for user in ("alice", "bob", "carol", "dave", "erin"):
        assert not demo.server_running(user)
    _, carol = demo.api("GET", "/hub/api/users/carol")
    assert carol["servers"] == {}
    assert line(demo) == []  # erin's start from the earlier try left the line, and ran nowhere

    # 7: the pointers name this demo's address
    assert f"http://127.0.0.1:{binder.port}/hub/spawn" in out["next"]
    assert f"http://127.0.0.1:{binder.port}/services/gpupool/pools" in out["next"]


async def test_a_demo_started_at_a_clones_root_is_found_from_examples(binder, tmp_path):
    """The laptop's way: `gpupool demo` in the clone's root, `jupyter lab examples/...`, no
    GPUPOOL_* variables: the kernel (in examples/) finds ../gpupool-demo."""
    demo = binder.demo()
    clone = tmp_path / "clone"
    (clone / "examples").mkdir(parents=True)
    (clone / "gpupool-demo").symlink_to(demo.state)
    said = []
    found = await connect(
        environ={}, cwd=clone / "examples", home=tmp_path / "home", say=said.append, timeout=10
    )
    assert (found.url, found.token) == (demo.url, demo.token)
    assert found.state_dir == clone / "gpupool-demo"
    assert said == [
        f"Connected to the gpupool demo at {demo.url} (state directory {clone / 'gpupool-demo'})"
    ]
