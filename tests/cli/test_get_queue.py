"""``gpupool get queue`` (issue 18): the requests waiting in line for GPUs, as an admin and as a
user read them, from a real service on both clusters of tests/clusters.py.

dev-pool (one node of 4 GPUs; students are guaranteed 2) is filled: alice's server (a pod made
through the Kubernetes API, within the students' guarantee) and two servers still starting
(admitted, their pods not made yet: the GPUs are held for them, and nothing there can be
reclaimed). Then bob and carol (students) and erin (no group) ask to wait in line. What the
CLI prints is held to the service's own answer, read with the client (``GET api/v1/queue``),
and to what the scenario makes plain: bob's request fits in the students' guarantee (within
quota) and is first in line; the others would borrow (over quota).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from clusters import Cluster
from service_kit import HubStub, Running, pod_for, service_config
from waiting import async_wait_for

from jupyter_gpupool.cli import main
from jupyter_gpupool.core.words.tables import human_duration
from jupyter_gpupool.service import GPUPoolService

pytestmark = pytest.mark.timeout(180)

TEST_POOLS = Path(__file__).resolve().parents[1] / "service" / "pools"
HEADER = ["POSITION", "USER", "SERVER", "GPUS", "POOLS", "QUOTA", "WAITING", "EXPECTED"]
WIDE = ["GPU TYPE", "SUBJECT", "RECLAIMING", "ID", "MESSAGE", "REASONS"]
#: Long enough that nothing leaves the line or gives its GPUs back while the test runs.
SETTINGS = {"queue_heartbeat": 600.0, "reservation_ttl": 600.0}


@pytest_asyncio.fixture
async def service(cluster: Cluster, tmp_path: Path) -> AsyncIterator[tuple[Running, HubStub]]:
    """The gpupool service in this process on ``cluster``, with a stub of the hub's API and a
    copy of the tests' pools."""
    hub = await HubStub().start()
    pools = tmp_path / "pools"
    shutil.copytree(TEST_POOLS, pools)
    app = GPUPoolService(config=service_config(cluster.kubeconfig, hub, pools, **SETTINGS))
    app.initialize([])
    await app.start_service()
    running = Running(app, hub, cluster, cluster.truth)
    try:
        yield running, hub
    finally:
        await running.stop()
        await hub.stop()


Gpupool = Callable[..., Awaitable[tuple[int, str, str]]]


@pytest.fixture
def gpupool(service: tuple[Running, HubStub], capsys: pytest.CaptureFixture[str]) -> Gpupool:
    """``await gpupool(*argv, token=...)``: (exit status, stdout, stderr) of ``gpupool ARGV``
    against the service, with the admin's token unless given. The CLI runs its own event loop,
    so it runs in a thread while the service answers on this one."""
    running, hub = service

    async def run(*argv: str, token: str | None = None) -> tuple[int, str, str]:
        connect = ["--url", running.url, "--token", token or hub.admin()]
        status = await asyncio.to_thread(main, [*argv, *connect])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def table(text: str) -> list[dict[str, str]]:
    """A gpuctl table's rows as ``{header: cell}`` (columns two or more spaces apart)."""
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    return [dict(zip(header, row, strict=True)) for row in rows]


def expected_row(entry: dict[str, Any]) -> dict[str, str]:
    """What the table should say of one entry of the service's answer (WAITING aside)."""
    return {
        "POSITION": str(entry["position"]),
        "USER": entry["user"],
        "SERVER": entry["server"] or "(default)",
        "GPUS": str(entry["gpus"]),
        "POOLS": ",".join(entry["pools"]),
        "QUOTA": "within" if entry["within_quota"] else "over",
        "EXPECTED": entry["estimate_words"] or "-",
    }


async def fill_dev_pool(cluster: Cluster, running: Running) -> None:
    """dev-pool's 4 GPUs taken: alice's server (1 GPU, a pod) and dave's and grace's starting
    (3 GPUs held for pods not made yet)."""
    admin = running.admin()
    alice = await admin.admit(
        user="alice", groups=["students"], pools=["dev-pool"], gpus=1, server="nb"
    )
    await cluster.create_pod("default", pod_for(alice, "alice-nb"))
    await admin.admit(user="dave", groups=[], pools=["dev-pool"], gpus=2, server="nb")
    await admin.admit(user="grace", groups=[], pools=["dev-pool"], gpus=1, server="nb")

    async def counted() -> bool:
        servers = await admin.servers()
        return any(s["user"] == "alice" and s.get("node") for s in servers)

    await async_wait_for(counted, what="alice's pod counted by the service", timeout=60)


async def queue_up(running: Running) -> dict[str, dict[str, Any]]:
    """bob (1 GPU, within the students' guarantee), carol (2 GPUs, beyond it) and erin (1 GPU,
    no group) ask to wait for dev-pool; their answers by user."""
    admin, answers = running.admin(), {}
    for user, groups, gpus, server in (
        ("bob", ["students"], 1, "small"),
        ("carol", ["students"], 2, "big"),
        ("erin", [], 1, ""),
    ):
        answers[user] = await admin.admit(
            user=user, groups=groups, pools=["dev-pool"], gpus=gpus, server=server, queue=True
        )
        assert answers[user]["queued"], answers[user]
    return answers


