"""A node's shapes, read from label and allocatable sets as GFD and the device plugins write them.

The label sets follow what NVIDIA's GPU Feature Discovery writes (k8s-device-plugin
``internal/lm/resource.go``, ``mig-strategy.go``), the MIG memory figures NVML's A100 and A30
profiles give (go-nvml ``pkg/nvml/mock/shared/gpus/``), and what HAMi's chart sets; see
``docs/shapes.md`` for each source.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from jupyter_gpupool.core.usage.records import read_node
from jupyter_gpupool.core.usage.shapes import (
    HAMI,
    MIG,
    MPS,
    TIME_SLICING,
    WHOLE,
    hami_equivalent,
    node_offer,
    parse_profile,
    total_slices,
)

BASE_ALLOC = {"cpu": "64", "memory": "527952700Ki", "pods": "110", "ephemeral-storage": "1Ti"}


def gfd(product: str, count: int, memory: int, **extra: str) -> dict[str, str]:
    """The labels GFD writes for the full GPUs of one model (the sharing-free defaults)."""
    labels = {
        "kubernetes.io/hostname": "gpu-node",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.memory": str(memory),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/mig.capable": "false",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/cuda.driver-version.full": "550.90.07",
    }
    labels.update(extra)
    return labels


def mig_labels(model: str, profile: str, count: int, memory: int, slices: int, sms: int):
    """GFD's labels for one MIG profile under the mixed strategy."""
    key = f"nvidia.com/mig-{profile}"
    return {
        f"{key}.count": str(count),
        f"{key}.product": f"{model}-MIG-{profile}",
        f"{key}.memory": str(memory),
        f"{key}.replicas": "1",
        f"{key}.sharing-strategy": "none",
        f"{key}.multiprocessors": str(sms),
        f"{key}.slices.gi": str(slices),
        f"{key}.slices.ci": str(slices),
        f"{key}.engines.copy": str(slices),
    }


def by_id(offer):
    return {o.shape.id: o for o in offer.shapes}


def total(offer) -> Fraction:
    return sum((o.equivalents for o in offer.shapes), Fraction(0))


# --- whole GPUs ----------------------------------------------------------------------------------


def test_a_node_with_no_gfd_labels_offers_whole_gpus_as_today():
    labels = {"kubernetes.io/hostname": "n1", "runwhere.ai/pool": "training"}
    alloc = {**BASE_ALLOC, "nvidia.com/gpu": "4"}
    offer = node_offer(labels, alloc)
    assert offer.admits and offer.repartitioning is None
    [whole] = offer.shapes
    assert whole.count == 4
    assert whole.shape.kind == WHOLE and whole.shape.id == "whole"
    assert whole.shape.resource == "nvidia.com/gpu"
    assert whole.shape.equivalent == 1 and whole.equivalents == 4
    assert whole.shape.model is None and whole.shape.memory_mib is None
    # the same count and type the usage index reads (its "" for no type is None here)
    record = read_node("n1", "training", {"labels": labels}, {"status": {"allocatable": alloc}})
    assert (record.gpu_total, record.gpu_type or None) == (whole.count, whole.shape.model)


@pytest.mark.parametrize(
    "labels",
    [
        {"runwhere.ai/gpu-type": "A100-80G"},
        gfd("NVIDIA-A100-SXM4-80GB", 8, 81920),
        {**gfd("NVIDIA-A100-SXM4-80GB", 8, 81920), "runwhere.ai/gpu-type": "A100-80G"},
    ],
)
def test_whole_gpus_keep_todays_type_and_count(labels):
    alloc = {**BASE_ALLOC, "nvidia.com/gpu": "8"}
    [whole] = node_offer(labels, alloc).shapes
    record = read_node("n", "p", {"labels": labels}, {"status": {"allocatable": alloc}})
    expected_type = labels.get("runwhere.ai/gpu-type") or labels.get("nvidia.com/gpu.product")
    assert whole.shape.kind == WHOLE
    assert (whole.count, whole.shape.model) == (8, expected_type)
    assert (record.gpu_total, record.gpu_type) == (8, expected_type)


