"""Wait estimates in the line's rows (issue 31), from a ledger in a real SQLite database.

The truth is outside the code under test: the sessions are written with SQL before the service
starts (dev-pool's servers have run 20 minutes each), the running servers' starts are the
simulated cluster's own pods' ``creationTimestamp``, and the expected times follow the method
by hand: dev-pool's 4 GPUs are held by two servers of 2 GPUs just started, each expected to run
the median 20 minutes; bob (2 GPUs, first in line) gets the first to end, carol (1 GPU) the
second's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from service_kit import start_pod
from sqlalchemy import create_engine, text

from jupyter_gpupool.core.accounting.ledger import parse_time
from jupyter_gpupool.core.time.notices import REPORT, STOP, Notice
from jupyter_gpupool.core.time.wait_estimate import Ask
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations
from jupyter_gpupool.db.store import Database
from jupyter_gpupool.service.admission.waits import holding, sure_end_of
from jupyter_gpupool.sim.cluster import node_object
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec


async def ask(admin, user: str, gpus: int) -> Any:
    body = {"user": user, "groups": ["students"], "pools": ["dev-pool"], "gpus": gpus}
    return await admin.request("POST", "api/v1/admissions", json_body={**body, "queue": True})


def seed(url: str, pool: str, durations: list[float], started: float) -> None:
    """Ended sessions of ``pool`` that ran ``durations``, from ``started``, written with SQL."""
    engine = create_engine(url)
    with engine.begin() as conn:
        for i, d in enumerate(durations):
            conn.execute(
                text(
                    "INSERT INTO server_sessions (pod_uid, namespace, pod, user, server, pool, "
                    "gpus, over_quota, started, stopped, last_seen, ended) VALUES "
                    "(:uid, 'default', :pod, 'zoe', '', :pool, 1, 0, :s, :e, :e, 'stopped')"
                ),
                {
                    "uid": f"{pool}-{i}",
                    "pod": f"old-{i}",
                    "pool": pool,
                    "s": started,
                    "e": started + d,
                },
            )
    engine.dispose()


def dev_pool_ledger(tmp_path: Path) -> str:
    """A database with the service's schema (made as the service makes it) whose ledger holds
    six 20-minute dev-pool sessions of yesterday: enough for an estimate there."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    db = Database(url)
    db.open()
    db.close()
    seed(url, "dev-pool", [1200.0] * 6, time.time() - 86400)
    return url


async def test_queue_rows_carry_estimates_from_the_ledger(start_service, tmp_path):
    url = dev_pool_ledger(tmp_path)
    seed(url, "inference-pool", [900.0] * 4, time.time() - 7200)  # one short of an estimate
    service = await start_service(db_url=url, queue_heartbeat=3600)
    admin, cluster = service.admin(), service.cluster
    alice = await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    a = await start_pod(cluster, alice, "alice-nb")
    dave = await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)
    d = await start_pod(cluster, dave, "dave-nb")
    ends = sorted(parse_time(p["metadata"]["creationTimestamp"]) + 1200 for p in (a, d))

    assert (await ask(admin, "bob", 2)).code == 202
    assert (await ask(admin, "carol", 1)).code == 202
    rows = (await admin.request("GET", "api/v1/queue")).json()["queue"]
    bob, carol = rows
    assert abs(bob["estimate"] - ends[0]) < 1 and abs(carol["estimate"] - ends[1]) < 1
    assert bob["estimate_words"] == "about 20 min, from the last 90 days of dev-pool"
    assert bob["message"] == (
        "waiting for 2 GPUs: position 1 in line for dev-pool · "
        "about 20 min, from the last 90 days of dev-pool"
    )
    history = service.app.ctx.records.durations.history()
    assert history.of("inference-pool", None) is None
    assert list(history.of("dev-pool", None)) == [1200.0] * 6
    # the durations are read again by a loop of their own, which the health report lists
    health = (await admin.request("GET", "api/v1/health")).json()
    assert "records.durations" in [loop["name"] for loop in health["loops"]]


