"""Bookings plan the layout (issue 41), in the service on the simulated cluster, over its API.

training-pool has gpu-node-1 and gpu-node-2 (8 whole A100-80GBs each) and gpu-node-mig-1 (one
A100 cut all-balanced: 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb); its file lets the service
re-cut gpu-node-2 among all-disabled (home), all-1g.10gb (56 x 1g.10gb) and all-balanced.
The tests' quotas are changed so that training-pool guarantees 8 GPUs (ml-research 6, alice
2): cutting gpu-node-2 leaves gpu-node-1's 8 whole GPUs for them.

- A booking of 40 x 1g.10gb fits (2 instances now, 58 with gpu-node-2 re-cut); one whole GPU
  booked in the same hour then does not (the re-cut took gpu-node-2's), and is refused with
  what is missing; with the tests' own 14 guaranteed the 40 do not fit at all.
- Three minutes before the window the service re-cuts gpu-node-2 (not before), the simulator's
  MIG manager takes the label, and the members are admitted when the window opens. While the
  window holds, its unused instances do not send the node home; after it ends, they do.

The truth: the simulated cluster's store (the node's labels and allocatable, where pods run),
the service's HTTP answers, and its change log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_kit import T0, delete_pod, start_pod
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.sim import SimCluster

MIG = {"pool": "training-pool", "shape": "mig-1g.10gb"}
RECUT = """
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-1g.10gb, all-balanced]
  unused: 3s
  interval: 1s
