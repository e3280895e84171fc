"""A start that would wait in line while its user already waits with as many requests as one
user may (the service's ``max_queued_per_user``, issue 36): the spawner says so in words, and
nothing is left waiting for it.

The truth is the real service's line (``GET api/v1/queue`` as an admin asks it) and the
cluster's pods; what the user reads is the spawner's error. Fixtures: those of
``test_spawner_queue.py`` (the service in this process, dev-pool one node of 4 GPUs).
"""

from __future__ import annotations

import pytest
import test_spawner_queue as queue_tests
from test_spawner_queue import line, pod_of, take_dev_pool

from jupyter_gpupool.spawner.errors import SpawnRefused

# the fixtures of test_spawner_queue.py, under their names
pool_service = queue_tests.pool_service
user_spawner = queue_tests.user_spawner
admin = queue_tests.admin
fast_polls = queue_tests.fast_polls


async def test_a_start_past_the_users_places_in_line_is_refused_in_words(
    user_spawner, admin, sim_cluster, fast_polls
):
    await take_dev_pool(user_spawner)
    for server in ("one", "two", "three", "four"):  # bob's other starts, waiting in line
        await admin.admit(
            user="bob",
            groups=["ml-research"],
            pools=["dev-pool"],
            gpus=1,
            server=server,
            queue=True,
        )
    bob = user_spawner("bob")
    bob.user_options = {"pools": ["dev-pool"], "gpus": 1, "queue": True}
    with pytest.raises(SpawnRefused) as refused:
        await bob.start()
    assert refused.value.status_code == 429
    assert refused.value.message == (
        "No pool can take your server now, and it cannot wait in line: you already wait for "
        "GPUs with 4 servers (one, two, three, four), the most one user may (4). Start it "
        "again once one of them has started, or stop one of them."
    )
    assert await line(admin) == [("bob", 1), ("bob", 2), ("bob", 3), ("bob", 4)]
    assert pod_of(sim_cluster, bob) is None
