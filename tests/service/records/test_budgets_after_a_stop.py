"""A server that stopped stops counting against its user's and its group's budgets at once, in
the running service, not only after a restart reads the sessions back from the database.

The GPU-hours are the test's own arithmetic: the GPUs it asked for times the hours between the
start and the deletion of each pod, while the clock (the service's and the simulator's) moves on
well past the deletion; the truth is what the API answers to the users.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service_kit import delete_pod, start_pod

from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

H = 3600.0


def budget(options: dict[str, Any], subject: str) -> tuple[float, float]:
    """(spent, remaining) of ``subject``'s budget in a launch-options answer."""
    [row] = [b for b in options["budgets"] if b["subject"] == subject]
    return row["spent"], row["remaining"]


async def test_a_stopped_server_stops_counting_against_user_and_group_budgets_at_once(
    start_service, pools_dir: Path, tmp_path: Path, now
):
    quotas = pools_dir / "quotas.yaml"
    quotas.write_text(
        quotas.read_text()
        + "budgets:\n"
        + "  - {user: alice, gpu_hours: 6, window: 1d}\n"
        + "  - {group: students, gpu_hours: 4, window: 7d}\n"
    )
    async with SimCluster(example_cluster_spec(), clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=f"sqlite:///{tmp_path / 'b.sqlite'}")
        admin = service.admin()
        alice = service.user("alice", ["ml-research"])
        erin = service.user("erin", ["students"])  # reads her group's budget
        a = await alice.admit(pools=["training-pool"], gpus=2)
        # carol within the students' guarantee in dev-pool: charged to the group
        c = await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=2)
        assert c["charged"] == "group:students"
        await start_pod(cluster, a, "alice-nb")
        await start_pod(cluster, c, "carol-nb")
        await service.settled()

        now[0] += H  # 2 GPUs for an hour each: 2 GPU-hours for alice, 2 for the students
        assert budget(await alice.launch_options(), "user:alice") == (2.0, 4.0)
        assert budget(await erin.launch_options(), "group:students") == (2.0, 2.0)

        await delete_pod(cluster, "alice-nb")
        await delete_pod(cluster, "carol-nb")
        await service.settled()  # the service saw both go
        now[0] += 3 * H  # had they kept counting: 8 GPU-hours each, both budgets spent

        assert budget(await alice.launch_options(), "user:alice") == (2.0, 4.0)
        assert budget(await erin.launch_options(), "group:students") == (2.0, 2.0)
        # and both may start servers again
        assert (await alice.admit(pools=["training-pool"], gpus=2))["pool"] == "training-pool"
        again = await admin.admit(user="erin", groups=["students"], pools=["dev-pool"], gpus=1)
        assert again["charged"] == "group:students"
