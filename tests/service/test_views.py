"""Pure views: the largest free block with reservations (a pool row's, :mod:`core.words.pool_rows`), CSV."""

from __future__ import annotations

import random
from datetime import datetime, timezone

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


def test_iso_says_the_second_a_time_falls_in_as_utc():
    # the truth: the standard library's own reading of each moment; the cache must not give
    # one second's text for another (rounded, or truncated toward zero before 1970)
    rng = random.Random(7)
    moments = [0.0, 0.999, 1.0, -0.5, -1.0, 1_767_225_599.9999, 1_767_225_600.0]
    moments += [rng.uniform(-2e9, 4e9) for _ in range(2000)]
    for ts in moments + moments[::-1]:  # asked again: from the cache
        want = datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert views.iso(ts) == want, ts
