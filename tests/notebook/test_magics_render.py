"""What %gpupool status, pools and queue show, as text and HTML (pure)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from fakehub import LAUNCH_OPTIONS

from jupyter_gpupool.core.pools.placement import Placement
from jupyter_gpupool.notebook.magics.render import (
    pool_rows,
    pools_report,
    progress_html,
    progress_text,
    queue_report,
    status_fields,
    status_report,
)
from jupyter_gpupool.notebook.session import ServerUse, own_row

HERE = Placement(
    pool="training-pool",
    gpus=2,
    gpu_type="A100-80G",
    over_quota=True,
    node="gpu-node-1",
    user="alice",
    server="big",
    cuda_visible_devices="0,1",
)


def test_status_fields():
    assert status_fields(HERE, "GPU 0: A100 (UUID: GPU-1)\nGPU 1: A100 (UUID: GPU-2)\n") == [
        ("server", "alice/big"),
        ("pool", "training-pool"),
        ("node", "gpu-node-1"),
        ("GPUs", "2 \u00d7 A100-80G"),
        (
            "quota",
            "over quota: this server borrows idle GPUs and may be stopped (reclaimed) when "
            "their owners need them back",
        ),
        ("CUDA_VISIBLE_DEVICES", "0,1"),
        ("NVIDIA_VISIBLE_DEVICES", "(not set)"),
        ("nvidia-smi -L", "GPU 0: A100 (UUID: GPU-1)\nGPU 1: A100 (UUID: GPU-2)"),
    ]


def test_status_outside_a_pool_has_no_quota_line_and_no_nvidia_smi():
    fields = dict(status_fields(Placement(), None))
    assert fields["server"] == "not a JupyterHub server"
    assert fields["pool"].startswith("not started in a GPU pool")
    assert "quota" not in fields and "nvidia-smi -L" not in fields


def test_status_report_text_and_html():
    report = status_report(HERE, "GPU 0: A100\nGPU 1: A100")
    lines = report.text.splitlines()
    assert lines[0] == "server                  alice/big"
    assert lines[-2:] == [
        "nvidia-smi -L           GPU 0: A100",
        "                        GPU 1: A100",
    ]
    assert "<pre>GPU 0: A100\nGPU 1: A100</pre>" in report.html
    assert "color:#b45309" in report.html  # over quota in a warning colour
    assert report._repr_mimebundle_() == {"text/plain": report.text, "text/html": report.html}


#: 2025-01-31 15:00 UTC
NOW = datetime(2025, 1, 31, 15, 0, tzinfo=timezone.utc).timestamp()
#: alice's big server as ``GET api/v1/servers`` gives it: two GPUs at 10% and 90%, 31 GiB used.
ROW = {
    "user": "alice",
    "server": "big",
    "pool": "training-pool",
    "gpus": 2,
    "state": "running",
    "admission": "adm-big",
    "gpus_measured": 2,
    "gpu_utilization": 50.0,
    "gpu_utilization_max": 90.0,
    "gpu_memory_used_mib": 31744,
    "gpu_memory_total_mib": 163840,
    "measured_at": NOW - 20,
    "gpu_utilization_history": [[NOW - 20, 50.0]],
    "idle": None,
}


def fields_with(use: ServerUse) -> dict[str, str]:
    return dict(status_fields(HERE, None, use, NOW))


def test_status_shows_this_servers_gpu_utilization():
    assert fields_with(ServerUse(ROW, "dcgm")) == {
        **dict(status_fields(HERE, None)),
        "GPU utilization": "50% (max 90%), memory 31.0 of 160 GiB",
    }
    lines = status_report(HERE, None, ServerUse(ROW, "dcgm"), NOW).text.splitlines()
    assert lines[4] == "GPU utilization         50% (max 90%), memory 31.0 of 160 GiB"


def test_status_says_why_the_utilization_is_not_known():
    stale = {**ROW, "gpu_utilization": None, "gpu_utilization_max": None}
    problem = "/sim/v1/dcgm/metrics: HTTP 503 Service Unavailable"
    assert fields_with(ServerUse(stale, "dcgm", problem))["GPU utilization"] == (
        f"not measured ({problem})"
    )
    assert fields_with(ServerUse(stale, "dcgm"))["GPU utilization"] == "not measured"
    assert fields_with(ServerUse(None, "dcgm"))["GPU utilization"] == (
        "unknown: the gpupool service counts no pod of this server"
    )
    assert fields_with(ServerUse(error="no answer from the gpupool service"))[
        "GPU utilization"
    ] == ("unknown: no answer from the gpupool service")
    assert "GPU utilization" not in dict(status_fields(HERE, None))  # not asked


def test_status_warns_while_the_gpus_are_idle():
    since, due = NOW - 55 * 60, NOW + 65 * 60  # 14:05 and 16:05 UTC
    stop = {"since": since, "warned": True, "stops_at": due, "due_at": due, "action": "stop"}
    report = {**stop, "stops_at": None, "due_at": NOW - 60, "action": "report"}
    use = ServerUse({**ROW, "idle": stop}, "dcgm")
    assert fields_with(use)["warning"] == "idle since 14:05 UTC; will be stopped at 16:05 UTC"
    assert fields_with(ServerUse({**ROW, "idle": report}, "dcgm"))["warning"] == (
        "idle since 14:05 UTC; reported to admins"
    )
    assert "warning" not in fields_with(ServerUse(ROW, "dcgm"))
    html = status_report(HERE, None, use, NOW).html
    warning = "<th style='text-align:left'>warning</th>"
    assert warning + "<td style='text-align:left;color:#b45309;font-weight:bold'>" in html


def test_status_warns_of_the_servers_notice_with_the_time_left():
    runtime = {
        "kind": "runtime",
        "words": "this server has run for 7h56m; servers here may run 8h: it stops at "
        "2026-11-24 17:00 UTC",
        "deadline": NOW + 4 * 60,
        "action": "stop",
    }
    warnings = [
        v
        for k, v in status_fields(HERE, None, ServerUse({**ROW, "notice": runtime}, "dcgm"), NOW)
        if k == "warning"
    ]
    assert warnings == [runtime["words"] + " (stops in 4m)"]
    budget = {
        "kind": "budget",
        "words": "your budget is spent",
        "deadline": None,
        "action": "report",
    }
    assert (
        fields_with(ServerUse({**ROW, "notice": budget}, "dcgm"))["warning"]
        == "your budget is spent"
    )
    due = {**runtime, "deadline": NOW - 1}
    assert fields_with(ServerUse({**ROW, "notice": due}, "dcgm"))["warning"].endswith("(stopping)")
    # an idle notice is the idle line's, said once
    since, stops = NOW - 55 * 60, NOW + 65 * 60
    idle = {"since": since, "warned": True, "stops_at": stops, "due_at": stops, "action": "stop"}
    idle_notice = {"kind": "idle", "words": "idle", "deadline": stops, "action": "stop"}
    row = {**ROW, "idle": idle, "notice": idle_notice}
    fields = status_fields(HERE, None, ServerUse(row, "dcgm"), NOW)
    assert [v for k, v in fields if k == "warning"] == [
        "idle since 14:05 UTC; will be stopped at 16:05 UTC"
    ]


def test_own_row_is_this_servers_live_pod():
    here = Placement(user="alice", server="big", admission="adm-big")
    other = {**ROW, "server": "small", "admission": "adm-small"}
    old = {**ROW, "admission": "adm-old", "state": "terminating"}
    assert own_row([other, old, ROW], here) is ROW
    assert own_row([other, old], here) is old  # the only one there is
    assert own_row([other], here) is None


def test_pool_rows_default_order_first():
    rows = pool_rows(LAUNCH_OPTIONS)
    assert [r[0] for r in rows] == ["training-pool", "dev-pool", "compute-pool"]
    assert rows[0] == ("training-pool", "A100-80G", "10 / 16", "6", "4 GPUs within quota", "free")
    assert rows[1][4:] == (
        "0 within quota, 4 with borrowing",
        "borrowing possible (may be reclaimed)",
    )
    assert rows[2][1:] == ("—", "0 / 0", "0", "no quota", "CPU only")


def test_pool_rows_keep_the_services_order():
    # the service lists the pools as the spawn form does; the magics show them so, whatever it is
    backwards = {**LAUNCH_OPTIONS, "pools": LAUNCH_OPTIONS["pools"][::-1]}
    assert [r[0] for r in pool_rows(backwards)] == [p["name"] for p in backwards["pools"]]
    assert backwards["default_pools"] == ["training-pool", "dev-pool"]  # not first here


def test_pools_report():
    report = pools_report(LAUNCH_OPTIONS)
    lines = report.text.splitlines()
    assert lines[0] == "Pools alice may use (default order: training-pool, dev-pool)"
    assert lines[1].split()[:3] == ["pool", "GPU", "types"]
    assert lines[2].startswith("training-pool  A100-80G")
    assert report.html.count("<tr>") == 4
    assert "<caption" in report.html


def test_no_pools():
    report = pools_report({"user": "zed", "pools": []})
    assert report.text == "zed may use no pool: ask an admin for access"


def test_progress():
    event = {"progress": 40, "message": "scheduled <here>"}
    assert progress_text(event) == "[ 40%] scheduled <here>"
    assert "scheduled &lt;here&gt;" in progress_html("big", event)
    assert "value='40'" in progress_html("big", event)
    ready = progress_html("big", {"progress": 100, "ready": True, "url": "/user/alice/big/"})
    assert "href='/user/alice/big/'" in ready
    assert "#b91c1c" in progress_html("big", {"progress": 100, "failed": True})


def test_pools_report_ends_with_the_budgets():
    options = {
        **LAUNCH_OPTIONS,
        "budgets": [
            {"subject": "user:alice", "gpu_hours": 10, "window": "1d", "remaining": 4, "spent": 6}
        ],
    }
    report = pools_report(options)
    assert report.text.splitlines()[-1] == "budget: alice: 4 of 10 GPU-hours left (per day)"
    assert report.html.endswith(
        "<p class='gpupool-budget'>budget: alice: 4 of 10 GPU-hours left (per day)</p>"
    )
    assert "budget" not in pools_report(LAUNCH_OPTIONS).text


def test_queue_report_lists_the_users_requests_in_line():
    """``%gpupool queue``: each request's server, GPUs, pools, place (1 = next), quota, how
    long it has waited (an AGE, as the CLI's) and when it should get in (the service's
    estimate, a dash without one); nothing waiting is said in words."""
    now = 1_700_000_000.0
    entries = [
        {"server": "big", "gpus": 4, "pools": ["training-pool", "inference-pool"],
         "position": 1, "within_quota": True, "waiting_since": now - 130,
         "estimate_words": "about 20 min, from the last 30 days of training-pool"},
        {"server": "", "gpus": 1, "pools": ["dev-pool"], "position": 3,
         "within_quota": False, "waiting_since": now - 7200, "estimate_words": "no estimate yet"},
        {"server": "<x>", "gpus": 1, "pools": [], "position": None,
         "within_quota": False, "waiting_since": None},
    ]  # fmt: skip
    report = queue_report(entries, now)
    split = [re.split(r"\s{2,}", line) for line in report.text.splitlines()[1:]]
    assert report.text.splitlines()[0] == "Your servers waiting in line for GPUs (place 1 is next)"
    assert split == [
        ["server", "GPUs", "pools", "place in line", "quota", "waiting", "expected"],
        ["big", "4", "training-pool, inference-pool", "1", "within quota", "2m10s",
         "about 20 min, from the last 30 days of training-pool"],
        ["(default)", "1", "dev-pool", "3", "over quota (borrows)", "120m",
         "no estimate yet"],
        ["<x>", "1", "your default pools", "not placed yet", "over quota (borrows)", "\u2014",
         "\u2014"],
    ]  # fmt: skip
    assert report.html.count("<tr>") == 4 and "&lt;x&gt;" in report.html
    empty = queue_report([], now)
    assert (empty.text, empty.html) == (
        "nothing of yours waits in line",
        "<p>nothing of yours waits in line</p>",
    )
