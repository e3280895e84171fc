"""Shapes from a notebook (issue 29): ``%gpupool launch --pools POOL:SHAPE``, the pools and the
status in words, the LaunchPanel's shape menus, and the status item's data."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm
from shaped_cluster import shaped_launch_options

from jupyter_gpupool.core.pools.placement import Placement
from jupyter_gpupool.notebook.magics.args import Command, parse_line
from jupyter_gpupool.notebook.magics.magic import GPUPoolMagics
from jupyter_gpupool.notebook.magics.render import pool_rows, pools_report, status_fields
from jupyter_gpupool.notebook.serverext.handlers import status_body
from jupyter_gpupool.notebook.widgets import LaunchPanel

MIG_SERVER = {
    "GPUPOOL_GPUS": "1",
    "GPUPOOL_SHAPE": "mig-1g.10gb",
    "GPUPOOL_SHAPE_TEXT": "MIG 1g.10gb of an A100-80G",
    "GPUPOOL_GPU_EQUIVALENTS": "1/7",
}


def test_launch_takes_a_shape_per_pool():
    command = parse_line("launch small --pools training-pool:mig-3g.40gb,inference-pool --gpus 1")
    assert command == Command(
        "launch",
        server="small",
        pools=("training-pool", "inference-pool"),
        shapes=("mig-3g.40gb", None),
        gpus=1,
    )
    assert command.user_options() == {
        "pools": [{"pool": "training-pool", "shape": "mig-3g.40gb"}, "inference-pool"],
        "gpus": 1,
    }
    # whole GPUs, said or not, are plain names, as before shapes
    whole = parse_line("launch --pools training-pool:whole,inference-pool --gpus 2")
    assert whole.shapes == () and whole.user_options()["pools"] == [
        "training-pool",
        "inference-pool",
    ]


@pytest.mark.parametrize("pools", ["training-pool:", ":mig-1g.10gb", "a,,b"])
def test_a_pool_list_that_means_nothing_is_a_usage_error(pools):
    with pytest.raises(UsageError, match="is not a comma separated list of pool names"):
        parse_line(f"launch --pools {pools}")


@pytest.fixture
def gpupool(hub_env):
    shell = InteractiveShell.instance()
    shell.register_magics(GPUPoolMagics(shell))
    return lambda line: shell.run_line_magic("gpupool", line)


def test_the_hub_gets_the_entries_as_written(gpupool, fake_hub):
    gpupool("launch small --pools training-pool:mig-3g.40gb,dev-pool --gpus 1 --wait")
    assert fake_hub.started == [
        (
            "small",
            {"pools": [{"pool": "training-pool", "shape": "mig-3g.40gb"}, "dev-pool"], "gpus": 1},
        )
    ]


def test_status_says_the_shape(gpupool, monkeypatch, capsys):
    for key, value in MIG_SERVER.items():
        monkeypatch.setenv(key, value)
    gpupool("status")
    assert (
        "GPUs                    MIG 1g.10gb of an A100-80G (1/7 of a GPU)"
        in capsys.readouterr().out
    )


def test_the_status_item_says_the_shape():
    here = Placement.from_environ({"GPUPOOL_POOL": "training-pool", **MIG_SERVER})
    body = status_body(here)
    assert body["label"] == "MIG 1g.10gb of an A100-80G · training-pool"
    assert (body["shape"], body["shape_text"], body["gpu_equivalents"]) == (
        "mig-1g.10gb",
        "MIG 1g.10gb of an A100-80G",
        "1/7",
    )
    assert fields_gpus(here) == "MIG 1g.10gb of an A100-80G (1/7 of a GPU)"


def fields_gpus(placement: Placement) -> str:
    return dict(status_fields(placement, None))["GPUs"]


def test_pools_lists_each_pools_shapes_and_what_each_kind_isolates():
    options = shaped_launch_options()
    rows = {r[0]: r for r in pool_rows(options)}
    assert rows["slice-pool"][-1] == (
        "A100-80G whole: 1 free (largest 1 on one node) [whole]; MIG 3g.40gb: 2 free "
        "[mig-3g.40gb]; A10 shared ¼ (time-sliced, no memory isolation): 8 free [shared-4]"
    )
    assert rows["mig-pool"][-1] == "MIG 1g.10gb: 7 free [mig-1g.10gb]"
    text = pools_report(options).text
    assert "shapes [id for launch --pools POOL:SHAPE]" in text.splitlines()[1]
    assert text.splitlines()[-3:] == [
        "A whole GPU isolates everything: the whole GPU is the server's",
        "A MIG instance isolates memory and faults: its own memory and compute, and a crash "
        "stays inside it",
        "A time-sliced GPU isolates nothing: every server sees all the GPU's memory, and one "
        "crash ends them all",
    ]


@pytest.fixture
def panel(hub_env):
    setup_test_comm()
    panel = LaunchPanel()
    panel.pools = shaped_launch_options()["pools"]
    yield panel
    panel.close()
    teardown_test_comm()


def menus(panel):
    return {
        bar.name: (list(bar._shape.options), bar._shape.value)
        for bar in panel._pool_box.children
        if bar._shape.layout.display != "none"
    }


def refreshed(pools):
    """The pools as a later answer of the service brings them (a trait set to an equal value
    changes nothing)."""
    return [dict(p, description=p.get("description", "") + " ") for p in pools]


def test_the_panel_offers_each_pools_shapes_with_free_counts(panel):
    assert menus(panel) == {
        "slice-pool": (
            [
                ("A100-80G whole: 1 free (largest 1 on one node)", "whole"),
                ("MIG 3g.40gb: 2 free", "mig-3g.40gb"),
                ("A10 shared ¼ (time-sliced, no memory isolation): 8 free", "shared-4"),
            ],
            "whole",  # whole GPUs where the pool has them
        ),
        "mig-pool": ([("MIG 1g.10gb: 7 free", "mig-1g.10gb")], "mig-1g.10gb"),
    }
    bar = next(b for b in panel._pool_box.children if b.name == "slice-pool")
    bar._shape.value = "shared-4"
    assert bar._shape.tooltip.startswith("isolates nothing")
    panel.order = ["slice-pool", "mig-pool"]
    panel.gpus = 1
    assert panel.shapes == {"slice-pool": "shared-4", "mig-pool": "mig-1g.10gb"}
    assert panel.user_options()["pools"] == [
        {"pool": "slice-pool", "shape": "shared-4"},
        {"pool": "mig-pool", "shape": "mig-1g.10gb"},
    ]
    # whole GPUs chosen: the plain name; and the trait moves the menu
    panel.shapes = {**panel.shapes, "slice-pool": "whole"}
    assert bar._shape.value == "whole"
    assert panel.user_options()["pools"][0] == "slice-pool"
    # a refresh keeps the choice
    panel.shapes = {**panel.shapes, "slice-pool": "shared-4"}
    panel.pools = refreshed(panel.pools)
    assert menus(panel)["slice-pool"][1] == "shared-4"
    panel.shapes = {**panel.shapes, "slice-pool": "whole"}
    panel.pools = refreshed(panel.pools)
    assert menus(panel)["slice-pool"][1] == "whole" and menus(panel)["mig-pool"][1] == "mig-1g.10gb"
