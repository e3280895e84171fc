"""The ledger, the GPU-hours report and budgets count GPU-equivalent hours (issue 29), on SQLite
and PostgreSQL, with the clock (the service's and the simulator's) moved on instead of waited for.

Servers of a shape are admitted through the API and their pods scheduled by the simulator onto
the node with that device (a MIG node, a time-sliced node: ``test_api_partitioned_shapes``).
The truth is the database's rows read with the test's own SQL and the test's own arithmetic: a
3g.40gb is 3/7 of an A100, a time-sliced replica of four 1/4 of an A10.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from service_kit import delete_pod, start_pod
from shaped_cluster import one_pool_dir, spec_of
from test_api_partitioned_shapes import NODES, POOL
from test_gpuctl_on_the_same_cluster import gpupool
from test_records import sql, until

from jupyter_gpupool.sim import SimCluster

H = 3600.0
MIG = {"pool": POOL, "shape": "mig-3g.40gb"}
SHARED = {"pool": POOL, "shape": "shared-4"}


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    return one_pool_dir(tmp_path, POOL)


def slice_cluster(now: list[float]) -> SimCluster:
    return SimCluster(spec_of(NODES), clock=lambda: now[0])


async def test_a_mig_instance_is_charged_its_equivalents_per_hour_and_the_report_splits_by_shape(
    db_url, start_service, now
):
    async with slice_cluster(now) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        admin = service.admin()
        erin = await admin.admit(user="erin", groups=[], pools=[MIG], gpus=1)
        frank = await admin.admit(user="frank", groups=[], pools=[SHARED], gpus=1)
        gina = await admin.admit(user="gina", groups=[], pools=[POOL], gpus=1)
        for admission, pod in ((erin, "erin-nb"), (frank, "frank-nb"), (gina, "gina-nb")):
            await start_pod(cluster, admission, pod)
        # a MIG device asks for no nvidia.com/gpu: its server has a session all the same
        rows = await until(
            db_url,
            "SELECT pod, gpus, shape, equivalents FROM server_sessions ORDER BY pod",
            lambda r: len(r) == 3,
            "three sessions",
        )
        assert rows == [
            ("erin-nb", 0, "mig-3g.40gb", "3/7"),
            ("frank-nb", 1, "shared-4", "1/4"),
            ("gina-nb", 1, None, "1"),
        ]
        # the servers' rows say what each has, in words and exactly
        servers = {s["name"]: s for s in await admin.servers(pool=POOL)}
        assert [
            (servers[p]["shape"], servers[p]["shape_text"], servers[p]["gpu_equivalents"])
            for p in ("erin-nb", "frank-nb", "gina-nb")
        ] == [
            ("mig-3g.40gb", "MIG 3g.40gb of an A100-80G", "3/7"),
            ("shared-4", "A10 shared ¼ (time-sliced)", "1/4"),
            (None, "1 \u00d7 A100-80G", "1"),
        ]
        assert servers["gina-nb"]["gpus_text"] == "1"  # a whole GPU's cell reads as before
        assert servers["erin-nb"]["gpus_text"] == "MIG 3g.40gb of an A100-80G"

        now[0] += H
        report = await admin.gpu_hours(by="shape", since="1d")
        assert [(r["subject"], r["gpu_hours"], r["sessions"]) for r in report["rows"]] == [
            ("whole", 1.0, 1),
            ("mig-3g.40gb", round(3 / 7, 4), 1),
            ("shared-4", 0.25, 1),
        ]
        # the CLI splits by shape too, with the same figures
        code, out, err = await gpupool(
            service,
            service.hub.admin(),
            "get",
            "gpu-hours",
            "--by",
            "shape",
            "--since",
            "1d",
            "-o",
            "csv",
        )
        assert code == 0, err
        assert [line.split(",")[:2] for line in out.splitlines()[1:]] == [
            ["whole", "1.0"],
            ["mig-3g.40gb", str(round(3 / 7, 4))],
            ["shared-4", "0.25"],
        ]
        by_user = await admin.gpu_hours(by="user", since="1d")
        assert {r["subject"]: r["gpu_hours"] for r in by_user["rows"]} == {
            "gina": 1.0,
            "erin": round(3 / 7, 4),
            "frank": 0.25,
        }

        await delete_pod(cluster, "erin-nb")
        [(started, stopped, equivalents)] = await until(
            db_url,
            "SELECT started, stopped, equivalents FROM server_sessions WHERE pod = 'erin-nb'",
            lambda r: r[0][1] is not None,
            "erin's session to end",
        )
        # an hour of 3/7 of a GPU: 3/7 GPU-hours, from the row as the database has it
        assert Fraction(equivalents) * Fraction(stopped - started) / 3600 == Fraction(3, 7)


async def two_ticks_at(db_url: str, t: float) -> None:
    """Every tick samples each pool at the service's now: two ticks seen since the move."""
    await until(
        db_url,
        f"SELECT count(*) FROM usage_samples WHERE time = {t!r}",
        lambda r: r[0][0] >= 2,
        "two samples since the clock moved",
    )


async def test_a_budget_stops_a_shared_gpu_only_when_its_equivalent_hours_are_spent(
    db_url, start_service, pools_dir, now
):
    quotas = {"kind": "quota", "quota": {"name": "q"}, "budgets": []}
    quotas["budgets"] = [{"user": "frank", "gpu_hours": 1, "window": "1d"}]
    (pools_dir / "quotas.yaml").write_text(yaml.safe_dump(quotas))
    async with slice_cluster(now) as cluster:
        service = await start_service(
            cluster, db_url=db_url, history_interval=0.2, stop_over_budget=True, budget_grace="0s"
        )

        async def stop(user: str, server: str) -> int:
            cluster.store.delete("pods", "default", f"{user}-nb")
            return 202

        service.hub.on_stop = stop
        frank = await service.admin().admit(user="frank", groups=[], pools=[SHARED], gpus=1)
        await start_pod(cluster, frank, "frank-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 1, "a session")

        now[0] += 3 * H  # a quarter of an A10 for 3 h: 0.75 of his 1 GPU-hour
        await two_ticks_at(db_url, now[0])
        assert service.hub.stopped == []
        assert cluster.pod("default", "frank-nb") is not None
        options = await service.user("frank").launch_options()
        [row] = options["budgets"]
        assert (row["spent"], row["remaining"]) == (0.75, 0.25)

        now[0] += H  # 4 h of 1/4: spent
        rows = await until(
            db_url,
            'SELECT "user", ended FROM server_sessions WHERE ended IS NOT NULL',
            lambda r: len(r) == 1,
            "frank's session to end",
        )
        assert rows == [("frank", "over budget")]
        assert [u for u, _ in service.hub.stopped] == ["frank"]
        [(equivalents, started, stopped)] = sql(
            db_url, "SELECT equivalents, started, stopped FROM server_sessions"
        )
        assert Fraction(equivalents) * Fraction(stopped - started) / 3600 == 1
