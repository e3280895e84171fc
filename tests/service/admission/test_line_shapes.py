"""The line takes shaped requests (issue 29): a MIG instance asked of a pool whose GPUs are all
cut into instances waits in line when none is free and is admitted when one comes back; a shape
the pool never offers, or whole GPUs in such a pool, are refused at once instead of waiting
forever.

Truth from outside the service: the simulator's node (a single A100-80GB cut into seven
1g.10gb instances) and the answers a client gets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shaped_cluster import NODES, one_pool_dir, spec_of
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError

POOL = "mig-pool"
ONE_G = {"pool": POOL, "shape": "mig-1g.10gb"}


@pytest.fixture
def sim_cluster_spec():
    return spec_of(NODES)


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    return one_pool_dir(tmp_path, POOL)


async def test_a_mig_instance_waits_in_line_and_is_admitted_when_one_comes_back(start_service):
    service = await start_service()
    admin = service.admin()
    held = [await admin.admit(user=f"u{i}", groups=[], pools=[ONE_G], gpus=1) for i in range(7)]
    assert {a["node"] for a in held} == {"small-node"}
    waiting = await admin.admit(user="alice", groups=[], pools=[ONE_G], gpus=1, queue=True)
    assert waiting["queued"] and waiting["position"] == 1, waiting
    assert waiting["entries"] == [ONE_G]
    await admin.release(held[0]["id"])

    async def admitted() -> bool:
        return (await admin.admission(waiting["id"]))["state"] == "admitted"

    await async_wait_for(admitted, what="alice admitted from the line", timeout=15)
    answer = await admin.admission(waiting["id"])
    assert (answer["shape"], answer["node"]) == ("mig-1g.10gb", "small-node")


@pytest.mark.parametrize(
    "entry, gpus, says",
    [
        ({"pool": POOL, "shape": "mig-3g.40gb"}, 1, "mig-pool: this pool has no mig-3g.40gb"),
        (POOL, 1, "mig-pool: its largest node has 0 GPUs, fewer than the 1 GPU asked for"),
    ],
)
async def test_what_the_pool_never_offers_is_refused_not_queued(start_service, entry, gpus, says):
    service = await start_service()
    with pytest.raises(GPUPoolError) as refused:
        await service.admin().admit(user="alice", groups=[], pools=[entry], gpus=gpus, queue=True)
    assert refused.value.status == 409
    assert says in str(refused.value)