async def test_gpus_admitted_but_not_yet_running_are_not_counted_free(start_service, tmp_path):
    """dave's admission holds 2 of dev-pool's 4 GPUs before his pod exists; alice runs the other
    2. Nothing is free: bob's 2 wait for alice's expected end (her pod's start + the median 20
    minutes), not for nothing."""
    url = dev_pool_ledger(tmp_path)
    service = await start_service(db_url=url, queue_heartbeat=3600)
    admin, cluster = service.admin(), service.cluster
    alice = await admin.admit(user="alice", groups=["students"], pools=["dev-pool"], gpus=2)
    a = await start_pod(cluster, alice, "alice-nb")
    dave = await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2)
    assert dave["id"]  # held: no pod yet
    asked = time.time()
    assert (await ask(admin, "bob", 2)).code == 202
    [bob] = (await admin.request("GET", "api/v1/queue")).json()["queue"]
    alice_ends = parse_time(a["metadata"]["creationTimestamp"]) + 1200
    assert abs(bob["estimate"] - alice_ends) < 2
    assert bob["estimate"] > asked + 1100  # not "now": the held GPUs are not free


def test_only_a_notice_that_stops_is_a_sure_end():
    """A report (the idle policy's ``action: report``, a booking's end) ends nothing: only the
    stops the notices announce, the earliest first, count as a server's sure end."""
    report = Notice("idle", "idle: reported at 10:00", 1000.0, REPORT)
    stop = Notice("runtime", "stops at 10:30", 2800.0, STOP)
    later = Notice("budget", "stops at 11:00", 4600.0, STOP)
    assert sure_end_of([report, None]) is None
    assert sure_end_of([later, report, stop]) == (2800.0, "a runtime limit")
    assert sure_end_of([Notice("booking", "stopped at the start", None, STOP)]) is None


async def test_a_request_over_its_quota_waits_for_its_own_servers(start_service, tmp_path):
    """bob (students) runs 2 GPUs of dev-pool's 4, his limit there (2 a user); he asks for one
    more and waits in line: the 2 GPUs free are not his before his server ends, its start +
    the median 20 minutes (issue 38: quotas in the estimate), and the words say why."""
    url = dev_pool_ledger(tmp_path)
    service = await start_service(db_url=url, queue_heartbeat=3600)
    admin, cluster = service.admin(), service.cluster
    bob = await admin.admit(user="bob", groups=["students"], pools=["dev-pool"], gpus=2)
    b = await start_pod(cluster, bob, "bob-nb")
    assert (await ask(admin, "bob", 1)).code == 202
    [row] = (await admin.request("GET", "api/v1/queue")).json()["queue"]
    bob_ends = parse_time(b["metadata"]["creationTimestamp"]) + 1200
    assert abs(row["estimate"] - bob_ends) < 2
    assert row["estimate_words"] == (
        "about 20 min, from the last 90 days of dev-pool; waits for its quota"
    )


def test_a_shared_gpus_replicas_are_no_whole_gpus_free():
    """The demo cluster's inference-pool (examples/cluster.yaml): gpu-node-3 and gpu-node-4 with
    4 A10s each, gpu-node-shared-1 one A10 time-sliced in 4. Nothing runs: a request for a
    whole GPU can have gpu-node-3's or gpu-node-4's 4, not the shared node's replicas (its
    ``nvidia.com/gpu`` units), which count as the shape ``shared-4``."""
    index = UsageIndex()
    for n in example_cluster_spec().nodes:
        index.apply_node("ADDED", node_object(n, 0.0))
    asks = [Ask("x", (("inference-pool", None),), 1)]
    held, free = holding(asks, index, Reservations(), time.time())
    assert held == []
    assert {k: v for k, v in free.items() if v} == {
        ("inference-pool", None, "gpu-node-3"): 4,
        ("inference-pool", None, "gpu-node-4"): 4,
        ("inference-pool", "shared-4", None): 4,
    }
