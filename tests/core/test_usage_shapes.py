"""The usage index's shapes: each node's offer, the units pods use of each shape resource, and a
pool's shapes with free counts as ``GET api/v1/pools`` lists them.

Nodes carry the labels GFD writes and the allocatable the device plugin advertises (as in
``test_shapes.py``; sources in ``docs/shapes.md``); pods ask for MIG devices and shared GPUs as
the device plugin's README shows.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from k8s_factories import node, pod

from jupyter_gpupool.core.pools.model import Pool
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.records import pod_shape_units
from jupyter_gpupool.core.usage.reservations import Reservation, Reservations
from jupyter_gpupool.core.words.pool_rows import pool_summary
from jupyter_gpupool.core.words.shape_rows import pool_shapes

A100_80 = "NVIDIA-A100-SXM4-80GB"
#: NVML's memory (MiB) of the A100 80 GB's MIG profiles
MIG_MEMORY = {"1g.10gb": 9856, "2g.20gb": 19968, "3g.40gb": 40192, "7g.80gb": 80384}


def gfd(product: str, count: int, memory: int, **extra: str) -> dict[str, str]:
    """The labels GFD writes for the full GPUs of one model (no sharing)."""
    labels = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.memory": str(memory),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
    }
    labels.update(extra)
    return labels


def mig_node(
    name: str,
    pool: str,
    profiles: dict[str, int],
    whole: int = 0,
    state: str = "success",
    **kw,
) -> dict:
    """An A100-80GB node under the mixed strategy: ``profiles`` MIG devices, ``whole`` GPUs not
    in MIG mode (GFD counts both in ``nvidia.com/gpu.count``)."""
    labels = gfd(A100_80, whole + 1, 81920)
    labels.update(
        {
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": "custom",
            "nvidia.com/mig.config.state": state,
        }
    )
    for profile, count in profiles.items():
        key = f"nvidia.com/mig-{profile}"
        labels.update(
            {
                f"{key}.count": str(count),
                f"{key}.product": f"{A100_80}-MIG-{profile}",
                f"{key}.memory": str(MIG_MEMORY[profile]),
                f"{key}.replicas": "1",
                f"{key}.sharing-strategy": "none",
            }
        )
    alloc = {f"nvidia.com/mig-{p}": str(c) for p, c in profiles.items()}
    alloc["nvidia.com/gpu"] = str(whole)
    return node(
        name, pool, 0, None, extra_labels=labels, extra_allocatable=alloc, device_plugin=False, **kw
    )


def shared_node(name: str, pool: str, gpus: int, replicas: int, *, renamed: bool = False) -> dict:
    """An A10 node time-sliced by the device plugin: ``gpus x replicas`` on ``nvidia.com/gpu``
    (or ``nvidia.com/gpu.shared`` when renamed, ``-SHARED`` then left off the product)."""
    labels = gfd(
        "NVIDIA-A10" if renamed else "NVIDIA-A10-SHARED",
        gpus,
        23028,
        **{
            "nvidia.com/gpu.replicas": str(replicas),
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "nvidia.com/mig.capable": "false",
        },
    )
    resource = "nvidia.com/gpu.shared" if renamed else "nvidia.com/gpu"
    alloc = {resource: str(gpus * replicas)}
    return node(
        name, pool, 0, "A10", extra_labels=labels, extra_allocatable=alloc, device_plugin=False
    )


def mig_pod(name: str, profile: str, node_name: str | None, **kw) -> dict:
    return pod(name, 0, node_name, limits={f"nvidia.com/mig-{profile}": "1"}, **kw)


def shapes(idx: UsageIndex, pool: str, res: Reservations | None = None) -> dict[str, tuple]:
    """``{id: (total, free, largest_free)}`` of a pool's shapes, in their order."""
    return {
        s["id"]: (s["total"], s["free"], s["largest_free"])
        for s in pool_shapes(idx, res or Reservations(), pool)
    }


# --- MIG ----------------------------------------------------------------------------------------


