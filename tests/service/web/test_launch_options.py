"""``GET api/v1/launch-options``: what one user may choose on the spawn form."""

from __future__ import annotations

import pytest
from service_kit import start_pod
from test_api import NEW_POOL

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.core.words.launch_options import Catalog, pool_status


def by_name(answer):
    return {p["name"]: p for p in answer["pools"]}


async def test_the_spawner_asks_for_a_user_with_their_groups(service):
    admin = service.admin()
    await admin.apply_pools(NEW_POOL)  # t4-pool: ml-ops only
    answer = await admin.launch_options(user="alice", groups=["ml-research"])
    assert (answer["user"], answer["groups"], answer["max_gpus"]) == (
        "alice",
        ["ml-research"],
        1024,
    )
    assert answer["default_pools"] == ["training-pool", "inference-pool", "dev-pool"]
    assert answer["restricted_pools"] == ["t4-pool"]
    pools = by_name(answer)
    # the spawn form's order, which every client keeps: the default order, then the others
    assert list(pools) == ["training-pool", "inference-pool", "dev-pool", "compute-pool", "default"]
    training = pools["training-pool"]
    # the pool row of GET api/v1/pools, plus the biggest node and the quota headroom
    assert training["gpu_total"] == 17 and training["largest_free_block"] == 8  # 16 whole + 1 MIG
    assert training["whole_gpus"]["total"] == 16
    assert training["largest_node_gpus"] == 8
    # ml-research guarantees 12, alice's own limit is 8; one instance of each of the MIG node's
    # shapes fits within the guarantee too
    assert training["quota"] == {
        "managed": True,
        "borrowing": True,
        "within_quota": 8,
        "available": 8,
        "within_equivalents": 8,
        "shapes": {"mig-1g.10gb": "within", "mig-2g.20gb": "within", "mig-3g.40gb": "within"},
    }
    assert pools["compute-pool"]["largest_node_gpus"] == 0


async def test_the_pools_come_in_the_users_default_order_then_the_registrys(service):
    dave = await service.admin().launch_options(user="dave", groups=[])  # the fallback order
    assert dave["default_pools"] == ["dev-pool", "default", "compute-pool"]
    names = [p["name"] for p in dave["pools"]]
    assert names == ["dev-pool", "default", "compute-pool", "inference-pool", "training-pool"]


async def test_headroom_follows_usage_and_the_rules_of_admission(service):
    admin = service.admin()
    await admin.admit(user="bob", groups=["ml-research"], pools=["training-pool"], gpus=8)
    pools = by_name(await admin.launch_options(user="alice", groups=["ml-research"]))
    # the group's guarantee has 4 left; borrowing up to the group limit (16) and alice's (8)
    assert pools["training-pool"]["quota"]["within_quota"] == 4
    assert pools["training-pool"]["quota"]["available"] == 8

    dave = by_name(await admin.launch_options(user="dave", groups=[]))
    # no guarantee, borrowing allowed, gpuctl's default cap of 4 GPUs per user
    assert dave["training-pool"]["quota"] == {
        "managed": True,
        "borrowing": True,
        "within_quota": 0,
        "available": 4,
        "within_equivalents": 0,
        "shapes": {
            "mig-1g.10gb": "borrowing",
            "mig-2g.20gb": "borrowing",
            "mig-3g.40gb": "borrowing",
        },
    }
    # no borrowing and no guarantee: nothing
    assert dave["inference-pool"]["quota"]["available"] == 0
    # no quota section: the cap and the pool's GPUs
    assert dave["default"]["quota"]["within_quota"] == 4


async def test_users_ask_for_themselves_only(service):
    carol = service.user("carol", ["ml-ops"])
    await service.admin().apply_pools(NEW_POOL)
    own = await carol.launch_options()
    assert own["user"] == "carol" and "t4-pool" in by_name(own)
    assert own["default_pools"] == ["dev-pool", "default", "compute-pool"]  # the fallback
    with pytest.raises(GPUPoolError) as e:
        await carol.launch_options(user="alice")
    assert e.value.status == 403
    with pytest.raises(GPUPoolError) as e:
        await service.admin().request(
            "GET", "api/v1/launch-options", params={"user": "alice", "groups": "ml-research"}
        )
    assert e.value.status == 400 and "groups must be a JSON list" in e.value.message


async def test_a_full_pool_says_how_many_already_wait_in_line(service):
    """dev-pool's 4 GPUs taken and two requests in line for it (the service's own line,
    ``GET api/v1/queue``): the spawn form, the magics and the panel read "full, 2 waiting in
    line", not a bare "full"."""
    admin, cluster = service.admin(), service.cluster
    for user in ("alice", "dave"):
        a = await admin.admit(user=user, groups=["students"], pools=["dev-pool"], gpus=2)
        await start_pod(cluster, a, f"{user}-nb")
    for user in ("bob", "carol"):
        await admin.admit(user=user, groups=["students"], pools=["dev-pool"], gpus=1, queue=True)
    line = await admin.queue()
    assert line["pools"] == {"dev-pool": 2}
    options = await admin.launch_options(user="erin", groups=["students"])
    dev = Catalog.from_json(options).pool("dev-pool")
    assert dev is not None and dev.waiting == line["pools"]["dev-pool"]
    assert pool_status(dev) == ("full", "full, 2 waiting in line")
    # nothing waits for a pool with room: its words are as before
    training = Catalog.from_json(options).pool("training-pool")
    assert training is not None and training.waiting == 0
