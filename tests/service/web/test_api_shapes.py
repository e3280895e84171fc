"""A pool's shapes in ``GET api/v1/pools`` and ``GET api/v1/pools/NAME``, through the API on the
simulated demo cluster: training-pool's whole A100s (and, after them, its MIG node's
instances)."""

from __future__ import annotations

from service_kit import start_pod


async def test_an_ordinary_pool_lists_its_whole_gpus_with_free_counts(service):
    admin = service.admin()
    pools = {p["name"]: p for p in await admin.pools()}
    whole, *mig = pools["training-pool"]["shapes"]
    assert [s["id"] for s in mig] == ["mig-3g.40gb", "mig-2g.20gb", "mig-1g.10gb"]
    assert whole == {
        "id": "whole",
        "name": None,
        "kind": "whole",
        "resource": "nvidia.com/gpu",
        "model": "A100-80G",
        "memory_mib": 81920,  # the simulator writes GFD's nvidia.com/gpu.memory
        "equivalent": "1",
        "equivalent_gpus": 1.0,
        "isolates": "everything: the whole GPU is the server's",
        "total": 16,
        "free": 16,
        "largest_free": 8,
        "text": "A100-80G whole: 16 free (largest 8 on one node)",
    }
    assert pools["compute-pool"]["shapes"] == []  # CPU nodes offer no shape

    # an admission's reservation holds GPUs at once, then its running pod does
    a = await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=3)
    for when in ("reserved", "running"):
        row = next(p for p in await admin.pools() if p["name"] == "training-pool")
        whole = row["shapes"][0]
        assert (whole["total"], whole["free"], whole["largest_free"]) == (16, 13, 8), when
        assert (whole["free"], whole["largest_free"]) == (
            row["gpu_available"],
            row["largest_free_block"],
        )
        assert whole["text"] == "A100-80G whole: 13 free (largest 8 on one node)"
        if when == "reserved":
            await start_pod(service.cluster, a, "bob-nb")
            await service.cluster.wait_for(
                lambda: service.ctx.state.reservations.get(a["id"]) is None
            )
    # the single pool's row carries the same list
    detail = await admin.pool("training-pool")
    assert detail["shapes"] == row["shapes"]
