"""Spawn options: the form's fields, REST user_options and their checks (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpupool.core.words.launch_options import Catalog, PoolChoice
from jupyter_gpupool.spawner.errors import OptionsError
from jupyter_gpupool.spawner.options import (
    SpawnOptions,
    default_options,
    form_to_user_options,
    order_rows,
    parse_user_options,
)

TRAINING = PoolChoice(
    name="training-pool",
    gpu_types=("A100-80G",),
    gpu_total=16,
    largest_node_gpus=8,
    max_gpus=8,
)
INFERENCE = PoolChoice(name="inference-pool", gpu_types=("A10-24G",), largest_node_gpus=4)
DEV = PoolChoice(
    name="dev-pool", gpu_types=("RTX4090-24G",), largest_node_gpus=4, allowed_gpus=(0, 1, 2)
)
COMPUTE = PoolChoice(name="compute-pool")
CATALOG = Catalog(
    pools=(COMPUTE, DEV, INFERENCE, TRAINING),
    default_pools=("training-pool", "inference-pool", "gone-pool"),
    restricted=frozenset({"secret-pool"}),
    max_gpus=64,
)


def parse(raw, **kw):
    return parse_user_options(raw, CATALOG, **kw)


def refused(raw, **kw) -> str:
    with pytest.raises(OptionsError) as e:
        parse(raw, **kw)
    assert e.value.status_code == 400
    return e.value.message


def test_rest_options_as_the_issue_writes_them():
    got = parse({"pools": ["training-pool", "inference-pool"], "gpus": 2, "gpu_type": "A100-80G"})
    assert got == SpawnOptions(("training-pool", "inference-pool"), 2, "A100-80G")
    assert got.to_user_options() == {
        "pools": ["training-pool", "inference-pool"],
        "gpus": 2,
        "gpu_type": "A100-80G",
        "queue": False,
    }


def test_defaults_and_duplicates():
    assert parse({}) == SpawnOptions((), 0, None)
    assert parse(None, default_gpus=1) == SpawnOptions((), 1, None)
    assert parse({"pools": ["dev-pool", "dev-pool"], "gpus": 1}).pools == ("dev-pool",)
    # a GPU type means nothing for a CPU-only server
    assert parse({"pools": ["compute-pool"], "gpus": 0, "gpu_type": "A10-24G"}).gpu_type is None
    # JSON numbers written 2.0 are whole numbers
    assert parse({"gpus": 2.0}).gpus == 2
    # the spawner writes "pool" into user_options to show where a server runs: ignored
    assert parse({"pools": ["dev-pool"], "gpus": 1, "pool": "dev-pool"}).gpus == 1


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"pools": ["nope"]},
            "there is no pool named 'nope'; pools you may use: "
            "compute-pool, dev-pool, inference-pool, training-pool",
        ),
        (
            {"pools": ["secret-pool"]},
            "you may not use the pool secret-pool; ask an admin for access",
        ),
        ({"pools": "training-pool"}, "pools must be a list of pool names"),
        ({"pools": [3]}, "pools[0] must be a string, not '3'"),
        ({"pools": [""]}, "pools[0] must not be empty"),
        ({"pools": ["x" * 64]}, "pools[0] is longer than 63 characters"),
        ({"gpus": "two"}, "gpus must be a whole number of GPUs, not 'two'"),
        ({"gpus": 1.5}, "gpus must be a whole number of GPUs, not '1.5'"),
        ({"gpus": True}, "gpus must be a whole number of GPUs, not 'true'"),
        ({"gpus": -1}, "gpus must not be negative, not -1"),
        ({"gpus": 65}, "gpus is 65; one server may have at most 64 GPUs"),
        ({"gpu_type": "y" * 100, "gpus": 1}, "gpu_type is longer than 63 characters"),
        ({"gpu": 2}, "unknown option 'gpu'; did you mean 'gpus'?"),
        ({"image": "x"}, "unknown option 'image' (allowed: gpu_type, gpus, pools, queue)"),
        (
            {"pools": ["compute-pool"], "gpus": 1},
            "compute-pool has no GPUs: choose 0 GPUs for a CPU-only server, or a pool with GPUs",
        ),
        (
            {"pools": ["training-pool", "dev-pool"], "gpus": 16},
            "no pool you chose allows a server with 16 GPUs "
            "(training-pool: up to 8 GPUs; dev-pool: 0, 1 or 2 GPUs)",
        ),
        (
            {"pools": ["dev-pool"], "gpus": 3},
            "no pool you chose allows a server with 3 GPUs (dev-pool: 0, 1 or 2 GPUs)",
        ),
        (
            {"pools": ["dev-pool", "inference-pool"], "gpus": 1, "gpu_type": "H100"},
            "no pool you chose has GPU type H100 (they have A10-24G, RTX4090-24G)",
        ),
        (
            {"pools": ["dev-pool", "training-pool"], "gpus": 3, "gpu_type": "RTX4090-24G"},
            "no pool you chose with GPU type RTX4090-24G allows a server with 3 GPUs",
        ),
        # no pools given: the default order is checked (training + inference: at most 8)
        ({"gpus": 12}, "no pool you chose allows a server with 12 GPUs"),
    ],
)
def test_invalid_options_get_a_message_for_the_user(raw, message):
    assert refused(raw).startswith(message)


def test_too_many_pools():
    raw = {"pools": ["dev-pool"] * 9}
    assert refused(raw, max_pools=8) == "at most 8 pools may be listed; you listed 9"


def test_profile_options_pass_when_kubespawner_profiles_are_configured():
    raw = {"pools": ["dev-pool"], "gpus": 1, "profile": "datascience", "image": "minimal"}
    assert parse(raw, extra_keys=True) == SpawnOptions(("dev-pool",), 1, None)


def test_a_pool_that_fits_is_enough_others_are_skipped_at_admission():
    got = parse({"pools": ["inference-pool", "training-pool"], "gpus": 8})
    assert got.pools == ("inference-pool", "training-pool")


def test_form_fields_become_user_options_in_priority_order():
    form = {
        "priority.training-pool": ["2"],
        "priority.dev-pool": [""],
        "priority.inference-pool": ["1"],
        "priority.compute-pool": ["2"],  # a tie keeps the form's order
        "gpus": ["4"],
        "gpu_type": [""],
        "profile": ["datascience"],
    }
    assert form_to_user_options(form) == {
        "pools": ["inference-pool", "training-pool", "compute-pool"],
        "gpus": 4,
        "gpu_type": None,
    }
    assert form_to_user_options({"gpus": ["lots"], "gpu_type": ["A10-24G"]}) == {
        "pools": [],
        "gpus": "lots",
        "gpu_type": "A10-24G",
    }
    assert form_to_user_options({}) == {"pools": [], "gpu_type": None}


@pytest.mark.parametrize("value", ["0", "-1", "first", "1.5", "9" * 5000])
def test_a_bad_priority_is_refused(value):
    with pytest.raises(OptionsError) as e:
        form_to_user_options({"priority.dev-pool": [value]})
    assert e.value.message.startswith(
        "the priority of dev-pool must be a whole number from 1 (tried first), "
        "or empty not to use it"
    )


def test_a_gpu_count_of_5000_digits_from_the_form_is_refused_by_name():
    options = form_to_user_options({"gpus": ["9" * 5000]})
    assert refused(options).startswith("gpus must be a whole number of GPUs, not '99999")


@given(
    st.dictionaries(
        st.sampled_from(["pools", "gpus", "gpu_type", "pool", "other"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 100),
            st.floats(allow_nan=False),
            st.text(max_size=80),
            st.lists(st.one_of(st.text(max_size=70), st.integers()), max_size=12),
        ),
    )
)
def test_anything_is_either_accepted_consistently_or_refused_with_a_message(raw):
    try:
        got = parse(raw)
    except OptionsError as e:
        assert e.message and e.status_code == 400
        return
    assert all(CATALOG.pool(p) is not None for p in got.pools)
    assert 0 <= got.gpus <= CATALOG.max_gpus
    # what was accepted is accepted again, unchanged
    assert parse(got.to_user_options()) == got


def test_form_defaults_last_choice_else_the_group_order():
    last = {"pools": ["dev-pool"], "gpus": 2, "gpu_type": None}
    assert default_options(last, CATALOG) == SpawnOptions(("dev-pool",), 2, None)
    # no longer valid (the pool went away): the admin's order for the user's groups
    assert default_options({"pools": ["gone"]}, CATALOG, default_gpus=1) == SpawnOptions(
        ("training-pool", "inference-pool"), 1, None
    )
    assert default_options(None, CATALOG) == SpawnOptions(("training-pool", "inference-pool"))
    # no pool chosen stays so (the form says the default order is used), with the GPU count
    assert default_options({"pools": [], "gpus": 4}, CATALOG) == SpawnOptions((), 4, None)
    assert default_options({"gpus": 4}, CATALOG) == SpawnOptions((), 4, None)
    # a choice the check refuses is kept as the user made it, order and all
    refused = {"pools": ["compute-pool", "dev-pool"], "gpus": 3, "gpu_type": "A100-80G"}
    kept = SpawnOptions(("compute-pool", "dev-pool"), 3, "A100-80G")
    assert default_options(refused, CATALOG) == kept
    with pytest.raises(OptionsError):
        parse_user_options(refused, CATALOG)
    # what is not a pool or a count at all is left out
    odd = {"pools": ["dev-pool", 7, "gone", "dev-pool"], "gpus": "two", "gpu_type": ""}
    assert default_options(odd, CATALOG, default_gpus=1) == SpawnOptions(("dev-pool",), 1, None)


def test_a_first_start_ticks_only_default_pools_that_take_its_gpus():
    # the demo's order for a user in no group: dev-pool, then compute-pool (no GPUs)
    no_group = Catalog(pools=(COMPUTE, DEV, TRAINING), default_pools=("dev-pool", "compute-pool"))
    assert default_options(None, no_group, default_gpus=1) == SpawnOptions(("dev-pool",), 1)
    # a CPU-only first start may go anywhere in the order
    assert default_options(None, no_group) == SpawnOptions(("dev-pool", "compute-pool"), 0)
    # more GPUs than any default pool gives: the most one does (dev-pool allows 0, 1, 2)
    assert default_options(None, no_group, default_gpus=8) == SpawnOptions(("dev-pool",), 2)
    # the user's quota in dev-pool has room for 1 GPU now: 1 is offered
    tight = Catalog(pools=(COMPUTE, with_quota(DEV, 1)), default_pools=("dev-pool", "compute-pool"))
    assert default_options(None, tight, default_gpus=2) == SpawnOptions(("dev-pool",), 1)
    # no GPU for the user in any default pool: a CPU-only server in the order
    used_up = Catalog(
        pools=(COMPUTE, with_quota(DEV, 0)), default_pools=("dev-pool", "compute-pool")
    )
    assert default_options(None, used_up, default_gpus=1) == SpawnOptions(
        ("dev-pool", "compute-pool"), 0
    )
    cpu_only = Catalog(pools=(COMPUTE,), default_pools=("compute-pool",))
    assert default_options(None, cpu_only, default_gpus=1) == SpawnOptions(("compute-pool",), 0)
    # the pools of a last choice that have all gone: the default pools that take its GPUs
    assert default_options({"pools": ["gone"], "gpus": 2}, no_group) == SpawnOptions(
        ("dev-pool",), 2
    )


def with_quota(pool: PoolChoice, available: int) -> PoolChoice:
    return PoolChoice(**{**pool.__dict__, "quota_managed": True, "quota_available": available})


def test_form_rows_put_the_chosen_pools_first():
    rows = order_rows(CATALOG, ["inference-pool", "nope", "dev-pool"])
    assert [(p.name, n) for p, n in rows] == [
        ("inference-pool", 1),
        ("dev-pool", 2),
        ("compute-pool", None),
        ("training-pool", None),
    ]


def test_catalog_from_the_service_answer():
    answer = {
        "user": "alice",
        "groups": ["ml-research"],
        "default_pools": ["training-pool"],
        "restricted_pools": ["secret-pool"],
        "max_gpus": 32,
        "pools": [
            {
                "name": "training-pool",
                "description": "Large model training",
                "status": "active",
                "gpu_types": ["A100-80G"],
                "gpu_total": 16,
                "gpu_available": 12,
                "largest_free_block": 8,
                "largest_node_gpus": 8,
                "node_count": 2,
                "schedulable_nodes": 2,
                "limits": {"max_gpus": None, "min_gpus": 0, "allowed_gpus": []},
                "quota": {"managed": True, "borrowing": True, "within_quota": 4, "available": 8},
                "server_count": 1,
            }
        ],
    }
    catalog = Catalog.from_json(answer)
    assert catalog.pool("training-pool") == PoolChoice(
        name="training-pool",
        description="Large model training",
        status="active",
        gpu_types=("A100-80G",),
        gpu_total=16,
        gpu_available=12,
        largest_free_block=8,
        largest_node_gpus=8,
        node_count=2,
        schedulable_nodes=2,
        quota_managed=True,
        borrowing=True,
        within_quota=4,
        quota_available=8,
    )
    assert (catalog.default_pools, catalog.restricted, catalog.max_gpus) == (
        ("training-pool",),
        frozenset({"secret-pool"}),
        32,
    )
