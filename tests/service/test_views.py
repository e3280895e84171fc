"""Pure views: the largest free block with reservations (a pool row's, :mod:`core.words.pool_rows`), CSV."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservation, Reservations
from jupyter_gpupool.core.words.pool_rows import largest_free_block
from jupyter_gpupool.service import views


def node(name: str, gpus: int, pool: str = "p", gpu_type: str = "A100", ready: bool = True):
    return {
        "metadata": {
            "name": name,
            "labels": {"runwhere.ai/pool": pool, "runwhere.ai/gpu-type": gpu_type},
        },
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, node_name: str, gpus: int):
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


nodes_strategy = st.lists(
    st.tuples(
        st.integers(0, 8),  # GPUs
        st.integers(0, 8),  # used by a pod
        st.sampled_from(["A100", "T4"]),
        st.booleans(),  # ready
        st.integers(0, 8),  # reserved
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(nodes_strategy)
def test_largest_free_block_counts_reservations_as_used(spec):
    index = UsageIndex()
    reservations = Reservations()
    expected = 0
    for i, (gpus, used, gpu_type, ready, reserved) in enumerate(spec):
        name = f"n{i}"
        index.apply_node("ADDED", node(name, gpus, gpu_type=gpu_type, ready=ready))
        used = min(used, gpus)
        if used:
            index.apply_pod("ADDED", pod(f"pod{i}", name, used))
        free = gpus - used
        held = min(reserved, free)
        if held:
            reservations.add(
                Reservation(f"a{i}", "p", name, held, "u", "user:u", False, expires_at=1e12)
            )
        if ready:
            expected = max(expected, free - held)
    raw = index.pool_usage("p").largest_free_block
    assert largest_free_block(index, reservations, "p", raw) == expected


def test_csv_quotes_and_joins():
    text = views.to_csv(
        [{"name": "a", "gpu_types": ["A100", "T4"], "description": "=cmd()", "status": None}],
        ("name", "gpu_types", "description", "status"),
    )
    assert text == "name,gpu_types,description,status\na,A100;T4,'=cmd(),\n"
