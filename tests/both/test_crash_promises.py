"""Promises kept across a crash (issue 27): the service as a process, killed with SIGKILL at
random moments during a burst of immediate and queued admissions, started again each time.

The test keeps its own ledger of every answer it received before each kill, and judges from it,
a fresh read of the pods from the API server, the service's API and its database:

- never more GPUs promised on a node than it has (the test's 201s whose pods it created, plus
  the reservations still held after the restart, against the node's GPUs);
- every 201 either with its pod or still reserved (``GET api/v1/admissions``);
- every 202 still in line after the restart, in its order (``GET api/v1/queue``);
- nothing in the GPU-hours ledger counted twice.

It runs on the simulated cluster and on the real control plane (tests/clusters.py). The seed is
printed; ``GPUPOOL_CRASH_SEED`` replays one, ``GPUPOOL_CRASH_KILLS`` sets the kills.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusters import CLUSTERS, Cluster, open_cluster
from service_kit import HubStub, ServiceProcess, pod_for
from sqlalchemy import create_engine, text

from jupyter_gpupool.client import GPUPoolClient, GPUPoolError
from jupyter_gpupool.sim import parse_cluster

POOL = "crash-pool"
NODES, GPUS = 2, 8
CLIENTS = 6
USER = "crash"  # one subject: its entries in line stand in order of arrival


@dataclass
class Ledger:
    """What the service answered the test, before each kill."""

    admitted: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> 201 body
    queued: list[tuple[int, int, str]] = field(default_factory=list)  # (round, client, id)
    with_pod: set[str] = field(default_factory=set)  # 201s whose pod the test created
    #: pods deleted while the service was down, admissions released (their spawn failed)
    deleted: set[str] = field(default_factory=set)
    refused: int = 0
    unrecorded: int = 0  # 503: could not be recorded (nothing promised)
    answered_202: int = 0
    admitted_from_line: int = 0  # 202s whose spawner later heard "admitted"
    #: Set on each 201: some kills come right after one (the moment a lost write shows)
    admitted_now: asyncio.Event = field(default_factory=asyncio.Event)


def cluster_spec():
    return parse_cluster(
        yaml.safe_dump(
            {
                "nodes": [
                    {
                        "name": f"gpu-{i:02d}",
                        "labels": {"runwhere.ai/pool": POOL},
                        "gpu": {"count": GPUS, "type": "A100-80G"},
                    }
                    for i in range(NODES)
                ]
            }
        )
    )


def write_pool(pools_dir: Path) -> None:
    for f in pools_dir.iterdir():
        f.unlink()
    doc = {"kind": "pool", "version": "v0.1", "pool": {"name": POOL}, "nodes": {}}
    (pools_dir / f"{POOL}.yaml").write_text(yaml.safe_dump(doc))


async def client_burst(
    client: GPUPoolClient,
    cluster: Cluster,
    ledger: Ledger,
    rng: random.Random,
    round_: int,
    c: int,
) -> None:
    """One spawner-like client: admissions one after the other until the service dies; most
    of its 201s get their pod at once."""
    n = 0
    while True:
        n += 1
        try:
            answer = await client.admit(
                user=USER,
                groups=[],
                pools=[POOL],
                gpus=rng.choice((1, 2)),
                server=f"r{round_}c{c}n{n}",
                queue=True,
            )
        except GPUPoolError as e:
            if e.status == 0:
                return  # killed: this answer never came
            if e.status == 503:
                ledger.unrecorded += 1
            else:
                ledger.refused += 1
            continue
        aid = str(answer["id"])
        if answer.get("queued"):
            ledger.queued.append((round_, c, aid))
            ledger.answered_202 += 1
            heard = await wait_in_line(client, aid)
            if heard is None:
                return  # killed while it waited: judged in line (or held) after the restart
            ledger.queued.remove((round_, c, aid))
            if heard.get("state") != "admitted":
                ledger.refused += 1  # left the line otherwise (not expected here)
                continue
            ledger.admitted_from_line += 1
            answer = heard
        ledger.admitted[aid] = dict(answer)
        ledger.admitted_now.set()
        if rng.random() < 0.6:
            ledger.with_pod.add(aid)  # (if the create fails, judge() says so)
            await cluster.create_pod("default", pod_for(dict(answer), f"nb-{aid}"))


async def wait_in_line(client: GPUPoolClient, aid: str) -> dict[str, Any] | None:
    """As a spawner waits: ask for its place until it leaves the line (the answer), or until
    the service dies (None). Without this, entries the line admits hold their GPUs unseen."""
    while True:
        await asyncio.sleep(0.05)
        try:
            answer = await client.admission(aid)
        except GPUPoolError as e:
            if e.status == 0:
                return None
            if e.status == 503:
                continue
            raise
        if answer.get("state") != "queued":
            return answer


async def judge(
    admin: GPUPoolClient, cluster: Cluster, ledger: Ledger, db_url: str
) -> dict[str, int]:
    """After a restart: the promises the ledger holds are all kept."""
    held = {r["id"]: r for r in await admin.admissions()}
    in_line = [r["id"] for r in (await admin.queue())["queue"]]
    names = {p["metadata"]["name"] for p in await cluster.list_pods("default")}
    pods = {aid for aid in ledger.with_pod - ledger.deleted if f"nb-{aid}" in names}
    # every 201 with its pod or still reserved
    for aid, body in ledger.admitted.items():
        if aid in ledger.deleted:
            continue
        assert aid in pods or aid in held, (
            f"admission {aid} ({body['gpus']} GPUs on {body['node']}) was answered 201 before "
            f"a kill; after the restart it has no pod and is not held"
        )
    # never more GPUs promised on a node than it has
    promised: dict[str, int] = {}
    for aid in pods | set(held):
        row = ledger.admitted.get(aid) or held[aid]
        promised[row["node"]] = promised.get(row["node"], 0) + int(row["gpus"])
    for node, gpus in promised.items():
        assert gpus <= GPUS, f"{gpus} GPUs promised on {node}, which has {GPUS}: {promised}"
    # every 202 still in line, in its order
    place = {aid: i for i, aid in enumerate(in_line)}
    missing = [aid for _, _, aid in ledger.queued if aid not in place]
    assert not missing, f"{len(missing)} requests answered 202 are no longer in line: {missing}"
    last: dict[tuple[int, int], int] = {}
    round_last: dict[int, int] = {}
    for round_, c, aid in ledger.queued:
        assert place[aid] > last.get((round_, c), -1), f"{aid} came ahead of an earlier 202"
        last[(round_, c)] = place[aid]
        round_last[round_] = max(round_last.get(round_, -1), place[aid])
    for round_, _c, aid in ledger.queued:
        assert all(place[aid] > p for r, p in round_last.items() if r < round_), (
            f"{aid} (answered in round {round_}) is ahead of a request answered before a kill"
        )
    # nothing in the GPU-hours ledger counted twice
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT pod_uid, pod FROM server_sessions")).all()
    finally:
        engine.dispose()
    assert len({r[0] for r in rows}) == len(rows) == len({r[1] for r in rows}), (
        f"a server counted twice in the ledger: {sorted(r[1] for r in rows)}"
    )
    return {"held": len(held), "in_line": len(in_line), "pods": len(pods), "sessions": len(rows)}


@pytest.mark.parametrize("kind", CLUSTERS)
async def test_what_was_answered_survives_sigkills_during_a_burst_of_admissions(
    kind: str, hub: HubStub, pools_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seed = int(os.environ.get("GPUPOOL_CRASH_SEED") or random.randrange(1 << 32))
    kills = int(os.environ.get("GPUPOOL_CRASH_KILLS") or 20)
    print(f"crash test seed: {seed} (GPUPOOL_CRASH_SEED={seed} replays it), {kills} kills")
    rng = random.Random(seed)
    write_pool(pools_dir)
    db_url = f"sqlite:///{tmp_path / 'gpupool.sqlite'}"
    ledger = Ledger()
    started = time.monotonic()
    real = request.getfixturevalue("realk8s_kubeconfig") if kind == "real" else None
    async with open_cluster(kind, realk8s_kubeconfig=real, spec=cluster_spec()) as cluster:
        svc = ServiceProcess(
            cluster,
            hub,
            pools_dir,
            tmp_path / "service.log",
            db_url=db_url,
            extra_args=[
                "--GPUPoolService.reservation_ttl=600",
                "--GPUPoolService.queue_heartbeat=600",
                "--GPUPoolService.history_interval=0.5",
                # one user's burst queues far more than the default cap of places per user: the
                # cap has tests of its own; here every 202 is a promise to keep across a crash
                "--GPUPoolService.max_queued_per_user=0",
            ],
        )
        admin = GPUPoolClient(svc.url, hub.admin("ops"), request_timeout=10)
        clients = [
            GPUPoolClient(svc.url, hub.admin("spawner"), request_timeout=10) for _ in range(CLIENTS)
        ]
        figures: dict[str, int] = {}
        try:
            for round_ in range(kills + 1):
                await svc.start()
                figures = await judge(admin, cluster, ledger, db_url)
                if round_ == kills:
                    break
                # some spawns failed before their pod: their GPUs are given back
                for aid in sorted(set(ledger.admitted) - ledger.with_pod - ledger.deleted):
                    if rng.random() < 0.7 and await admin.release(aid):
                        ledger.deleted.add(aid)
                # The test plays the reservations' TTL (600 s here, so that a judge never sees
                # one expire): a reservation taken up whose pod came and went while the service
                # was down (it never saw it), or whose 201 no spawner heard, is released; the
                # service rightly holds such GPUs until then (it cannot know)
                for r in await admin.admissions():
                    aid = r["id"]
                    if aid in ledger.deleted or aid not in ledger.admitted:
                        await admin.release(aid)
                        ledger.deleted.add(aid)
                burst = [
                    asyncio.ensure_future(
                        client_burst(cl, cluster, ledger, random.Random(rng.random()), round_, c)
                    )
                    for c, cl in enumerate(clients)
                ]
                ledger.admitted_now.clear()
                if rng.random() < 0.5:  # at a random moment of the burst
                    await asyncio.sleep(rng.uniform(0.05, 0.5))
                else:  # a random moment just after a 201
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(ledger.admitted_now.wait(), 0.5)
                    await asyncio.sleep(rng.uniform(0, 0.005))
                svc.kill()
                await asyncio.gather(*burst)
                # while the service is down, some servers end: room for the next burst
                for aid in sorted(ledger.with_pod - ledger.deleted):
                    if rng.random() < 0.7:
                        await cluster.delete_pod("default", f"nb-{aid}", grace=0)
                        ledger.deleted.add(aid)
        finally:
            await admin.close()
            for cl in clients:
                await cl.close()
            svc.stop()
    print(
        f"crash test: {kills} kills, {len(ledger.admitted)} answered 201 "
        f"({len(ledger.with_pod)} with pods, {len(ledger.deleted)} deleted), "
        f"{ledger.answered_202} answered 202 ({ledger.admitted_from_line} admitted from the "
        f"line), {ledger.unrecorded} answered 503, "
        f"{ledger.refused} other refusals; at the end {figures}; "
        f"{time.monotonic() - started:.1f} s; seed {seed}"
    )
    assert len(ledger.admitted) >= kills and ledger.answered_202 >= kills, (
        "the burst should both admit and queue"
    )
