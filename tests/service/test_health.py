"""``GET api/v1/health``: every background loop by name, the watch's age per kind, the database
writer's backlog, and the problems in words, so that an admin sees which part is stuck."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest
from waiting import async_wait_for

from jupyter_gpupool.cli import main
from jupyter_gpupool.client import GPUPoolError

pytestmark = pytest.mark.asyncio


def loops_by_name(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in answer["loops"]}


async def test_health_lists_every_loop_the_watch_and_the_database(start_service):
    running = await start_service(reload_interval=2)
    admin = running.admin()

    async def every_loop_ran() -> dict[str, Any] | None:
        answer = await admin.health()
        return answer if all(r["runs"] for r in answer["loops"]) else None

    answer = await async_wait_for(every_loop_ran, what="every loop to run once", timeout=15)
    loops = loops_by_name(answer)
    assert sorted(loops) == sorted(
        [
            "admission.sweep",
            "usage.samples",
            "admission.line",
            "admission.recut",
            "registry.reload",
            "bookings.windows",
            "records.durations",
            "records.database",
        ]
    )
    assert loops["admission.sweep"]["interval_seconds"] == 1.0
    assert loops["registry.reload"]["interval_seconds"] == 2
    for row in loops.values():
        assert row["running"] and not row["late"] and row["failures"] == 0, row
        assert row["last_run"] is not None and row["last_error"] is None, row
    assert set(answer["watch"]) == {"nodes", "pods"}
    for kind, w in answer["watch"].items():
        assert w["synced"] and w["phase"] == "watching" and w["error"] is None, (kind, w)
        assert 0 <= w["age_seconds"] < 60, (kind, w)
    db = answer["database"]
    assert db["configured"] and db["writing"] and db["backlog"] >= 0, db
    assert answer["status"] == "ok" and answer["problems"] == []


async def test_health_is_for_admins_only(service):
    user = service.user("alice")
    with pytest.raises(GPUPoolError) as refused:
        await user.health()
    assert refused.value.status == 403


async def test_a_loop_that_fails_is_named_with_its_error_and_goes_on(service, caplog):
    desk = service.ctx.desk
    runs = desk.sweeper.runs

    def broken() -> list[Any]:
        raise RuntimeError("the sweep broke")

    desk.sweep = broken
    admin = service.admin()
    with caplog.at_level(logging.ERROR, logger="gpupool.loops.admission.sweep"):
        answer = await async_wait_for(
            lambda: _degraded(admin), what="the health to say degraded", timeout=10
        )
    assert any("admission.sweep" in p and "the sweep broke" in p for p in answer["problems"]), (
        answer["problems"]
    )
    row = loops_by_name(answer)["admission.sweep"]
    assert row["failures"] >= 1 and row["running"], row
    assert row["last_error"] == "RuntimeError: the sweep broke"
    assert any(r.name == "gpupool.loops.admission.sweep" for r in caplog.records)
    # the loop goes on: once the sweep works again, the service is healthy again
    del desk.sweep
    await async_wait_for(lambda: _ok(admin), what="the health to say ok again", timeout=10)
    assert desk.sweeper.runs > runs + 1


async def test_a_watch_that_fails_is_shown_with_its_error(service, sim_cluster):
    admin = service.admin()
    sim_cluster.faults.configure(error_rate=1.0, paths=["/api/v1/nodes"])
    try:
        sim_cluster.faults.cut_watches()
        answer = await async_wait_for(
            lambda: _degraded(admin), what="the health to say degraded", timeout=15
        )
        nodes = answer["watch"]["nodes"]
        assert nodes["phase"] == "retrying" and nodes["error"], nodes
        assert any("watching nodes fails" in p for p in answer["problems"]), answer["problems"]
        assert answer["watch"]["pods"]["error"] is None
    finally:
        sim_cluster.faults.configure(error_rate=0.0)
    await async_wait_for(lambda: _ok(admin), what="the health to say ok again", timeout=30)


async def _degraded(admin: Any) -> dict[str, Any] | None:
    answer = await admin.health()
    return answer if answer["status"] == "degraded" else None


async def _ok(admin: Any) -> dict[str, Any] | None:
    answer = await admin.health()
    return answer if answer["status"] == "ok" else None


async def test_gpupool_get_health_prints_every_part_and_the_status(service, capsys):
    """``gpupool get health``: a row per loop, per kind of the watch and the database, then the
    status; the exit status says whether the service is healthy."""
    admin = service.admin()
    await async_wait_for(lambda: _ok(admin), what="the health to say ok", timeout=10)
    connect = ["--url", service.url, "--token", service.hub.admin()]
    status = await asyncio.to_thread(main, ["get", "health", *connect])
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert status == 0 and lines[-1] == "status: ok", out
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in lines[:-1]]
    assert header == ["PART", "STATE", "LAST", "EVERY", "RUNS", "FAILURES", "PROBLEM"]
    parts = {row[0]: row for row in rows}
    answer = await admin.health()
    expected = [f"loop {r['name']}" for r in answer["loops"]] + ["watch nodes", "watch pods"]
    assert list(parts) == [*expected, "database"], out
    assert parts["loop admission.sweep"][1:2] == ["running"]
    assert parts["watch pods"][1:2] == ["watching"]
    status = await asyncio.to_thread(main, ["get", "health", "-o", "json", *connect])
    out, _ = capsys.readouterr()
    assert status == 0
    assert [r["name"] for r in json.loads(out)["loops"]] == [r["name"] for r in answer["loops"]]