"""
# Friday 2027-01-15, 08:30 to 09:30 UTC (T0 is 08:00)
START, END = T0 + 1800, T0 + 5400
LAB = """\
kind: booking
version: v0.1
booking: {name: cs-lab, description: 1g instances for a class}
pool: training-pool
shape: mig-1g.10gb
gpus: 40
groups: [cs-lab]
window: {once: {start: "2027-01-15T08:30", end: "2027-01-15T09:30"}, timezone: UTC}
"""
ONE_WHOLE = """\
kind: booking
version: v0.1
booking: {name: one-whole}
pool: training-pool
gpus: 1
users: [bob]
window: {once: {start: "2027-01-15T09:00", end: "2027-01-15T10:00"}, timezone: UTC}
"""


def labels(cluster: SimCluster, name: str) -> dict[str, str]:
    return cluster.store.get("nodes", None, name)["metadata"]["labels"]


def allocatable(cluster: SimCluster, name: str) -> dict[str, str]:
    return cluster.store.get("nodes", None, name)["status"]["allocatable"]


def where(cluster: SimCluster, pod: str) -> str | None:
    return (cluster.pod("default", pod) or {}).get("spec", {}).get("nodeName")


def recuttable(pools_dir: Path, guaranteed: int = 6, unused: str = "3s") -> None:
    with (pools_dir / "training-pool.yaml").open("a") as f:
        f.write(RECUT.replace("unused: 3s", f"unused: {unused}"))
    quotas = pools_dir / "quotas.yaml"
    text = quotas.read_text()
    assert "ml-research: {guaranteed: 12, limit: 16}" in text
    quotas.write_text(
        text.replace(
            "ml-research: {guaranteed: 12, limit: 16}",
            f"ml-research: {{guaranteed: {guaranteed}, limit: 16}}",
        )
    )


async def recut_service(start_service, pools_dir: Path, db_url: str) -> tuple[Any, ...]:
    """A service on the recuttable pools: it, its cluster, an admin client and its re-cut watch."""
    recuttable(pools_dir)
    service = await start_service(db_url=db_url)
    watch = service.ctx.recut
    assert watch is not None
    return service, service.cluster, service.admin(), watch


async def test_a_booking_of_40_instances_fits_by_re_cutting_and_takes_the_whole_gpus_it_cuts(
    db_url, start_service, pools_dir, now
):
    recuttable(pools_dir)
    service = await start_service(db_url=db_url)
    admin = service.admin()
    # without a re-cut the pool has 2 x 1g.10gb: the booking fits only by cutting gpu-node-2
    assert allocatable(service.cluster, "gpu-node-mig-1")["nvidia.com/mig-1g.10gb"] == "2"
    made = await admin.create_bookings(LAB)
    assert made["created"] == ["cs-lab"]
    with pytest.raises(GPUPoolError) as refused:
        await admin.create_bookings(ONE_WHOLE)
    assert refused.value.status == 409
    assert refused.value.message == (
        "booking does not fit: one-whole (Fri 2027-01-15 09:00\u201310:00 UTC) overlaps cs-lab "
        "(Fri 2027-01-15 08:30\u201309:30 UTC): 9 of 8 whole GPUs booked (1 missing), "
        "counting gpu-node-2 re-cut to all-1g.10gb for the 40 mig-1g.10gb booked"
    )
    # after the lab's hour the whole GPU fits
    later = ONE_WHOLE.replace("T09:00", "T09:30").replace("T10:00", "T10:30")
    assert (await admin.create_bookings(later))["created"] == ["one-whole"]
    names = [b["name"] for b in (await admin.bookings())["bookings"]]
    assert names == ["cs-lab", "one-whole"]


async def test_with_the_guarantees_needing_the_whole_gpus_the_40_do_not_fit(
    db_url, start_service, pools_dir, now
):
    recuttable(pools_dir, guaranteed=12)  # the tests' own quotas: 14 guaranteed
    service = await start_service(db_url=db_url)
    with pytest.raises(GPUPoolError) as refused:
        await service.admin().create_bookings(LAB)
    assert refused.value.status == 409
    assert refused.value.message == (
        "booking does not fit: cs-lab (Fri 2027-01-15 08:30\u201309:30 UTC): 40 of 2 "
        "mig-1g.10gb booked (38 missing); re-cutting gpu-node-2 to all-1g.10gb would offer 58 "
        "but leave 8 of 14 whole GPUs booked or guaranteed"
    )
    assert (await service.admin().bookings())["bookings"] == []


async def test_the_node_is_re_cut_before_the_window_held_through_it_and_home_after(
    db_url, start_service, pools_dir, now
):
    service, cluster, admin, watch = await recut_service(start_service, pools_dir, db_url)
    await admin.create_bookings(LAB)

    async def rounds() -> None:
        for _ in range(2):
            await watch.round()

    # more than the expected re-cut (120 s) and the margin (60 s) ahead: nothing yet
    now[0] = START - 181
    await rounds()
    assert labels(cluster, "gpu-node-2").get("nvidia.com/mig.config", "all-disabled") == (
        "all-disabled"
    )
    # within them: gpu-node-2 is re-cut, and the MIG manager and device plugin make 56
    now[0] = START - 179
    await rounds()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-1g.10gb"

    def cut() -> bool:
        return allocatable(cluster, "gpu-node-2").get("nvidia.com/mig-1g.10gb") == "56"

    await async_wait_for(cut, what="gpu-node-2 cut into 56 x 1g.10gb", timeout=30, interval=0.1)
    await service.settled()
    await rounds()
    words = [c.what for c in service.ctx.changes.latest()]
    assert any(
        w.startswith(
            "gpu-node-2 re-cut to all-1g.10gb at 08:27 UTC for booking cs-lab: 40 "
            "1g.10gb instances from 08:30 UTC"
        )
        for w in words
    ), words

    # the window opens; its instances stand unused for minutes: the node is not sent home
    now[0] = START + 300
    await rounds()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-1g.10gb"

    # members are admitted in it, on gpu-node-2's instances among others
    answers: list[dict[str, Any]] = []
    for i in range(4):
        a = await admin.admit(user=f"student{i}", groups=["cs-lab"], pools=[MIG], gpus=1)
        assert a["pool"] == "training-pool" and a["shape"] == "mig-1g.10gb", a
        await start_pod(cluster, a, f"jupyter-student{i}")
        answers.append(a)
    on = sorted(where(cluster, f"jupyter-student{i}") or "" for i in range(4))
    assert "gpu-node-2" in on, on

    # the window ends and the servers with it: the instances stand unused, and go home
    now[0] = END + 60
    for i in range(4):
        await delete_pod(cluster, f"jupyter-student{i}")
    await service.settled()
    await rounds()
    now[0] += 5
    await rounds()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-disabled"

    def home() -> bool:
        return allocatable(cluster, "gpu-node-2").get("nvidia.com/gpu") == "8"

    await async_wait_for(home, what="gpu-node-2 back to 8 whole GPUs", timeout=30, interval=0.1)
    words = [c.what for c in service.ctx.changes.latest()]
    assert any(
        w.startswith("gpu-node-2 back to all-disabled: its instances stood unused") for w in words
    ), words


async def test_a_node_running_a_gpu_server_is_not_re_cut_for_a_booking_until_it_ends(
    db_url, start_service, pools_dir, now
):
    service, cluster, admin, watch = await recut_service(start_service, pools_dir, db_url)
    await admin.create_bookings(LAB)
    # two researchers fill the pool's two 8-GPU nodes with whole-GPU servers
    for user in ("dave", "erin"):
        a = await admin.admit(user=user, groups=["ml-research"], pools=["training-pool"], gpus=8)
        await start_pod(cluster, a, f"jupyter-{user}")
    on = {where(cluster, f"jupyter-{u}"): u for u in ("dave", "erin")}
    assert sorted(n or "" for n in on) == ["gpu-node-1", "gpu-node-2"], on
    await service.settled()

    now[0] = START - 179
    for _ in range(2):
        await watch.round()
    assert labels(cluster, "gpu-node-2").get("nvidia.com/mig.config", "all-disabled") == (
        "all-disabled"
    )
    # the server on gpu-node-2 ends: the next round re-cuts it for the booking
    await delete_pod(cluster, f"jupyter-{on['gpu-node-2']}")
    await service.settled()
    await watch.round()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-1g.10gb"
    assert labels(cluster, "gpu-node-1").get("nvidia.com/mig.config", "all-disabled") == (
        "all-disabled"
    )


async def test_a_booking_made_within_the_lead_is_planned_at_the_next_round(
    db_url, start_service, pools_dir, now
):
    # a round has just read the pool's bookings when the lab is booked, at the same moment
    _service, cluster, admin, watch = await recut_service(start_service, pools_dir, db_url)
    now[0] = START - 179
    later = ONE_WHOLE.replace("T09:00", "T09:30").replace("T10:00", "T10:30")
    await admin.create_bookings(later)
    await watch.round()
    assert labels(cluster, "gpu-node-2").get("nvidia.com/mig.config", "all-disabled") == (
        "all-disabled"
    )
    await admin.create_bookings(LAB)
    await watch.round()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-1g.10gb"


async def test_a_node_cut_otherwise_goes_home_before_a_whole_gpu_booking_that_needs_it(
    db_url, start_service, pools_dir, now
):
    # gpu-node-2 was cut into 1g.10gb instances (by an admin); eight whole GPUs booked from
    # 08:30 beside the 8 guaranteed need it whole: it goes home before the window, and the
    # line does not cut it again while the window holds
    recuttable(pools_dir, unused="30m")
    service = await start_service(db_url=db_url)
    cluster, admin, watch = service.cluster, service.admin(), service.ctx.recut
    assert watch is not None
    await service.ctx.kube.patch_node_labels("gpu-node-2", {"nvidia.com/mig.config": "all-1g.10gb"})

    def cut() -> bool:
        return allocatable(cluster, "gpu-node-2").get("nvidia.com/mig-1g.10gb") == "56"

    await async_wait_for(cut, what="gpu-node-2 cut into 56 x 1g.10gb", timeout=30, interval=0.1)
    await service.settled()
    eight = ONE_WHOLE.replace("gpus: 1", "gpus: 8").replace("T09:00", "T08:30")
    assert (await admin.create_bookings(eight))["created"] == ["one-whole"]
    now[0] = START - 181
    await watch.round()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-1g.10gb"
    now[0] = START - 179
    await watch.round()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-disabled"

    def home() -> bool:
        return allocatable(cluster, "gpu-node-2").get("nvidia.com/gpu") == "8"

    await async_wait_for(home, what="gpu-node-2 back to 8 whole GPUs", timeout=30, interval=0.1)
    await service.settled()
    words = [c.what for c in service.ctx.changes.latest()]
    assert any(
        w.startswith(
            "gpu-node-2 back to all-disabled for booking one-whole: 8 whole GPUs from 08:30 UTC"
        )
        for w in words
    ), words
    # in the window, three students ask for 1g.10gb: two get gpu-node-mig-1's, one waits, and
    # gpu-node-2 is not cut for it
    now[0] = START + 60
    answers = [
        await admin.admit(user=f"student{i}", pools=[MIG], gpus=1, queue=True) for i in range(3)
    ]
    assert [a.get("queued", False) for a in answers] == [False, False, True]
    for _ in range(2):
        await watch.round()
    assert labels(cluster, "gpu-node-2")["nvidia.com/mig.config"] == "all-disabled"
