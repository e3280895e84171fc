"""What %gpupool status and pools show, as text and HTML (pure)."""

from __future__ import annotations

from fakehub import LAUNCH_OPTIONS

from jupyter_gpupool.core.placement import Placement
from jupyter_gpupool.notebook.magics.render import (
    pool_rows,
    pools_report,
    progress_html,
    progress_text,
    status_fields,
    status_report,
)

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


def test_pool_rows_default_order_first():
    rows = pool_rows(LAUNCH_OPTIONS)
    assert [r[0] for r in rows] == ["training-pool", "dev-pool", "compute-pool"]
    assert rows[0] == ("training-pool", "A100-80G", "10 / 16", "6", "4 GPUs within quota", "free")
    assert rows[1][4:] == (
        "0 within quota, 4 with borrowing",
        "borrowing possible (may be reclaimed)",
    )
    assert rows[2][1:] == ("—", "0 / 0", "0", "no quota", "CPU only")


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
