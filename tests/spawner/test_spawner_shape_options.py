"""Shapes in spawn options (issue 29), pure: ``{"pool", "shape"}`` entries read, checked and
written back; the old forms unchanged; the form's shape fields; the progress words for a shape."""

from __future__ import annotations

import pytest

from jupyter_gpupool.core.words.launch_options import Catalog, PoolChoice, gpu_choices, pool_status
from jupyter_gpupool.core.words.shape_choice import ShapeChoice
from jupyter_gpupool.spawner.errors import OptionsError
from jupyter_gpupool.spawner.form import form_context
from jupyter_gpupool.spawner.messages import Decision, admitted_line, ready_words, scheduled_line
from jupyter_gpupool.spawner.options import (
    SpawnOptions,
    default_options,
    form_to_user_options,
    parse_user_options,
)
from jupyter_gpupool.spawner.scheduling import rotate_after

WHOLE_A100 = ShapeChoice("whole", model="A100-80G", text="A100-80G whole: 1 free", free=1)
MIG_3G = ShapeChoice("mig-3g.40gb", kind="mig", model="A100-80G", text="MIG 3g.40gb: 2 free")
SHARED = ShapeChoice("shared-4", kind="shared-time-slicing", model="A10", text="A10 shared ¼")
MIG_1G = ShapeChoice("mig-1g.10gb", kind="mig", model="A100-80G", text="MIG 1g.10gb: 7 free")
SLICE = PoolChoice(
    name="slice-pool",
    gpu_types=("A100-80G", "A10"),
    gpu_total=1,
    largest_node_gpus=1,
    node_count=2,
    schedulable_nodes=2,
    shapes=(WHOLE_A100, MIG_3G, SHARED),
)
MIG_ONLY = PoolChoice(name="mig-pool", node_count=1, schedulable_nodes=1, shapes=(MIG_1G,))
PLAIN = PoolChoice(name="training-pool", gpu_types=("A100-80G",), largest_node_gpus=8)
CATALOG = Catalog(pools=(SLICE, MIG_ONLY, PLAIN), default_pools=("training-pool",), max_gpus=64)


def parse(raw):
    return parse_user_options(raw, CATALOG)


def test_the_issues_mixed_list_reads_and_writes_back():
    raw = {"pools": [{"pool": "slice-pool", "shape": "mig-3g.40gb"}, "training-pool"], "gpus": 1}
    got = parse(raw)
    assert got.choices() == [("slice-pool", "mig-3g.40gb"), ("training-pool", None)]
    assert got.to_user_options()["pools"] == raw["pools"]
    assert got.describe() == "1 GPU in mig-3g.40gb in slice-pool, training-pool"


@pytest.mark.parametrize(
    "pools",
    [
        ["slice-pool", "training-pool"],
        [{"pool": "slice-pool"}, "training-pool"],
        [{"pool": "slice-pool", "shape": "whole"}, "training-pool"],
        [{"pool": "slice-pool", "shape": None}, {"pool": "training-pool", "shape": "whole"}],
    ],
)
def test_whole_gpus_are_plain_names_in_every_form(pools):
    got = parse({"pools": pools, "gpus": 1})
    assert got == SpawnOptions(("slice-pool", "training-pool"), 1)  # as before shapes
    assert got.to_user_options()["pools"] == ["slice-pool", "training-pool"]


def test_the_old_forms_keep_working():
    # a list of names, and the "pool" the spawner writes to show where a server runs
    got = parse({"pools": ["training-pool"], "gpus": 2, "pool": "training-pool"})
    assert got == SpawnOptions(("training-pool",), 2)
    assert got.to_user_options()["pools"] == ["training-pool"]


def test_the_same_pool_may_be_listed_with_two_shapes():
    raw = {"pools": [{"pool": "slice-pool", "shape": "mig-3g.40gb"}, "slice-pool"], "gpus": 1}
    assert parse(raw).choices() == [("slice-pool", "mig-3g.40gb"), ("slice-pool", None)]


def test_a_cpu_only_server_ignores_shapes():
    got = parse({"pools": [{"pool": "slice-pool", "shape": "mig-3g.40gb"}], "gpus": 0})
    assert got == SpawnOptions(("slice-pool",), 0)


@pytest.mark.parametrize(
    ("pools", "gpus", "message"),
    [
        (
            [{"pool": "slice-pool", "shape": "mig-3g.40gb"}, "training-pool"],
            2,
            "a server gets one unit of a shape other than whole GPUs, so mig-3g.40gb in "
            "slice-pool needs gpus 1, not 2: choose 1 GPU, or whole GPUs for more than one",
        ),
        (
            [{"pool": "mig-pool", "shape": "mig-7g.80gb"}],
            1,
            "mig-pool offers no shape 'mig-7g.80gb'; its shapes: mig-1g.10gb",
        ),
        (
            [{"pool": "training-pool", "shape": "shared-4"}],
            1,
            "training-pool offers no shape 'shared-4'; its shapes: none listed",
        ),
        (
            [{"shape": "shared-4"}],
            1,
            'pools[0]: a pool entry written as an object needs its "pool"',
        ),
        (
            [{"pool": "slice-pool", "size": 2}],
            1,
            'pools[0]: a pool entry has "pool" and "shape" only, not size',
        ),
        ([{"pool": "slice-pool", "shape": 7}], 1, "pools[0]: a shape must be a shape id"),
        ([{"pool": "nope", "shape": "shared-4"}], 1, "there is no pool named 'nope'"),
    ],
)
def test_shape_entries_that_cannot_be_used_are_refused_with_a_message(pools, gpus, message):
    with pytest.raises(OptionsError) as e:
        parse({"pools": pools, "gpus": gpus})
    assert e.value.message.startswith(message)