async def test_get_queue_shows_the_line_as_the_service_orders_it(cluster, service, gpupool):
    """An admin's ``get queue``: one row per waiting request, in the service's order, with its
    place, GPUs, pools, within or over quota and how long it has waited; bob (within quota)
    first. ``-o wide`` adds the service's words, ``-o json``/``yaml`` print its answer, ``-o
    csv`` the raw values; ``--pool`` keeps the requests for that pool."""
    running, _ = service
    admin = running.admin()
    await fill_dev_pool(cluster, running)
    await queue_up(running)

    before = time.time()
    status, out, err = await gpupool("get", "queue")
    after = time.time()
    assert (status, err) == (0, "")
    line = (await admin.queue())["queue"]
    assert re.split(r"\s{2,}", out.splitlines()[0]) == HEADER
    rows = table(out)
    assert [{k: v for k, v in r.items() if k != "WAITING"} for r in rows] == [
        expected_row(e) for e in line
    ]
    # what the scenario makes plain, whatever the service's code says
    assert (rows[0]["USER"], rows[0]["POSITION"]) == ("bob", "1")
    assert {r["USER"]: r["QUOTA"] for r in rows} == {
        "bob": "within",
        "carol": "over",
        "erin": "over",
    }
    assert {r["USER"]: r["SERVER"] for r in rows} == {
        "bob": "small",
        "carol": "big",
        "erin": "(default)",
    }
    assert {r["POOLS"] for r in rows} == {"dev-pool"}
    # this service keeps no ledger: no history, so no estimate (issue 31)
    assert {r["EXPECTED"] for r in rows} == {"no estimate yet"}
    # WAITING: how long each has waited, as an AGE column says it (the service's clock is ours)
    for r, e in zip(rows, line, strict=True):
        shortest, longest = before - e["waiting_since"], after - e["waiting_since"]
        seconds = int(r["WAITING"].removesuffix("s"))
        assert r["WAITING"] == human_duration(seconds) and shortest - 1 <= seconds <= longest

    status, out, _ = await gpupool("get", "queue", "-o", "wide")
    wide = table(out)
    assert list(wide[0])[: len(HEADER)] == HEADER
    assert [(r["MESSAGE"], r["ID"], r["SUBJECT"]) for r in wide] == [
        (e["message"], e["id"], e["subject"] or "-") for e in line
    ]
    assert (
        wide[0]["MESSAGE"] == "waiting for 1 GPU: position 1 in line for dev-pool · no estimate yet"
    )
    assert wide[0]["SUBJECT"] == "group students"

    status, out, _ = await gpupool("get", "queue", "-o", "json")
    answer = await admin.queue()
    assert status == 0 and json.loads(out) == answer
    assert answer["pools"] == {"dev-pool": 3}
    status, out, _ = await gpupool("get", "queue", "-o", "yaml")
    assert yaml.safe_load(out) == answer

    status, out, _ = await gpupool("get", "queue", "-o", "csv")
    records = list(csv.DictReader(io.StringIO(out)))
    assert [r["user"] for r in records] == [e["user"] for e in line]
    # raw values: the time it started waiting, not an age
    assert [float(r["waiting_since"]) for r in records] == [e["waiting_since"] for e in line]
    assert [r["within_quota"] for r in records] == [
        "true" if e["within_quota"] else "false" for e in line
    ]

    status, out, _ = await gpupool("get", "queue", "--pool", "training-pool")
    assert (status, re.split(r"\s{2,}", out.strip())) == (0, HEADER)
    status, out, _ = await gpupool("get", "queue", "--pool", "training-pool", "--json")
    assert json.loads(out) == {"queue": [], "pools": {"training-pool": 0}}
    status, out, _ = await gpupool("get", "queue", "--pool", "dev-pool")
    assert [r["USER"] for r in table(out)] == [e["user"] for e in line]


async def test_a_user_sees_their_own_requests_and_an_empty_line_prints_the_header(
    cluster, service, gpupool
):
    """carol's token shows carol's request alone, at its place in the whole line; once every
    request has left the line, ``get queue`` prints its header line only, as other empty
    ``get`` kinds do."""
    running, hub = service
    admin = running.admin()
    await fill_dev_pool(cluster, running)
    answers = await queue_up(running)
    line = (await admin.queue())["queue"]
    [carols] = [e for e in line if e["user"] == "carol"]

    status, out, err = await gpupool("get", "queue", token=hub.user("carol", ["students"]))
    assert (status, err) == (0, "")
    assert [{k: v for k, v in r.items() if k != "WAITING"} for r in table(out)] == [
        expected_row(carols)
    ]

    for answer in answers.values():
        assert await admin.release(answer["id"])  # leaves the line
    assert (await admin.queue())["queue"] == []
    status, out, err = await gpupool("get", "queue")
    assert (status, out, err) == (
        0,
        "POSITION  USER  SERVER  GPUS  POOLS  QUOTA  WAITING  EXPECTED\n",
        "",
    )
    status, out, _ = await gpupool("get", "queue", "-o", "wide")
    assert re.split(r"\s{2,}", out.strip()) == [*HEADER, *WIDE]