def test_gfd_memory_is_the_whole_gpus_memory():
    offer = node_offer(gfd("NVIDIA-A100-SXM4-80GB", 8, 81920), {"nvidia.com/gpu": "8"})
    assert offer.shapes[0].shape.memory_mib == 81920


def test_a_cpu_node_offers_nothing():
    assert node_offer({"kubernetes.io/hostname": "cpu"}, BASE_ALLOC).shapes == ()
    assert node_offer({}, {"nvidia.com/gpu": "0"}).shapes == ()


# --- MIG -----------------------------------------------------------------------------------------

A100_80 = "NVIDIA-A100-SXM4-80GB"


def a100_80_mixed():
    """One A100-80GB in MIG mode, mixed strategy: 3g.40gb + 2 x 2g.20gb (all 7 slices)."""
    labels = gfd(A100_80, 1, 81920, **{"nvidia.com/mig.capable": "true"})
    labels.update(
        {
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": "custom-3g-2x2g",
            "nvidia.com/mig.config.state": "success",
            # the MIG-enabled GPU's own labels carry no sharing (replicas 0)
            "nvidia.com/gpu.replicas": "0",
        }
    )
    labels.update(mig_labels(A100_80, "3g.40gb", 1, 40192, 3, 42))
    labels.update(mig_labels(A100_80, "2g.20gb", 2, 19968, 2, 28))
    alloc = {
        **BASE_ALLOC,
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-3g.40gb": "1",
        "nvidia.com/mig-2g.20gb": "2",
    }
    return labels, alloc


def test_mig_mixed_a100_80gb_offers_each_profile_by_its_compute_slices():
    offer = node_offer(*a100_80_mixed())
    assert offer.admits
    shapes = by_id(offer)
    assert set(shapes) == {"mig-3g.40gb", "mig-2g.20gb"}  # no whole GPU left
    big, small = shapes["mig-3g.40gb"], shapes["mig-2g.20gb"]
    assert (big.count, small.count) == (1, 2)
    assert big.shape.kind == small.shape.kind == MIG
    assert big.shape.resource == "nvidia.com/mig-3g.40gb"
    assert small.shape.resource == "nvidia.com/mig-2g.20gb"
    assert big.shape.profile == "3g.40gb" and big.shape.model == A100_80
    assert (big.shape.memory_mib, small.shape.memory_mib) == (40192, 19968)
    assert big.shape.equivalent == Fraction(3, 7)
    assert small.shape.equivalent == Fraction(2, 7)
    assert "memory and faults" in big.shape.isolates
    # the whole card, counted in its pieces
    assert total(offer) == 1


def test_mig_media_extension_profiles_are_written_with_a_dot():
    """NVML names 1g.10gb+me; the device plugin advertises nvidia.com/mig-1g.10gb.me."""
    labels = gfd(A100_80, 1, 81920, **{"nvidia.com/mig.strategy": "mixed"})
    labels.update(mig_labels(A100_80, "1g.10gb.me", 1, 9856, 1, 14))
    labels.update(mig_labels(A100_80, "1g.10gb", 6, 9856, 1, 14))
    alloc = {"nvidia.com/mig-1g.10gb.me": "1", "nvidia.com/mig-1g.10gb": "6"}
    shapes = by_id(node_offer(labels, alloc))
    me = shapes["mig-1g.10gb.me"]
    assert me.count == 1 and me.shape.resource == "nvidia.com/mig-1g.10gb.me"
    assert me.shape.profile == "1g.10gb.me" and me.shape.equivalent == Fraction(1, 7)
    assert shapes["mig-1g.10gb"].count == 6
    assert me.shape.memory_mib == 9856