def test_a_gpu_type_is_met_by_the_shapes_model():
    ok = parse(
        {"pools": [{"pool": "slice-pool", "shape": "shared-4"}], "gpus": 1, "gpu_type": "A10"}
    )
    assert ok.gpu_type == "A10"
    with pytest.raises(OptionsError, match="no shape you chose is on a GPU of type A10"):
        parse(
            {"pools": [{"pool": "mig-pool", "shape": "mig-1g.10gb"}], "gpus": 1, "gpu_type": "A10"}
        )


def test_the_form_sends_a_shape_per_chosen_pool():
    form = {
        "priority.slice-pool": ["1"],
        "shape.slice-pool": ["mig-3g.40gb"],
        "priority.mig-pool": ["2"],
        "shape.mig-pool": ["mig-1g.10gb"],
        "priority.training-pool": ["3"],
        "shape.training-pool": ["whole"],
        "shape.unused-pool": ["shared-4"],  # no priority: not chosen, its shape means nothing
        "gpus": ["1"],
    }
    assert form_to_user_options(form)["pools"] == [
        {"pool": "slice-pool", "shape": "mig-3g.40gb"},
        {"pool": "mig-pool", "shape": "mig-1g.10gb"},
        "training-pool",
    ]


def test_the_form_starts_with_the_last_shape_or_the_pools_default():
    last = {"pools": [{"pool": "slice-pool", "shape": "shared-4"}, "mig-pool"], "gpus": 1}
    chosen = default_options(last, CATALOG)
    assert chosen.choices() == [("slice-pool", "shared-4"), ("mig-pool", None)]
    rows = {r.name: r for r in form_context(CATALOG, chosen)["rows"]}
    assert [(s.id, s.selected) for s in rows["slice-pool"].shapes] == [
        ("whole", False),
        ("mig-3g.40gb", False),
        ("shared-4", True),
    ]
    # whole GPUs asked for where there are none: the pool's first shape
    assert [(s.id, s.selected) for s in rows["mig-pool"].shapes] == [("mig-1g.10gb", True)]
    assert rows["training-pool"].shapes == ()  # a pool that lists no shapes: no choice
    assert rows["slice-pool"].shape_field == "shape.slice-pool"


def test_a_fallback_rotates_pool_entries_with_their_shapes():
    order = [("slice-pool", "mig-3g.40gb"), ("slice-pool", None), ("mig-pool", "mig-1g.10gb")]
    assert rotate_after(order, ("slice-pool", None)) == [
        ("mig-pool", "mig-1g.10gb"),
        ("slice-pool", "mig-3g.40gb"),
        ("slice-pool", None),
    ]


SHAPED = {
    "id": "adm3",
    "pool": "training-pool",
    "gpus": 1,
    "gpu_type": "A100-80G",
    "shape": "mig-1g.10gb",
    "shape_text": "MIG 1g.10gb of an A100-80G",
    "over_quota": False,
}


def test_progress_says_the_shape():
    assert (
        admitted_line(SHAPED) == "admitted MIG 1g.10gb of an A100-80G in training-pool within quota"
    )
    assert Decision.of(SHAPED).tag == "MIG 1g.10gb of an A100-80G in training-pool, within quota"
    assert scheduled_line("n1", SHAPED) == "scheduled on node n1 (MIG 1g.10gb of an A100-80G)"
    assert ready_words({**SHAPED, "node": "n1"}) == (
        "in training-pool within quota (MIG 1g.10gb of an A100-80G on node n1)"
    )
    # whole GPUs read as they always did
    whole = {**SHAPED, "gpus": 2, "shape": "whole", "shape_text": "2 \u00d7 A100-80G"}
    assert admitted_line(whole) == "admitted to training-pool within quota (2 A100-80G GPUs)"


def test_a_pool_all_in_parts_of_gpus_is_not_a_cpu_pool():
    # mig-pool's node has no whole GPU left (gpu_total 0): its status, the GPU counts offered
    # and the first visit's count come from its shapes
    assert pool_status(MIG_ONLY) == ("full", "full")  # its shape has no free count here
    assert pool_status(with_free(MIG_ONLY)) == ("free", "free")
    only = Catalog(pools=(with_free(MIG_ONLY),), default_pools=("mig-pool",))
    assert gpu_choices(only) == [0, 1]
    assert default_options(None, only, default_gpus=1).gpus == 1
    # whole GPUs asked for there: the message names its shapes
    with pytest.raises(OptionsError) as e:
        parse_user_options({"pools": ["mig-pool"], "gpus": 1}, only)
    assert e.value.message == (
        "mig-pool has no whole GPUs: choose one of the shapes offered (mig-pool: mig-1g.10gb) "
        "with 1 GPU, or a pool with whole GPUs"
    )


def with_free(pool: PoolChoice) -> PoolChoice:
    shapes = tuple(ShapeChoice(**{**s.__dict__, "free": 7, "total": 7}) for s in pool.shapes)
    return PoolChoice(**{**pool.__dict__, "shapes": shapes})
