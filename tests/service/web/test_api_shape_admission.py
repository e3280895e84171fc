"""Admitting a shape through the API (issue 29): ``pools`` entries ``{"pool", "shape"}``, the 201
saying what the server got, the pod made of its overrides scheduled by the simulator onto a node
with that device, quotas counted in GPU-equivalents, and a shaped reservation and place in line
that survive a restart.

Truth from outside the service: the simulator's scheduler (which node it binds the pod to, by
the resources the pod asks for), the database's rows, and the cluster file the test writes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from service_kit import start_pod
from shaped_cluster import one_pool_dir, spec_of
from sqlrows import sql
from test_api_partitioned_shapes import NODES, POOL

from jupyter_gpupool.cli import main
from jupyter_gpupool.client import AdmissionRejected, GPUPoolError
from jupyter_gpupool.core.words.launch_options import PoolChoice, pool_status, quota_text

MIG = {"pool": POOL, "shape": "mig-3g.40gb"}
SHARED = {"pool": POOL, "shape": "shared-4"}


@pytest.fixture
def sim_cluster_spec():
    return spec_of(NODES)


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    # each user: at most one GPU-equivalent here
    quota = {"borrowing": False, "user-default": {"guaranteed": 1, "limit": 1}}
    return one_pool_dir(tmp_path, POOL, quota=quota)


def limits(admission: dict) -> dict:
    return admission["overrides"]["resources"]["limits"]


async def test_a_mig_instance_and_a_replica_are_admitted_and_scheduled_where_they_are(
    start_service,
):
    service = await start_service()
    admin = service.admin()
    mig = await admin.admit(user="alice", groups=[], pools=[MIG], gpus=1)
    assert (mig["shape"], mig["resource"], mig["gpu_equivalents"]) == (
        "mig-3g.40gb",
        "nvidia.com/mig-3g.40gb",
        "3/7",
    )
    assert mig["shape_text"] == "MIG 3g.40gb of an A100-80G"
    assert limits(mig) == {"nvidia.com/mig-3g.40gb": "1"}
    pod = await start_pod(service.cluster, mig, "alice-nb")
    assert pod["spec"]["nodeName"] == "mig-node"  # the simulator's scheduler, by the resource

    shared = await admin.admit(user="alice", groups=[], pools=[SHARED], gpus=1)
    assert (shared["shape"], shared["gpu_equivalents"]) == ("shared-4", "1/4")
    assert shared["shape_text"] == "A10 shared ¼ (time-sliced)"
    pod = await start_pod(service.cluster, shared, "alice-shared")
    assert pod["spec"]["nodeName"] == "shared-node"

    # alice holds 3/7 + 1/4 = 0.68 of her 1 GPU: another 3g (3/7) is over it; 1/4 is not
    with pytest.raises(AdmissionRejected) as over:
        await admin.admit(user="alice", groups=[], pools=[MIG], gpus=1)
    assert "you use 0.68 of your limit of 1 GPU" in str(over.value)
    # the form's view: no whole GPU left in her quota, but room for a replica (1/4), not a 3g
    options = await service.user("alice").launch_options()
    [row] = [p for p in options["pools"] if p["name"] == POOL]
    assert (row["quota"]["within_quota"], row["quota"]["available"]) == (0, 0)
    assert row["quota"]["shapes"] == {"mig-3g.40gb": "none", "shared-4": "within"}
    choice = PoolChoice.from_json(row)
    assert pool_status(choice) == ("free", "your quota has room for shared-4 only")
    # in GPU-equivalents: 1 - 3/7 - 1/4 = 9/28 of a GPU is left within her quota
    assert round(row["quota"]["within_equivalents"], 3) == round(1 - 3 / 7 - 1 / 4, 3)
    assert quota_text(choice) == "0.32 GPUs (0 whole) within quota; room for shared-4"
    await admin.admit(user="alice", groups=[], pools=[SHARED], gpus=1)
    quotas = await service.user("alice").quotas()
    alice = quotas["pools"][POOL]["users"]["alice"]
    assert alice["used"] + alice["reserved"] == pytest.approx(3 / 7 + 2 / 4, abs=0.001)

    # a whole-GPU request never lands on the time-sliced node: the pool's one whole A100 only
    whole = await admin.admit(user="bob", groups=[], pools=[POOL], gpus=1)
    assert (whole["shape"], whole["node"], limits(whole)) == (
        "whole",
        "mig-node",
        {"nvidia.com/gpu": "1"},
    )
    with pytest.raises(AdmissionRejected):
        await admin.admit(user="carol", groups=[], pools=[POOL], gpus=1)


@pytest.mark.parametrize(
    "entry, says",
    [
        ({"pool": POOL, "shape": "mig 3g"}, "is not a shape id"),
        ({"shape": "mig-3g.40gb"}, "pools[0] needs a pool"),
        ({"pool": POOL, "size": 1}, "size"),
        ({"pool": 7}, "pools[0].pool must be a string"),
    ],
)
async def test_bad_pool_entries_are_refused_with_what_is_wrong(start_service, entry, says):
    service = await start_service()
    with pytest.raises(GPUPoolError) as refused:
        await service.admin().admit(user="alice", groups=[], pools=[entry], gpus=1)
    assert refused.value.status == 400
    assert says in str(refused.value)


async def test_a_shaped_reservation_and_place_in_line_survive_a_restart(db_url, start_service):
    service = await start_service(db_url=db_url)
    admin = service.admin()
    first = await admin.admit(user="alice", groups=[], pools=[MIG], gpus=1)
    second = await admin.admit(user="bob", groups=[], pools=[MIG], gpus=1)
    assert {first["node"], second["node"]} == {"mig-node"}
    queued = await admin.admit(user="carol", groups=[], pools=[MIG], gpus=1, queue=True)
    assert queued["queued"]
    assert sorted(sql(db_url, "SELECT resource, equivalents FROM reservations")) == [
        ("nvidia.com/mig-3g.40gb", "3/7"),
        ("nvidia.com/mig-3g.40gb", "3/7"),
    ]
    await service.stop()

    again = await start_service(db_url=db_url)
    held = {r["id"]: r for r in await again.admin().admissions()}
    assert set(held) == {first["id"], second["id"]}
    assert held[first["id"]]["resource"] == "nvidia.com/mig-3g.40gb"
    assert held[first["id"]]["gpu_equivalents"] == "3/7"
    [line] = (await again.admin().queue())["queue"]
    assert line["id"] == queued["id"]
    assert line["entries"] == [{"pool": POOL, "shape": "mig-3g.40gb"}]
    # both 3g instances are still held: dave gets none
    with pytest.raises(AdmissionRejected):
        await again.admin().admit(user="dave", groups=[], pools=[MIG], gpus=1)


async def test_validate_with_nodes_finds_a_shape_no_node_offers(start_service, tmp_path, capsys):
    """``gpupool validate --nodes`` holds a pool file's ``shapes`` to what the service sees on the
    pool's nodes: a shape none offers is a problem at its line; the shapes they offer pass."""
    service = await start_service()
    good = tmp_path / "good.yaml"
    good.write_text(
        f"kind: pool\nversion: v0.1\npool: {{name: {POOL}}}\n"
        "shapes:\n  - {id: mig-3g.40gb}\n  - {id: shared-4}\n  - {id: whole}\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("shared-4", "mig-7g.80gb"))
    connect = ["--url", service.url, "--token", service.hub.admin()]

    status = await asyncio.to_thread(main, ["validate", "-f", str(good), "--nodes", *connect])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "ok: the shapes the pools name are on their nodes" in out
    status = await asyncio.to_thread(main, ["validate", "-f", str(bad), "--nodes", *connect])
    out, err = capsys.readouterr()
    assert status == 1
    assert err.strip() == (
        f"{bad}:6: shapes[1].id: no node of pool {POOL} offers mig-7g.80gb "
        "(its nodes offer mig-3g.40gb, shared-4, whole)"
    )
    # without --nodes, the file alone is valid
    assert await asyncio.to_thread(main, ["validate", "-f", str(bad)]) == 0


BOOKING = """
kind: booking
version: v0.1
booking: {name: cs231}
pool: slice-pool
shape: mig-3g.40gb
gpus: 1
groups: [cs231]
window:
  weekly: {days: [tue], start: "10:00", end: "12:00"}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
"""


async def test_the_service_keeps_a_booking_sent_with_the_pools(start_service):
    """A booking document sent to ``POST api/v1/pools`` is kept as a booking (issue 30), not
    made into a pool; its MIG shape is one the pool's nodes have."""
    service = await start_service()
    answer = await service.admin().apply_pools(BOOKING)
    assert answer["bookings_created"] == ["cs231"] and answer["created"] == []
    [booked] = (await service.admin().bookings())["bookings"]
    assert (booked["pool"], booked["shape"], booked["gpus"]) == (POOL, "mig-3g.40gb", 1)
    names = {p["name"] for p in await service.admin().pools()}
    assert POOL in names and "cs231" not in names