def test_a_mixed_mig_node_with_a_whole_gpu_counts_each_shape_and_its_pods():
    idx = UsageIndex()
    # two A100s: one cut into 3g.40gb + 2 x 2g.20gb, one whole
    idx.apply_node("ADDED", mig_node("m1", "mig-pool", {"3g.40gb": 1, "2g.20gb": 2}, whole=1))
    idx.apply_pod("ADDED", mig_pod("a", "2g.20gb", "m1", user="alice"))
    idx.apply_pod("ADDED", pod("b", 1, "m1", user="bob"))
    rows = pool_shapes(idx, Reservations(), "mig-pool")
    assert [r["id"] for r in rows] == ["whole", "mig-3g.40gb", "mig-2g.20gb"]
    whole, big, small = rows
    assert whole == {
        "id": "whole",
        "name": None,
        "kind": "whole",
        "resource": "nvidia.com/gpu",
        "model": A100_80,
        "memory_mib": 81920,
        "equivalent": "1",
        "equivalent_gpus": 1.0,
        "isolates": "everything: the whole GPU is the server's",
        "total": 1,
        "free": 0,
        "largest_free": 0,
        "text": f"{A100_80} whole: 0 free",
    }
    assert big["resource"] == "nvidia.com/mig-3g.40gb" and big["memory_mib"] == 40192
    assert (big["equivalent"], round(big["equivalent_gpus"], 4)) == ("3/7", 0.4286)
    assert (big["total"], big["free"], big["largest_free"]) == (1, 1, 1)
    assert big["text"] == "MIG 3g.40gb: 1 free"
    assert (small["total"], small["free"], small["largest_free"]) == (2, 1, 1)
    assert small["equivalent"] == "2/7" and "memory and faults" in small["isolates"]
    # the node's whole GPUs are today's numbers; a pod with a MIG device is a pod on it
    n = idx.node("m1")
    assert n is not None
    assert (n.gpu_total, n.gpu_used, n.gpu_free, n.pods) == (1, 1, 0, 2)
    assert n.reasons == () and n.schedulable
    assert [s.name for s in idx.servers("mig-pool")] == ["a", "b"]
    # the MIG device comes back when its pod ends
    idx.apply_pod("DELETED", mig_pod("a", "2g.20gb", "m1", user="alice"))
    assert shapes(idx, "mig-pool")["mig-2g.20gb"] == (2, 2, 2)


def test_mig_devices_free_on_one_node_and_the_largest_block():
    idx = UsageIndex()
    for name in ("m1", "m2"):
        idx.apply_node("ADDED", mig_node(name, "mig-pool", {"1g.10gb": 7}))
    for i in range(3):
        idx.apply_pod("ADDED", mig_pod(f"a{i}", "1g.10gb", "m1", user="alice"))
    idx.apply_pod("ADDED", mig_pod("b", "1g.10gb", "m2", user="bob"))
    assert shapes(idx, "mig-pool") == {"mig-1g.10gb": (14, 10, 6)}
    # another workload's pod (no user, no GPUs) uses a MIG device too
    idx.apply_pod("ADDED", mig_pod("job", "1g.10gb", "m2", namespace="batch"))
    assert shapes(idx, "mig-pool") == {"mig-1g.10gb": (14, 9, 5)}
    [row] = pool_shapes(idx, Reservations(), "mig-pool")
    assert row["text"] == "MIG 1g.10gb: 9 free"
    # a pending pod uses no node's device
    idx.apply_pod("ADDED", mig_pod("c", "1g.10gb", None, user="carol", pool="mig-pool"))
    assert shapes(idx, "mig-pool") == {"mig-1g.10gb": (14, 9, 5)}
    # a node that leaves the pool takes its devices and their pods along
    idx.apply_node("MODIFIED", mig_node("m2", "other-pool", {"1g.10gb": 7}))
    assert shapes(idx, "mig-pool") == {"mig-1g.10gb": (7, 4, 4)}
    assert shapes(idx, "other-pool") == {"mig-1g.10gb": (7, 5, 5)}
    idx.apply_node("DELETED", mig_node("m2", "other-pool", {"1g.10gb": 7}))
    assert shapes(idx, "other-pool") == {}


def test_a_node_cut_anew_offers_its_new_devices():
    """Only the node's MIG devices change (its whole GPUs, type and state do not)."""
    idx = UsageIndex()
    idx.apply_node("ADDED", mig_node("m1", "mig-pool", {"1g.10gb": 7}))
    idx.apply_node("MODIFIED", mig_node("m1", "mig-pool", {"3g.40gb": 1, "2g.20gb": 2}))
    assert shapes(idx, "mig-pool") == {"mig-3g.40gb": (1, 1, 1), "mig-2g.20gb": (2, 2, 2)}


def test_a_pod_reads_its_shape_resources_as_the_scheduler_counts_them():
    spec = {
        "containers": [
            {"resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "2"}}},
            {"resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}},
        ],
        "initContainers": [{"resources": {"limits": {"nvidia.com/mig-3g.40gb": "1"}}}],
    }
    assert pod_shape_units(spec) == (("nvidia.com/mig-1g.10gb", 2), ("nvidia.com/mig-3g.40gb", 1))
    plain = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}}]}
    assert pod_shape_units(plain) == () and pod_shape_units({}) == ()