def test_mig_mixed_beside_whole_gpus():
    """Mixed strategy on a 2-GPU node: one GPU in MIG mode, one whole."""
    labels, alloc = a100_80_mixed()
    labels.update({"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "1"})
    alloc["nvidia.com/gpu"] = "1"
    shapes = by_id(node_offer(labels, alloc))
    assert shapes["whole"].count == 1 and shapes["whole"].shape.model == A100_80
    assert total(node_offer(labels, alloc)) == 2


def test_mig_single_a100_40gb_counts_mig_devices_on_nvidia_com_gpu():
    """Eight A100-40GB, each cut into seven 1g.5gb: GFD overrides product, count and memory."""
    labels = gfd(
        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        56,
        4864,
        **{
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.config": "all-1g.5gb",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/gpu.multiprocessors": "14",
            "nvidia.com/gpu.slices.gi": "1",
            "nvidia.com/gpu.slices.ci": "1",
        },
    )
    offer = node_offer(labels, {**BASE_ALLOC, "nvidia.com/gpu": "56"})
    assert offer.admits
    [mig] = offer.shapes
    assert mig.count == 56
    assert mig.shape.kind == MIG and mig.shape.id == "mig-1g.5gb"
    assert mig.shape.resource == "nvidia.com/gpu"
    assert mig.shape.model == "NVIDIA-A100-SXM4-40GB" and mig.shape.profile == "1g.5gb"
    assert mig.shape.memory_mib == 4864
    assert mig.shape.equivalent == Fraction(1, 7)
    assert total(offer) == 8


def test_mig_single_invalid_admits_nothing():
    labels = gfd("NVIDIA-A100-SXM4-40GB-MIG-INVALID", 0, 0, **{"nvidia.com/mig.strategy": "single"})
    offer = node_offer(labels, {"nvidia.com/gpu": "0"})
    assert offer.shapes == () and not offer.admits
    assert "not all partitioned alike" in (offer.problem or "")


def test_a30_has_four_compute_slices():
    model = "NVIDIA-A30"
    labels = gfd(model, 1, 24576, **{"nvidia.com/mig.strategy": "mixed"})
    labels.update(mig_labels(model, "1g.6gb", 4, 5836, 1, 14))
    [one] = node_offer(labels, {"nvidia.com/mig-1g.6gb": "4"}).shapes
    assert one.shape.equivalent == Fraction(1, 4) and one.equivalents == 1


def test_time_sliced_mig_devices_divide_their_instance():
    labels, alloc = a100_80_mixed()
    labels["nvidia.com/mig-2g.20gb.replicas"] = "2"
    labels["nvidia.com/mig-2g.20gb.sharing-strategy"] = "time-slicing"
    labels["nvidia.com/mig-2g.20gb.product"] = f"{A100_80}-MIG-2g.20gb-SHARED"
    alloc["nvidia.com/mig-2g.20gb"] = "4"
    shapes = by_id(node_offer(labels, alloc))
    shared = shapes["mig-2g.20gb-shared-2"]
    assert shared.count == 4 and shared.shape.equivalent == Fraction(1, 7)
    assert shared.shape.model == A100_80


@pytest.mark.parametrize(
    ("profile", "parsed"),
    [
        ("1g.5gb", (1, 1, 5)),
        ("3g.40gb", (3, 3, 40)),
        ("1g.10gb.me", (1, 1, 10)),
        ("1g.10gb+me", (1, 1, 10)),
        ("1c.3g.40gb", (1, 3, 40)),
        ("7g.80gb", (7, 7, 80)),
        ("gpu", None),
        ("4c.3g.40gb", None),
        ("3g.40", None),
    ],
)
def test_profiles(profile, parsed):
    assert parse_profile(profile) == parsed


def test_total_slices():
    assert total_slices("NVIDIA-A100-SXM4-80GB") == 7
    assert total_slices("NVIDIA-H100-80GB-HBM3") == 7
    assert total_slices("NVIDIA-A30") == 4
    assert total_slices(None) == 7


# --- shared GPUs ---------------------------------------------------------------------------------

A10 = "NVIDIA-A10"


def test_time_sliced_a10_with_four_replicas():
    labels = gfd(
        f"{A10}-SHARED",
        1,
        23028,
        **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    )
    [shared] = node_offer(labels, {**BASE_ALLOC, "nvidia.com/gpu": "4"}).shapes
    assert shared.count == 4
    assert shared.shape.kind == TIME_SLICING and shared.shape.id == "shared-4"
    assert shared.shape.resource == "nvidia.com/gpu"
    assert shared.shape.model == A10  # "-SHARED" is GFD's marker, not the model
    assert shared.shape.equivalent == Fraction(1, 4) and shared.equivalents == 1
    assert shared.shape.memory_mib is None  # nothing of the memory is its own
    assert shared.shape.isolates.startswith("nothing")


def test_time_sliced_a10_renamed_to_gpu_shared():
    """renameByDefault: the resource is nvidia.com/gpu.shared, and the product has no -SHARED."""
    labels = gfd(
        A10,
        1,
        23028,
        **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    )
    alloc = {**BASE_ALLOC, "nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "4"}
    [shared] = node_offer(labels, alloc).shapes
    assert shared.shape.resource == "nvidia.com/gpu.shared"
    assert shared.shape.id == "shared-4" and shared.count == 4
    assert shared.shape.model == A10 and shared.shape.equivalent == Fraction(1, 4)


def test_time_slicing_from_a_gfd_without_the_strategy_label():
    labels = gfd(f"{A10}-SHARED", 1, 23028, **{"nvidia.com/gpu.replicas": "4"})
    del labels["nvidia.com/gpu.sharing-strategy"]
    [shared] = node_offer(labels, {"nvidia.com/gpu": "4"}).shapes
    assert shared.shape.kind == TIME_SLICING


def test_mps_l4_with_four_replicas_each_gets_a_quarter():
    labels = gfd(
        "NVIDIA-L4-SHARED",
        2,
        23034,
        **{
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "mps",
            "nvidia.com/mps.capable": "true",
        },
    )
    [mps] = node_offer(labels, {**BASE_ALLOC, "nvidia.com/gpu": "8"}).shapes
    assert mps.shape.kind == MPS and mps.shape.id == "mps-4"
    assert mps.count == 8 and mps.equivalents == 2
    assert mps.shape.model == "NVIDIA-L4"
    assert mps.shape.memory_mib == 23034 // 4
    assert mps.shape.equivalent == Fraction(1, 4)
    assert "share of memory and compute" in mps.shape.isolates


def test_mps_renamed():
    labels = gfd(
        "NVIDIA-L4",
        2,
        23034,
        **{"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps"},
    )
    [mps] = node_offer(labels, {"nvidia.com/gpu.shared": "8"}).shapes
    assert (mps.shape.kind, mps.shape.resource, mps.count) == (MPS, "nvidia.com/gpu.shared", 8)


# --- HAMi ----------------------------------------------------------------------------------------


def test_hami_node_splits_each_gpu_in_ten():
    labels = gfd("Tesla-V100-PCIE-32GB", 2, 32768, gpu="on")
    [hami] = node_offer(labels, {**BASE_ALLOC, "nvidia.com/gpu": "20"}).shapes
    assert hami.shape.kind == HAMI and hami.shape.id == "hami-10"
    assert hami.count == 20 and hami.equivalents == 2
    assert hami.shape.resource == "nvidia.com/gpu"
    assert hami.shape.memory_mib == 3276
    assert hami.shape.equivalent == Fraction(1, 10)
    assert "user space" in hami.shape.isolates


def test_hami_without_gfd_assumes_the_default_split():
    [hami] = node_offer({"gpu": "on"}, {"nvidia.com/gpu": "40"}).shapes
    assert hami.shape.id == "hami-10" and hami.equivalents == 4


def test_hami_server_counts_its_memory_share():
    assert hami_equivalent(8192, 32768) == Fraction(1, 4)
    assert hami_equivalent(65536, 32768) == 1
    with pytest.raises(ValueError):
        hami_equivalent(1024, 0)


# --- re-partitioning ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ("pending", "MIG re-partition pending"),
        ("rebooting", "rebooting to change MIG mode"),
        ("failed", "MIG re-partition failed"),
    ],
)
def test_a_node_being_repartitioned_admits_nothing_and_says_why(state, words):
    labels, alloc = a100_80_mixed()
    labels["nvidia.com/mig.config"] = "all-1g.10gb"
    labels["nvidia.com/mig.config.state"] = state
    offer = node_offer(labels, alloc)
    assert not offer.admits
    assert offer.repartitioning == words
    # what still runs there is still listed, for the pages
    assert offer.count("mig-3g.40gb") == 1


def test_success_is_not_repartitioning():
    labels, alloc = a100_80_mixed()
    assert node_offer(labels, alloc).admits
    labels.pop("nvidia.com/mig.config.state")
    assert node_offer(labels, alloc).admits
