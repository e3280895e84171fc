"""Part of ``bench_database.py`` (``--only durable``): what each durable write costs its answer,
through the service's own :class:`~jupyter_gpupool.db.store.Database` and its writer.

Each durable write the API waits for before it answers is measured apart: a reservation (a
201), a place in line (a 202), a booking (``POST api/v1/bookings``), a booking's deletion
(``DELETE api/v1/bookings/NAME``, of one of ``--kept-bookings`` put before), saved work (``POST
api/v1/servers/saved``) and a session's end before a reclaim (why a server is stopped,
``reclaimed``, committed before the hub is asked to stop it). ``--writers`` asyncio tasks (the
service's handlers) each write one and await its commit as the service does
(:func:`~jupyter_gpupool.service.commits.until_committed`), one after the other, for
``--durable-seconds``. Figures per kind: answers a second, p50 / p99 of an answer's wait in ms,
the process's CPU per answer (the writer's thread and the loop together), and answers per
commit (the writer's commits, counted by the engine's ``commit`` event).

The baseline, measured in the same run on the same database: one row inserted and committed on
its own, one at a time, through a plain connection (the database's cost of one durable commit:
on SQLite a WAL append and its fsync). ``p50_x_commit`` / ``p99_x_commit``: each kind's wait
over the baseline's: with every answer committed alone and waited for in turn, ``--writers``
writers would wait that many commits; with group commit about one to two where the commit
(the disk's fsync) is the cost, more where it is cheap and the writer's own work on its group
is (a machine with a fast fsync: 6 to 12, measured 2026-12-03, with 10 answers per commit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from bigcluster import percentile
from sqlalchemy import Engine, create_engine, event, func, insert, select

from jupyter_gpupool.db.models import BookingRow, ChangeRecord
from jupyter_gpupool.db.store import Database
from jupyter_gpupool.service.commits import until_committed

Write = Callable[[Database, int], "Future[None] | None"]


def reservation(db: Database, i: int) -> Future[None] | None:
    return db.reservation_add(
        {
            "admission_id": uuid.uuid4().hex[:16],
            "pool": f"pool-{i % 50:02d}",
            "node": f"node-{i % 5000:05d}",
            "gpus": 1,
            "user": f"user{i % 2000}",
            "charged": f"group:g{i % 200}",
            "over_quota": False,
            "expires_at": time.time() + 120,
            "resource": "nvidia.com/gpu",
            "equivalents": None,
            "shape": None,
        }
    )


def place_in_line(db: Database, i: int) -> Future[None] | None:
    entry = {
        "id": uuid.uuid4().hex[:16],
        "seq": i,
        "since": time.time(),
        "user": f"user{i % 2000}",
        "groups": [f"g{i % 200}"],
        "pools": [f"pool-{i % 50:02d}"],
        "gpus": 1,
        "gpu_type": None,
        "server": "",
        "reclaim": True,
    }
    return db.queue_add(entry, durable=True)


def booking(db: Database, i: int) -> Future[None] | None:
    document = {"kind": "booking", "name": f"b{i}", "pool": "pool-00", "gpus": 8}
    now = time.time()
    return db.bookings_put(
        [
            {
                "name": f"b{i}",
                "document": json.dumps(document),
                "created_by": "admin",
                "created": now,
                "changed_by": "admin",
                "changed": now,
            }
        ]
    )


def booking_deletion(db: Database, i: int) -> Future[None] | None:
    return db.booking_drop(f"kept{i}")  # one of the --kept-bookings put before


def saved_work(db: Database, i: int) -> Future[None] | None:
    return db.session_saved(f"pod-{i % SESSIONS}", 3, '["a.ipynb", "b.ipynb", "c.py"]', time.time())


def session_end(db: Database, i: int) -> Future[None] | None:
    # why a server is stopped, committed before the service asks the hub to stop it (a reclaim)
    return db.session_stopping(f"pod-{i % SESSIONS}", "reclaimed")


KINDS: dict[str, Write] = {
    "reservation": reservation,
    "place_in_line": place_in_line,
    "booking": booking,
    "booking_deletion": booking_deletion,
    "saved_work": saved_work,
    "session_end": session_end,
}

#: Open sessions whose saved work is reported (and whose end is recorded before a reclaim)
SESSIONS = 2000


def count_commits(engine: Engine) -> Callable[[], int]:
    """The writer's commits so far (its thread's ``commit`` events)."""
    commits = [0]

    def on_commit(_conn: Any) -> None:
        if threading.current_thread().name == "gpupool-db":
            commits[0] += 1

    event.listen(engine, "commit", on_commit)
    return lambda: commits[0]


def commit_alone(url: str, n: int) -> dict[str, float]:
    """The baseline: ``n`` rows each inserted and committed on its own, one after the other."""
    engine = create_engine(url)
    waits = []
    try:
        for i in range(n):
            t0 = time.perf_counter()
            with engine.begin() as conn:
                conn.execute(
                    insert(ChangeRecord),
                    {"time": float(i), "who": "bench", "what": "baseline", "via": "bench"},
                )
            waits.append(time.perf_counter() - t0)
    finally:
        engine.dispose()
    return figures(waits, sum(waits))


def kept_left(engine: Engine) -> int:
    """The bookings put before the deletions that are still there."""
    with engine.connect() as conn:
        query = select(func.count()).select_from(BookingRow).where(BookingRow.name.like("kept%"))
        return int(conn.execute(query).scalar_one())


def figures(waits: list[float], seconds: float) -> dict[str, float]:
    waits = sorted(waits)
    return {
        "n": len(waits),
        "per_s": round(len(waits) / seconds) if seconds else 0,
        "p50_ms": round(percentile(waits, 50) * 1000, 2),
        "p99_ms": round(percentile(waits, 99) * 1000, 2),
    }


async def one_kind(
    db: Database, write: Write, writers: int, seconds: float, commits: Callable[[], int]
) -> dict[str, float]:
    waits: list[float] = []
    stop = time.perf_counter() + seconds
    count = [0]

    async def writer() -> None:
        while time.perf_counter() < stop:
            count[0] += 1
            t0 = time.perf_counter()
            future = write(db, count[0])
            assert future is not None
            await until_committed(future, 30)
            waits.append(time.perf_counter() - t0)

    commits_before, cpu_before, started = commits(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    took = time.perf_counter() - started
    out = figures(waits, took)
    out["cpu_ms"] = round((time.process_time() - cpu_before) / len(waits) * 1000, 3)
    out["per_commit"] = round(len(waits) / max(commits() - commits_before, 1), 1)
    return out


async def one_database(url: str, args: argparse.Namespace) -> dict[str, Any]:
    db = Database(url)
    db.open()
    try:
        assert db.engine is not None
        now = time.time()
        for i in range(SESSIONS):  # the sessions whose saved work is reported
            db.open_session(
                {
                    "pod_uid": f"pod-{i}",
                    "namespace": "default",
                    "pod": f"jupyter-user{i}",
                    "user": f"user{i}",
                    "server": "",
                    "charged": f"user:user{i}",
                    "pool": "pool-00",
                    "gpus": 1,
                    "over_quota": False,
                    "started": now,
                    "last_seen": now,
                }
            )
        kept = [
            {"name": f"kept{i}", "document": json.dumps({"kind": "booking", "name": f"kept{i}"})}
            | {"created_by": "admin", "created": now, "changed_by": "admin", "changed": now}
            for i in range(1, args.kept_bookings + 1)
        ]
        for start in range(0, len(kept), 10_000):
            db.bookings_put(kept[start : start + 10_000])
        assert db.flush(120)
        commits = count_commits(db.engine)
        result: dict[str, Any] = {"baseline_commit_alone": commit_alone(url, args.baseline_n)}
        base = result["baseline_commit_alone"]
        for name, write in KINDS.items():
            got = await one_kind(db, write, args.writers, args.durable_seconds, commits)
            if write is booking_deletion:  # each deletion dropped a row (none ran out)
                left = kept_left(db.engine)
                got["rows_dropped"] = len(kept) - left
                if got["n"] > len(kept):
                    print(f"    more deletions than --kept-bookings {len(kept)}", file=sys.stderr)
            got["p50_x_commit"] = round(got["p50_ms"] / base["p50_ms"], 2)
            got["p99_x_commit"] = round(got["p99_ms"] / base["p99_ms"], 2)
            result[name] = got
            print(f"    {name}: {got}", file=sys.stderr)
        return result
    finally:
        db.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    part = parser.add_argument_group("durable writes (--only durable: durable_writes.py)")
    part.add_argument("--writers", type=int, default=16, help="concurrent writers")
    part.add_argument("--durable-seconds", type=float, default=5.0, help="seconds per kind")
    part.add_argument("--baseline-n", type=int, default=200, help="rows committed alone")
    part.add_argument(
        "--kept-bookings",
        type=int,
        default=100_000,
        help="bookings put before the deletions are measured (more than a run deletes)",
    )