# --- shared GPUs --------------------------------------------------------------------------------


def test_time_sliced_replicas_are_counted_on_nvidia_com_gpu():
    idx = UsageIndex()
    idx.apply_node("ADDED", shared_node("a10-1", "shared-pool", 2, 4))
    idx.apply_pod("ADDED", pod("a", 1, "a10-1", user="alice"))
    idx.apply_pod("ADDED", pod("b", 1, "a10-1", user="bob"))
    [row] = pool_shapes(idx, Reservations(), "shared-pool")
    assert (row["id"], row["kind"], row["resource"]) == (
        "shared-4",
        "shared-time-slicing",
        "nvidia.com/gpu",
    )
    assert (row["total"], row["free"], row["largest_free"]) == (8, 6, 6)
    assert (row["equivalent"], row["equivalent_gpus"], row["memory_mib"]) == ("1/4", 0.25, None)
    assert row["text"] == "A10 shared ¼ (time-sliced, no memory isolation): 6 free"


def test_renamed_shared_gpus_are_counted_on_nvidia_com_gpu_shared():
    idx = UsageIndex()
    idx.apply_node("ADDED", shared_node("a10-1", "shared-pool", 1, 4, renamed=True))
    shared = {"nvidia.com/gpu.shared": "1"}
    idx.apply_pod("ADDED", pod("a", 0, "a10-1", user="alice", limits=shared))
    idx.apply_pod("ADDED", pod("job", 0, "a10-1", namespace="batch", limits=shared))
    assert shapes(idx, "shared-pool") == {"shared-4": (4, 2, 2)}
    [row] = pool_shapes(idx, Reservations(), "shared-pool")
    assert row["resource"] == "nvidia.com/gpu.shared"
    n = idx.node("a10-1")
    assert n is not None and n.gpu_total == 0 and n.pods == 2
    # GPUs under another name are not a missing device plugin
    assert n.reasons == () and n.schedulable


# --- re-partitioning ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state,words",
    [
        ("pending", "MIG re-partition pending"),
        ("rebooting", "rebooting to change MIG mode"),
        ("failed", "MIG re-partition failed"),
    ],
)
def test_a_node_being_repartitioned_admits_nothing_and_says_why(state, words):
    idx = UsageIndex()
    idx.apply_node("ADDED", mig_node("m1", "mig-pool", {"1g.10gb": 7}, whole=1))
    idx.apply_node("ADDED", mig_node("m2", "mig-pool", {"1g.10gb": 7}, whole=1, state=state))
    idx.apply_pod("ADDED", mig_pod("a", "1g.10gb", "m2", user="alice"))
    n = idx.node("m2")
    assert n is not None and n.reasons == (words,) and not n.schedulable
    # its devices are the pool's, but none is free; its pods still count
    assert shapes(idx, "mig-pool") == {"whole": (2, 1, 1), "mig-1g.10gb": (14, 7, 7)}
    usage = idx.pool_usage("mig-pool")
    assert (usage.status, usage.schedulable_nodes, usage.gpu_free_schedulable) == ("degraded", 1, 1)
    assert [g.nodes_with(1) for g in idx.placement_groups("mig-pool")] == [{"m1": None}]
    # what a refusal in the pool names
    assert idx.repartitioning("mig-pool") == [f"m2: {words}"]
    # done: it takes servers again, and no refusal names it
    idx.apply_node("MODIFIED", mig_node("m2", "mig-pool", {"1g.10gb": 7}, whole=1))
    n = idx.node("m2")
    assert n is not None and n.reasons == () and n.schedulable
    assert idx.repartitioning("mig-pool") == []
    assert shapes(idx, "mig-pool") == {"whole": (2, 2, 1), "mig-1g.10gb": (14, 13, 7)}


def test_repartitioning_is_listed_with_cordon_in_order():
    idx = UsageIndex()
    idx.apply_node("ADDED", mig_node("m1", "p", {"1g.10gb": 7}, state="pending", cordoned=True))
    n = idx.node("m1")
    assert n is not None
    assert n.reasons == ("cordoned (scheduling disabled)", "MIG re-partition pending")
    assert n.status == "Ready,SchedulingDisabled"


def test_a_single_strategy_node_not_cut_alike_says_so():
    labels = gfd(
        f"{A100_80}-MIG-INVALID", 0, 0, **{"nvidia.com/mig.strategy": "single"}
    )  # GFD's word
    idx = UsageIndex()
    idx.apply_node("ADDED", node("m1", "p", 8, None, extra_labels=labels))
    n = idx.node("m1")
    assert n is not None and not n.schedulable
    assert "MIG single strategy, but the GPUs are not all partitioned alike" in n.reasons
    assert shapes(idx, "p") == {}


