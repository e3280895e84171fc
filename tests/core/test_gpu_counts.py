"""GPUs counted alike for every kind of node (core/words/gpu_counts.py over the usage index's
parts): GPU-equivalents by NVIDIA's conventions, whole GPUs and the parts beside them.

The truth is the node as the device plugin and GFD write it: on a shared node (time-slicing or
MPS) ``nvidia.com/gpu`` counts GPUs x ``nvidia.com/gpu.replicas``; a MIG device of the mixed
strategy is ``nvidia.com/mig-<g>g.<gb>gb``, ``g`` of the A100's 7 compute slices; HAMi splits
each GPU of a node labelled ``gpu=on`` in ``nvidia.com/gpu`` / ``nvidia.com/gpu.count``.
"""

from __future__ import annotations

from fractions import Fraction

from k8s_factories import node, pod
from test_usage_shapes import gfd, mig_node, shared_node

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.words.gpu_counts import count_text, equivalents, parts_text, whole_gpus


def counted(idx: UsageIndex, name: str) -> tuple[object, object, object, str]:
    n = idx.node(name)
    assert n is not None
    total, used, free = equivalents(n.parts)
    return total, used, free, parts_text(n.parts)


def test_each_kind_of_node_counts_its_physical_gpus():
    idx = UsageIndex()
    # two A10s time-sliced in 4: 8 units of nvidia.com/gpu, 2 GPUs; one replica in use
    idx.apply_node("ADDED", shared_node("ts", "p", 2, 4))
    idx.apply_pod("ADDED", pod("a", 1, "ts", user="alice"))
    assert counted(idx, "ts") == (
        2,
        Fraction(1, 4),
        Fraction(7, 4),
        ("2 time-sliced in 4: 7 of 8 replicas free"),
    )
    # the same, renamed nvidia.com/gpu.shared by the device plugin
    idx.apply_node("ADDED", shared_node("tsr", "p", 1, 2, renamed=True))
    assert counted(idx, "tsr")[:3] == (1, 0, 1)
    # one A10 under MPS in 4
    mps = gfd("NVIDIA-A10", 1, 23028, **{
        "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps",
    })  # fmt: skip
    idx.apply_node("ADDED", node("mps", "p", 4, None, extra_labels=mps))
    assert counted(idx, "mps") == (1, 0, 1, "1 shared by MPS in 4: 4 of 4 replicas free")
    # an A100 cut 3g + 2 x 2g beside a whole A100: 3/7 + 4/7 + 1
    idx.apply_node("ADDED", mig_node("m", "p", {"3g.40gb": 1, "2g.20gb": 2}, whole=1))
    idx.apply_pod("ADDED", pod("b", 0, "m", user="bob", limits={"nvidia.com/mig-2g.20gb": "1"}))
    assert counted(idx, "m") == (
        2,
        Fraction(2, 7),
        Fraction(12, 7),
        ("1 whole + 1 in MIG instances: 2 of 3 instances free"),
    )
    # HAMi: 1 A100-40GB split in 10 on a gpu=on node
    hami = gfd("NVIDIA-A100-SXM4-40GB", 1, 40960, gpu="on")
    idx.apply_node("ADDED", node("h", "p", 10, None, extra_labels=hami))
    assert counted(idx, "h") == (1, 0, 1, "1 in HAMi slices of 10: 10 of 10 slices free")
    # a node of whole GPUs is as before
    idx.apply_node("ADDED", node("w", "p", 8))
    idx.apply_pod("ADDED", pod("c", 3, "w", user="carol"))
    assert counted(idx, "w") == (8, 3, 5, "8 whole")

    # the pool adds its nodes up, whole GPUs apart
    usage = idx.pool_usage("p")
    total, used, _ = equivalents(usage.parts)
    assert total == 2 + 1 + 1 + 2 + 1 + 8
    assert used == Fraction(1, 4) + Fraction(2, 7) + 3
    assert whole_gpus(usage.parts) == {"total": 9, "used": 3, "free": 6}
    assert (usage.gpu_total, usage.gpu_used) == (9, 3)


def test_a_count_reads_with_two_decimals_at_most():
    assert [count_text(v) for v in (17, Fraction(1, 7), Fraction(118, 7), 4.25, 16.0, None)] == [
        "17",
        "0.14",
        "16.86",
        "4.25",
        "16",
        "0",
    ]
