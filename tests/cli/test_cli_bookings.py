"""``gpupool create -f`` with bookings, ``get bookings [--pool] [--week]``, ``describe booking``
and ``delete booking`` (issue 30), against a real service in this process. What the CLI prints
is held to the service's own answer read with the client (``GET api/v1/bookings``), and to the
database read with SQL.

training-pool: 16 whole A100s and 1 GPU-equivalent of MIG (17), 14 guaranteed by quotas (which
whole-GPU requests may claim): 2 whole GPUs left to book at any moment.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from clusters import Cluster
from service_kit import HubStub, Running, service_config
from sqlrows import sql

from jupyter_gpupool.cli import main
from jupyter_gpupool.service import GPUPoolService

pytestmark = pytest.mark.timeout(180)

TEST_POOLS = Path(__file__).resolve().parents[1] / "service" / "pools"

LAB = """\
kind: booking
version: v0.1
booking: {name: cs231, description: CS231 lab}
pool: training-pool
gpus: 2
groups: [cs231]
window:
  weekly: {days: [tue, thu], start: "10:00", end: "12:00"}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
"""
TOO_MANY = """\
kind: booking
version: v0.1
booking: {name: ml-ops}
pool: training-pool
gpus: 2
users: [bob]
window:
  once: {start: "2027-01-19T11:00", end: "2027-01-19T13:00"}
  timezone: Europe/Berlin
"""


@pytest_asyncio.fixture
async def service(cluster: Cluster, tmp_path: Path) -> AsyncIterator[tuple[Running, HubStub, str]]:
    hub = await HubStub().start()
    pools = tmp_path / "pools"
    shutil.copytree(TEST_POOLS, pools)
    db_url = f"sqlite:///{tmp_path / 'bookings.sqlite'}"
    app = GPUPoolService(config=service_config(cluster.kubeconfig, hub, pools, db_url=db_url))
    app.initialize([])
    await app.start_service()
    running = Running(app, hub, cluster, cluster.truth)
    try:
        yield running, hub, db_url
    finally:
        await running.stop()
        await hub.stop()


Gpupool = Callable[..., Awaitable[tuple[int, str, str]]]


@pytest.fixture
def gpupool(service, capsys: pytest.CaptureFixture[str]) -> Gpupool:
    running, hub, _ = service

    async def run(*argv: str) -> tuple[int, str, str]:
        connect = ["--url", running.url, "--token", hub.admin()]
        status = await asyncio.to_thread(main, [*argv, *connect])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def table(text: str) -> list[dict[str, str]]:
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    return [dict(zip(header, row, strict=True)) for row in rows]


async def test_bookings_through_the_cli(service, gpupool, tmp_path):
    running, _, db_url = service
    admin = running.admin()
    lab = tmp_path / "lab.yaml"
    lab.write_text((TEST_POOLS / "dev-pool.yaml").read_text() + "---\n" + LAB)
    status, out, err = await gpupool("create", "-f", str(lab))
    assert (status, err) == (0, "")
    assert out.splitlines() == ["pool dev-pool replaced", "booking cs231 created"]
    assert [n for (n,) in sql(db_url, "SELECT name FROM bookings")] == ["cs231"]

    status, out, _ = await gpupool("get", "bookings")
    [row] = table(out)
    answer = await admin.bookings()
    [listed] = answer["bookings"]
    assert row == {
        "NAME": "cs231",
        "POOL": "training-pool",
        "SHAPE": "whole",
        "GPUS": "2",
        "WHO": "group cs231",
        "WHEN": listed["window"],
        "NEXT": listed["next"]["words"],
    }
    status, out, _ = await gpupool("get", "bookings", "--json")
    assert json.loads(out)["bookings"] == answer["bookings"]

    status, out, _ = await gpupool("get", "bookings", "--week", "2027-W03", "-o", "wide")
    [week] = table(out)
    assert week["THIS WEEK"] == (
        "Tue 2027-01-19 10:00\u201312:00 Europe/Berlin; "
        "Thu 2027-01-21 10:00\u201312:00 Europe/Berlin"
    )
    status, out, _ = await gpupool("get", "bookings", "--week", "2027-W20")
    assert status == 0 and table(out) == [], "no window that week: no row"
    status, out, _ = await gpupool("get", "bookings", "--pool", "dev-pool")
    assert table(out) == []

    status, out, _ = await gpupool("describe", "booking", "cs231", "--week", "2027-01-19")
    assert status == 0
    assert "Groups:      cs231" in out and "CS231 lab" in out
    assert "Tue 2027-01-19 10:00\u201312:00 Europe/Berlin (2027-01-19T09:00:00Z" in out

    too_many = tmp_path / "ml-ops.yaml"
    too_many.write_text(TOO_MANY)
    status, out, err = await gpupool("create", "-f", str(too_many))
    assert status == 1
    assert (
        "ml-ops (Tue 2027-01-19 11:00\u201313:00 Europe/Berlin) overlaps cs231 "
        "(Tue 2027-01-19 10:00\u201312:00 Europe/Berlin): 18 of 16 whole GPUs booked"
    ) in err
    assert [n for (n,) in sql(db_url, "SELECT name FROM bookings")] == ["cs231"]

    status, out, err = await gpupool("delete", "booking", "cs231")
    assert (status, out) == (0, "booking cs231 deleted\n")
    assert sql(db_url, "SELECT name FROM bookings") == []
    assert (await admin.bookings())["bookings"] == []
    status, out, err = await gpupool("delete", "booking", "cs231")
    assert status == 1 and "no booking named 'cs231'" in err


YEAR_10000 = """\
kind: booking
version: v0.1
booking: {name: y10k}
pool: training-pool
gpus: 1
users: [carol]
window:
  once: {start: "9999-12-31T20:00", end: "9999-12-31T23:00"}
  timezone: America/Los_Angeles
"""


async def test_a_booking_past_the_calendar_is_refused_by_create_and_get_bookings_answers(
    service, gpupool, tmp_path
):
    _, _, db_url = service
    bad = tmp_path / "y10k.yaml"
    bad.write_text(YEAR_10000)
    status, out, err = await gpupool("create", "-f", str(bad))
    assert status == 1 and "created" not in out
    assert "window.once.start" in err and "outside the dates a window may be on" in err
    assert sql(db_url, "SELECT name FROM bookings") == []
    status, out, _ = await gpupool("get", "bookings")
    assert status == 0 and table(out) == []