# --- a pool's row -------------------------------------------------------------------------------


def test_an_ordinary_pools_shapes_are_its_whole_gpus_with_todays_numbers():
    idx = UsageIndex()
    for name in ("gpu-node-1", "gpu-node-2"):
        idx.apply_node("ADDED", node(name, "training-pool", 8))
    idx.apply_node("ADDED", node("gpu-node-3", "training-pool", 8, cordoned=True))
    idx.apply_pod("ADDED", pod("a", 3, "gpu-node-1", user="alice"))
    idx.apply_pod("ADDED", pod("b", 1, "gpu-node-2", user="bob"))
    res = Reservations()
    res.add(Reservation("r1", "training-pool", "gpu-node-2", 4, "carol", "user:carol", False, 9.0))
    row = pool_summary(Pool("training-pool"), idx.pool_usage("training-pool"), idx, res)
    [whole] = row["shapes"]
    assert (whole["id"], whole["model"], whole["resource"]) == (
        "whole",
        "A100-80G",
        "nvidia.com/gpu",
    )
    assert whole["total"] == row["gpu_total"] == 24
    assert whole["free"] == row["gpu_available"] == 5 + 3
    assert whole["largest_free"] == row["largest_free_block"] == 5
    assert whole["text"] == "A100-80G whole: 8 free (largest 5 on one node)"
    # a pool of two GPU types lists each type's whole GPUs (by model); a CPU pool none
    idx.apply_node("ADDED", node("a10-1", "training-pool", 4, "A10-24G"))
    assert [s["model"] for s in pool_shapes(idx, res, "training-pool")] == ["A10-24G", "A100-80G"]
    idx.apply_node("ADDED", node("cpu-1", "compute-pool", 0, ""))
    assert pool_shapes(idx, res, "compute-pool") == []


def test_pool_rows_count_gpu_equivalents_with_whole_gpus_beside_and_list_slices_as_shapes():
    """Two A10s time-sliced in 4 are 8 units of ``nvidia.com/gpu`` on their node but 2 GPUs of
    its pool: ``gpu_total`` and the figures beside it count GPU-equivalents (the 2 A10s are 2,
    the MIG node's two 1g.10gb instances 2/7), ``whole_gpus`` the whole GPUs alone, as the
    admission of whole GPUs (``gpu_reserved``, ``gpu_available``) does; the replicas (and a MIG
    node's instances) are the pool's shapes."""
    idx = UsageIndex()
    idx.apply_node("ADDED", node("w1", "dev-pool", 4, "RTX4090-24G"))
    idx.apply_node("ADDED", shared_node("a10-1", "dev-pool", 2, 4))
    idx.apply_node("ADDED", mig_node("m1", "dev-pool", {"1g.10gb": 2}))
    idx.apply_pod("ADDED", pod("a", 1, "w1", user="alice"))
    idx.apply_pod("ADDED", pod("b", 1, "a10-1", user="bob"))
    res = Reservations()
    res.add(Reservation("r1", "dev-pool", "a10-1", 1, "carol", "user:carol", False, 9.0))
    res.add(Reservation("r2", "dev-pool", "w1", 1, "dave", "user:dave", False, 9.0))
    row = pool_summary(Pool("dev-pool"), idx.pool_usage("dev-pool"), idx, res)
    figures = ("gpu_total", "gpu_used", "gpu_free", "gpu_reserved", "gpu_available")
    total, used = 4 + 2 + Fraction(2, 7), 1 + Fraction(1, 4)  # by hand, from the nodes
    assert {k: row[k] for k in figures} == {
        "gpu_total": round(float(total), 3),
        "gpu_used": 1.25,
        "gpu_free": round(float(total - used), 3),
        "gpu_reserved": 1,
        "gpu_available": 2,
    }
    assert row["whole_gpus"] == {"total": 4, "used": 1, "free": 3}
    assert row["gpus_text"] == (
        "4 whole + 0.29 in MIG instances + 2 time-sliced in 4: "
        "2 of 2 instances free, 7 of 8 replicas free"
    )
    assert row["largest_free_block"] == 2
    assert shapes(idx, "dev-pool", res) == {
        "whole": (4, 2, 2),
        "mig-1g.10gb": (2, 2, 2),
        "shared-4": (8, 6, 6),
    }
    # the pool's whole GPUs stay the same as its shared node's replicas come and go
    idx.apply_pod("DELETED", pod("b", 1, "a10-1", user="bob"))
    idx.apply_node("DELETED", shared_node("a10-1", "dev-pool", 2, 4))
    usage = idx.pool_usage("dev-pool")
    assert (usage.gpu_total, usage.gpu_used, usage.gpu_free_schedulable) == (4, 1, 3)
    # a pool of shared GPUs only has no whole GPUs at all
    idx.apply_node("ADDED", shared_node("a10-2", "shared-pool", 2, 4))
    idx.apply_pod("ADDED", pod("c", 1, "a10-2", user="carol"))
    usage = idx.pool_usage("shared-pool")
    assert (usage.gpu_total, usage.gpu_used, usage.largest_free_block) == (0, 0, 0)
    assert shapes(idx, "shared-pool") == {"shared-4": (8, 7, 7)}


def test_shapes_are_ordered_whole_then_mig_by_size_then_shared_then_hami():
    idx = UsageIndex()
    idx.apply_node("ADDED", shared_node("a10-1", "p", 1, 4))
    idx.apply_node("ADDED", mig_node("m1", "p", {"1g.10gb": 4, "3g.40gb": 1}))
    hami = gfd("NVIDIA-A100-SXM4-40GB", 1, 40960, gpu="on")
    idx.apply_node("ADDED", node("h1", "p", 10, None, extra_labels=hami))
    idx.apply_node("ADDED", node("w1", "p", 8))
    rows = pool_shapes(idx, Reservations(), "p")
    assert [r["id"] for r in rows] == ["whole", "mig-3g.40gb", "mig-1g.10gb", "shared-4", "hami-10"]
    assert rows[-1]["text"] == (
        "NVIDIA-A100-SXM4-40GB slice ⅒ (HAMi, memory capped in user space): 10 free"
    )


def test_incremental_shape_counts_match_a_fresh_index():
    """Random pods and node changes, fed one event at a time, count what a fresh list does."""
    rng = random.Random(29)

    def random_node(name: str) -> dict:
        pool = rng.choice(["p1", "p2"])
        kind = rng.randrange(4)
        if kind == 0:
            return node(name, pool, 8, cordoned=rng.random() < 0.2)
        if kind == 1:
            state = rng.choice(["success", "success", "pending"])
            return mig_node(name, pool, {"1g.10gb": 4, "3g.40gb": 1}, whole=1, state=state)
        return shared_node(name, pool, 2, 4, renamed=kind == 3)

    def random_pod(i: int) -> dict:
        where = rng.choice([*nodes, None, "gone-node"])
        limits = rng.choice(
            [
                {},
                {"nvidia.com/mig-1g.10gb": "1"},
                {"nvidia.com/mig-3g.40gb": "1"},
                {"nvidia.com/gpu.shared": "1"},
            ]
        )
        return pod(
            f"p{i}", rng.choice([0, 1, 2]), where, user=rng.choice(["a", None]), limits=limits
        )

    nodes = {f"n{i}": random_node(f"n{i}") for i in range(6)}
    idx = UsageIndex()
    for obj in nodes.values():
        idx.apply_node("ADDED", obj)
    pods: dict[str, dict] = {}
    for i in range(300):
        r = rng.random()
        if r < 0.55:
            p = random_pod(i)
            pods[p["metadata"]["name"]] = p
            idx.apply_pod("ADDED", p)
        elif r < 0.8 and pods:
            gone = pods.pop(rng.choice(sorted(pods)))
            idx.apply_pod("DELETED", gone)
        else:
            name = rng.choice(sorted(nodes))
            nodes[name] = random_node(name)
            idx.apply_node("MODIFIED", nodes[name])
        if i % 3 == 0:  # the rows read between events, as the pages read them
            idx.pool_usage("p1"), idx.pool_usage("p2")

    fresh = UsageIndex()
    fresh.reset(nodes=list(nodes.values()), pods=list(pods.values()))

    def counts(index: UsageIndex) -> dict:
        return {
            (pool, c.shape): (c.total, c.nodes, c.free, [n for n in c.counts if n] and c.max_free())
            for pool in ("p1", "p2")
            for c in index.shape_counts(pool)
        }

    assert counts(idx) == counts(fresh) and counts(fresh)
    for pool in ("p1", "p2"):
        assert pool_shapes(idx, Reservations(), pool) == pool_shapes(fresh, Reservations(), pool)
        # the pool's and each node's GPUs by kind (issue 40), counted as they changed
        assert idx.pool_usage(pool).parts == fresh.pool_usage(pool).parts
        assert [n.parts for n in idx.nodes(pool)] == [n.parts for n in fresh.nodes(pool)]
