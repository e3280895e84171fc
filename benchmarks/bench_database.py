"""Benchmark of the service's database (``c.GPUPoolService.db_url``): what it costs admissions,
and how big it grows.

1. **Admission latency, database off vs on, same run.** Builds a simulated cluster (default
   5,000 nodes x 8 GPUs in 50 pools, 20,000 running server pods, as ``bench_service.py``), then
   starts the service as its own process against it once per database: none (``db_url=""``), an
   SQLite file, and PostgreSQL when ``tests/pg.py`` can start a throwaway server (else a line says
   why it is left out). Each run samples every ``--history-interval`` (1 s: the samples, the
   ledger's tick and its ``seen_open`` (every open session) happen during the measurement, 60 times
   as often as by default) while ``--clients`` clients admit 1 GPU and release it again, and the
   simulator starts and deletes ``--churn`` server pods a second (the ledger opens and closes
   their sessions). A run with a database waits for the ledger to have opened a session per
   running pod before measuring. Figures: admission and release p50/p99 per run, and
   ``on_x_off``: each database's admission p50/p99 over the run without (the database's cost,
   about 1: noise can put it below); the rows the service wrote during the measurement show that
   it was writing.

2. **Size after 30 simulated days.** No service and no waiting: a fake clock drives the
   :class:`~jupyter_gpupool.db.store.Database` of an SQLite file with what a ``--nodes`` cluster
   produces: a sample per pool every 60 s, server sessions of ``--session-hours`` (1-8 h) holding
   ``--occupancy`` of the GPUs, a few admin changes a day, ``prune(now, 7, 90)`` every hour (as the
   service does). The last ``--api-hours`` go through the Database's own queued writes, tick by
   tick, as the service sends them (``add_samples``, ``open_session``, ``close_session``, ``seen_open``,
   flushed every tick): the write throughput and how many times faster than real time that is
   (``headroom``). The hours before are loaded in bulk (the same rows and updates, as plain
   executemany statements, ``seen_open`` once an hour instead of every minute): through the queued writes
   the 30 days take far longer than this benchmark should (``--api-hours`` = all hours does it).
   Figures: the file's size, bytes per row, rows per table, and the cost of one tick's ``seen_open``
   and one ``prune`` on the 30-day database.

3. **Durable writes** (``durable_writes.py``): each write an answer waits for (a reservation, a
   place in line, a booking and its deletion, saved work, a session's end before a reclaim),
   ``--writers`` at a time through the service's Database, on SQLite and PostgreSQL: answers a second, wait p50 / p99, CPU per answer, answers
   per commit, and the waits over one row committed alone in the same run.

Prints one JSON line on stdout, and a summary table on stderr. Run::

    python benchmarks/bench_database.py            # full size (a few minutes)
    python benchmarks/bench_database.py --quick    # tiny: 20 nodes, 1 simulated day
    python benchmarks/bench_database.py --only durable    # part 3 alone
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import heapq
import json
import math
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import durable_writes
from bigcluster import (
    ADMIN_TOKEN,
    SYNC_TIMEOUT,
    cluster_spec,
    hub_models,
    percentile,
    populate,
    rss_mb,
    server_pod,
    write_pools,
)
from service_process import start_hub_stub, start_service, wait_answering
from sqlalchemy import bindparam, create_engine, func, insert, select, update

from jupyter_gpupool.db.models import ChangeRecord, ServerSession, UsageSample
from jupyter_gpupool.db.store import Database
from jupyter_gpupool.sim import SimCluster

HERE = Path(__file__).resolve().parent

# --- 1. admission latency with the database off and on ------------------------------------------


def running_pods(cluster: SimCluster) -> int:
    return sum(
        1 for p in cluster.store.iter("pods") if (p.get("status") or {}).get("phase") == "Running"
    )


def db_counts(url: str) -> dict[str, int]:
    """Rows the service wrote: samples, sessions, sessions still open."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                "samples": conn.scalar(select(func.count()).select_from(UsageSample)) or 0,
                "sessions": conn.scalar(select(func.count()).select_from(ServerSession)) or 0,
                "open_sessions": conn.scalar(
                    select(func.count())
                    .select_from(ServerSession)
                    .where(ServerSession.stopped.is_(None))
                )
                or 0,
            }
    finally:
        engine.dispose()


async def poll(what: str, check: Any, timeout: float) -> float:
    """Seconds until ``check()`` is true (polled); SystemExit after ``timeout``."""
    t0 = time.perf_counter()
    while not await asyncio.to_thread(check):
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.2)
    return time.perf_counter() - t0


class Churn:
    """Server pods started and deleted at ``rate`` a second in the simulator, ``window`` alive at
    a time: the ledger opens and closes their sessions during the measurement."""

    def __init__(self, cluster: SimCluster, args: argparse.Namespace, window: int = 50):
        self.cluster, self.args, self.window = cluster, args, window
        self.alive: list[str] = []
        self.started = 0
        self.deleted = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        if self.args.churn <= 0:
            return
        store, a = self.cluster.store, self.args
        period = 1 / a.churn
        next_at = time.perf_counter()
        while True:
            i = self.started
            node = (i * 7919) % a.nodes
            name = f"churn-{uuid.uuid4().hex[:10]}"
            body = server_pod(
                name,
                f"node-{node:05d}",
                f"pool-{node % a.pools:02d}",
                f"c{i % 500}",
                f"g{i % a.groups:02d}",
            )
            store.create("pods", "default", body)
            self.alive.append(name)
            self.started += 1
            if len(self.alive) > self.window:
                self._delete(self.alive.pop(0))
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    def _delete(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.cluster.store.delete("pods", "default", name, grace_period=0)
            self.deleted += 1

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for name in self.alive:  # the next run starts from the same cluster
            self._delete(name)
        self.alive = []


class Client:
    """Persistent connections (aiohttp), as a long-lived spawner keeps them."""

    def __init__(self, clients: int):
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients))

    async def call(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"token {ADMIN_TOKEN}"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        async with self.session.request(method, url, data=data, headers=headers) as resp:
            raw = await resp.read()
            return resp.status, (json.loads(raw) if raw else None)

    async def close(self) -> None:
        await self.session.close()


async def admit_and_release(
    client: Client, base: str, args: argparse.Namespace, seconds: float, seed: int
) -> dict[str, Any]:
    """``--clients`` loops of admit 1 GPU, release it, for ``seconds``: latencies and codes."""
    pools = [f"pool-{p:02d}" for p in range(args.pools)]
    admit_ms: list[float] = []
    release_ms: list[float] = []
    admit_codes: dict[int, int] = {}
    release_codes: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def worker(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        while time.perf_counter() < deadline:
            user = rng.randrange(2000)
            body = {
                "user": f"u{user}",
                "groups": [f"g{user % args.groups:02d}"],
                "pools": rng.sample(pools, min(3, len(pools))),
                "gpus": 1,
            }
            t = time.perf_counter()
            code, answer = await client.call("POST", base + "api/v1/admissions", body)
            admit_ms.append((time.perf_counter() - t) * 1000)
            admit_codes[code] = admit_codes.get(code, 0) + 1
            if code != 201:
                continue
            t = time.perf_counter()
            code, _ = await client.call("DELETE", base + f"api/v1/admissions/{answer['id']}")
            release_ms.append((time.perf_counter() - t) * 1000)
            release_codes[code] = release_codes.get(code, 0) + 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(args.clients)))
    return {
        "admit_ms": admit_ms,
        "release_ms": release_ms,
        "admit_codes": admit_codes,
        "release_codes": release_codes,
        "seconds": time.perf_counter() - t0,
    }


async def one_run(
    name: str,
    db_url: str,
    cluster: SimCluster,
    pools_dir: Path,
    hub_api: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc, base = start_service(
        cluster.kubeconfig,
        pools_dir,
        hub_api,
        f"--GPUPoolService.history_interval={args.interval}",
        SYNC_TIMEOUT,
        db_url=db_url,
    )
    client = Client(args.clients)
    churn = Churn(cluster, args)
    try:

        async def answers() -> bool:
            return (await client.call("GET", base + "api/v1/"))[0] == 200

        await wait_answering(proc, answers, timeout=900)
        startup_s = time.perf_counter() - t0
        catch_up_s = 0.0
        if db_url:  # the ledger's first sessions, one per running pod, before measuring
            catch_up_s = await poll(
                "the ledger's first sessions",
                lambda: db_counts(db_url)["open_sessions"] >= args.pods,
                600,
            )
        await admit_and_release(client, base, args, args.warmup, seed=0)
        before = db_counts(db_url) if db_url else None
        churn.start()
        phase = await admit_and_release(client, base, args, args.seconds, seed=1)
        await churn.stop()
        rss = rss_mb(proc.pid)
    finally:
        await client.close()
        await churn.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    adm, rel = phase["admit_ms"], phase["release_ms"]
    result: dict[str, Any] = {
        "admissions": len(adm),
        "admission_p50_ms": round(statistics.median(adm), 2),
        "admission_p99_ms": round(percentile(adm, 99), 2),
        "admissions_per_s": round(len(adm) / phase["seconds"]),
        "admission_status": phase["admit_codes"],
        "release_p50_ms": round(statistics.median(rel), 2) if rel else None,
        "release_p99_ms": round(percentile(rel, 99), 2) if rel else None,
        "release_status": phase["release_codes"],
        "churn_pods": churn.started,
        "service_rss_mb": round(rss, 1),
        "startup_s": round(startup_s, 2),
        "ledger_catch_up_s": round(catch_up_s, 2),
    }
    if db_url and before is not None:
        after = db_counts(db_url)  # the service wrote what it had queued when it stopped
        result["samples_written"] = after["samples"] - before["samples"]
        result["sessions_written"] = after["sessions"] - before["sessions"]
        result["sessions_closed"] = (after["sessions"] - after["open_sessions"]) - (
            before["sessions"] - before["open_sessions"]
        )
    print(f"  {name}: done ({len(adm)} admissions)", file=sys.stderr)
    return result


@contextlib.contextmanager
def postgresql(wanted: bool) -> Iterator[tuple[str | None, str]]:
    """A throwaway PostgreSQL server from tests/pg.py: (URL, '') or (None, why not)."""
    if not wanted:
        yield None, "left out (--no-postgresql)"
        return
    sys.path.insert(0, str(HERE.parent / "tests"))
    try:
        import pg  # tests/pg.py (it skips through pytest when something is missing)

        server_cm = pg.running()
        server = server_cm.__enter__()
    except (Exception, BaseException) as e:  # pytest's skip is a BaseException
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        yield None, f"left out: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return
    try:
        yield server.url, ""
    finally:
        server_cm.__exit__(None, None, None)


async def admission_part(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    t0 = time.perf_counter()
    cluster = SimCluster(cluster_spec(args.nodes, args.pools, args.gpus))
    populate(cluster, args.nodes, args.pools, args.pods, args.groups, servers=args.pods)
    await cluster.start()
    await poll("the simulator's pods to run", lambda: running_pods(cluster) >= args.pods, 600)
    populate_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()  # the simulator's objects: keep the collector from walking them mid-measurement
    runs: dict[str, Any] = {}
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            postgresql(not args.no_postgresql) as (pg_url, pg_why),
        ):
            pools_dir = Path(tmp) / "pools"
            pools_dir.mkdir()
            write_pools(pools_dir, args.pools, args.groups)
            plan = [("off", ""), ("sqlite", f"sqlite:///{tmp}/gpupool.sqlite")]
            if pg_url:
                plan.append(("postgresql", pg_url))
            else:
                print(f"  postgresql: {pg_why}", file=sys.stderr)
                runs["postgresql"] = {"skipped": pg_why}
            for name, url in plan:
                runs[name] = await one_run(name, url, cluster, pools_dir, hub_api, args)
    finally:
        await cluster.stop()
    off = runs["off"]
    ratios = {}
    for name in ("sqlite", "postgresql"):
        r = runs.get(name, {})
        if "admission_p99_ms" in r:
            ratios[f"{name}_p50"] = round(r["admission_p50_ms"] / off["admission_p50_ms"], 2)
            ratios[f"{name}_p99"] = round(r["admission_p99_ms"] / off["admission_p99_ms"], 2)
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "pools": args.pools,
        "clients": args.clients,
        "seconds": args.seconds,
        "history_interval_s": args.interval,
        "churn_per_s": args.churn,
        "populate_s": round(populate_s, 2),
        "runs": runs,
        "on_x_off": ratios,
    }


# --- 2. the database after 30 simulated days ----------------------------------------------------

#: GPUs per session, and how often (mean 2.35)
SESSION_GPUS = ((1, 0.55), (2, 0.2), (4, 0.15), (8, 0.1))
#: how sessions end, and how often
ENDINGS = (("stopped", 0.7), ("culled", 0.2), ("reclaimed", 0.05), ("failed", 0.05))
#: 2026-01-01 plus a fraction: the service's clock is time.time(), never a round number
EPOCH = 1_767_225_600.0 + 0.318


def poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw (Knuth's for small means, the normal approximation above)."""
    if lam > 60:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


class Workload:
    """The sessions of a ``nodes`` x ``gpus`` cluster whose sessions hold ``occupancy`` of the
    GPUs on average: arrivals at a steady rate, each session 1-8 GPUs for ``hours`` hours,
    started at the steady state (the sessions open at the start started before it)."""

    def __init__(self, rng: random.Random, args: argparse.Namespace, t0: float):
        self.rng, self.args = rng, args
        self.pool_gpus = [0] * args.pools
        for i in range(args.nodes):
            self.pool_gpus[i % args.pools] += args.gpus
        self.used = [0] * args.pools
        self.over = [0] * args.pools
        self.open: dict[str, tuple[int, int, bool]] = {}  # uid -> pool, gpus, over quota
        self.ends: list[tuple[float, str]] = []
        lo, hi = args.session_hours
        self.mean_s = (lo + hi) / 2 * 3600
        mean_gpus = sum(g * w for g, w in SESSION_GPUS)
        self.target = args.occupancy * sum(self.pool_gpus) / mean_gpus  # sessions open
        self.rate = self.target / self.mean_s  # arrivals a second
        self.opened = self.closed = 0
        self.seed: list[dict[str, Any]] = []
        for _ in range(round(self.target)):
            duration = rng.uniform(lo, hi) * 3600
            started = t0 - rng.uniform(0, duration)
            fields = self._new(started, t0, duration)
            if fields is not None:
                self.seed.append(fields)

    def _new(self, started: float, seen: float, duration: float) -> dict[str, Any] | None:
        rng, a = self.rng, self.args
        gpus = rng.choices([g for g, _ in SESSION_GPUS], [w for _, w in SESSION_GPUS])[0]
        pool = rng.randrange(a.pools)
        if self.used[pool] + gpus > self.pool_gpus[pool]:
            return None  # the pool is full: it stays pending (not a session)
        user = rng.randrange(a.users)
        over = rng.random() < 0.1
        uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        named = rng.random() < 0.3
        server = rng.choice(("gpu", "training", "exp-a", "big")) if named else ""
        self.used[pool] += gpus
        self.over[pool] += gpus if over else 0
        self.open[uid] = (pool, gpus, over)
        heapq.heappush(self.ends, (started + duration, uid))
        self.opened += 1
        return {
            "pod_uid": uid,
            "namespace": "jhub",
            "pod": f"jupyter-user-{user:05d}" + (f"--{server}" if server else ""),
            "user": f"user-{user:05d}",
            "server": server,
            "charged": (
                f"group:team-{user % a.user_groups:03d}" if rng.random() < 0.8 else f"user:{user}"
            ),
            "pool": f"pool-{pool:02d}",
            "platform": "nvidia-a100",
            "gpu_type": "A100-80G",
            "gpus": gpus,
            "over_quota": over,
            "started": started,
            "stopped": None,
            "last_seen": seen,
            "ended": None,
        }

    def step(
        self, now: float, dt: float
    ) -> tuple[list[dict[str, Any]], list[tuple[str, float, str]]]:
        """What happened in the ``dt`` seconds before ``now``: sessions opened, closed."""
        rng = self.rng
        closes = []
        while self.ends and self.ends[0][0] <= now:
            end, uid = heapq.heappop(self.ends)
            pool, gpus, over = self.open.pop(uid)
            self.used[pool] -= gpus
            self.over[pool] -= gpus if over else 0
            ended = rng.choices([e for e, _ in ENDINGS], [w for _, w in ENDINGS])[0]
            closes.append((uid, end, ended))
            self.closed += 1
        lo, hi = self.args.session_hours
        opens = []
        for _ in range(poisson(rng, self.rate * dt)):
            started = now - rng.uniform(0, dt)
            fields = self._new(started, now, rng.uniform(lo, hi) * 3600)
            if fields is not None:
                opens.append(fields)
        return opens, closes

    def samples(self) -> list[dict[str, Any]]:
        """A sample per pool, as the service's Records.sample sends them."""
        return [
            {
                "pool": f"pool-{p:02d}",
                "gpu_total": self.pool_gpus[p],
                "gpu_used": self.used[p],
                "gpu_over_quota": self.over[p],
                "gpu_pending": self.rng.choice((0, 0, 0, 1, 2)),
            }
            for p in range(self.args.pools)
        ]


CLOSE = (
    update(ServerSession.__table__)
    .where(ServerSession.pod_uid == bindparam("b_uid"), ServerSession.stopped.is_(None))
    .values(stopped=bindparam("b_stopped"), ended=bindparam("b_ended"))
)


def load_hour(
    db: Database,
    samples: list[dict[str, Any]],
    opens: list[dict[str, Any]],
    closes: list[tuple[str, float, str]],
) -> None:
    """An hour's rows and updates in one transaction, as executemany statements (the bulk
    part: what the queued writes would write, without their per-row ORM work)."""
    assert db.engine is not None
    with db.engine.begin() as conn:
        if samples:
            conn.execute(insert(UsageSample.__table__), samples)
        if opens:
            conn.execute(insert(ServerSession.__table__), opens)
        if closes:
            conn.execute(CLOSE, [{"b_uid": u, "b_stopped": s, "b_ended": e} for u, s, e in closes])


def change_text(rng: random.Random, args: argparse.Namespace) -> str:
    pool = f"pool-{rng.randrange(args.pools):02d}"
    group = f"team-{rng.randrange(args.user_groups):03d}"
    g, limit = rng.choice((8, 16, 24, 32)), rng.choice((64, 96, 128))
    return f"quota of group {group} in {pool}: guaranteed {g}, limit {limit} (was 8, 64)"


def sqlite_file_figures(path: Path) -> dict[str, Any]:
    """The file's pages, and bytes per table with its indexes (SQLite's dbstat)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        per_table: dict[str, float] = {}
        with contextlib.suppress(sqlite3.DatabaseError):  # dbstat is an optional module
            names = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
            for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
                table = names.get(name, name)
                per_table[table] = per_table.get(table, 0) + size
        return {
            "page_size": page,
            "pages": pages,
            "free_pages": free,
            "mb_per_table": {t: round(b / 1e6, 1) for t, b in sorted(per_table.items())},
        }
    finally:
        conn.close()


def size_part(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(16)
    hours = round(args.days * 24)
    api_hours = min(args.api_hours, hours)
    tick = 60.0  # the default history_interval
    ticks_per_hour = round(3600 / tick)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpupool.sqlite"
        # no gathering wait between batches: each tick's flush would wait for it
        db = Database(f"sqlite:///{path}", batch_seconds=0)
        db.open()
        work = Workload(rng, args, EPOCH)
        load_hour(db, [], work.seed, [])  # the sessions running when the service started
        changes = 0
        prune_ms: list[float] = []
        tick_ms: list[float] = []
        api_rows = 0
        t_load = t_api = 0.0
        now = EPOCH
        for h in range(hours):
            through_api = h >= hours - api_hours
            t = time.perf_counter()
            db.prune(now, args.raw_days, args.keep_days)  # on the hour, as Records.sample
            db.flush(600)
            prune_ms.append((time.perf_counter() - t) * 1000)
            samples: list[dict[str, Any]] = []
            opens: list[dict[str, Any]] = []
            closes: list[tuple[str, float, str]] = []
            t_hour = time.perf_counter()
            for m in range(ticks_per_hour):
                now = EPOCH + (h * ticks_per_hour + m + 1) * tick + rng.uniform(0, 0.05)
                o, c = work.step(now, tick)
                if through_api:
                    t = time.perf_counter()
                    db.add_samples(now, work.samples())
                    for fields in o:
                        db.open_session(fields)
                    for uid, stopped, ended in c:
                        db.close_session(uid, stopped, ended)
                    db.seen_open(now)
                    db.flush(600)
                    tick_ms.append((time.perf_counter() - t) * 1000)
                    api_rows += args.pools + len(o) + len(c) + len(work.open)
                else:
                    samples += [{"time": now, "hourly": False, **r} for r in work.samples()]
                    opens += o
                    closes += c
            if not through_api:
                load_hour(db, samples, opens, closes)
                db.seen_open(now)  # once an hour here (every tick in the service)
            if rng.random() < args.changes_per_day / 24:
                db.add_change(now, "admin", change_text(rng, args), "api")
                changes += 1
            db.flush(600)
            if through_api:
                t_api += time.perf_counter() - t_hour
            else:
                t_load += time.perf_counter() - t_hour
            if (h + 1) % 24 == 0:
                print(f"  size: day {(h + 1) // 24} of {args.days:g}", file=sys.stderr)
        # one tick's seen and one sample on the finished database
        t = time.perf_counter()
        db.seen_open(now)
        db.flush(600)
        seen_ms = (time.perf_counter() - t) * 1000
        assert db.engine is not None
        with db.engine.connect() as conn:
            raw = conn.scalar(
                select(func.count()).select_from(UsageSample).where(UsageSample.hourly.is_(False))
            )
            hourly = conn.scalar(
                select(func.count()).select_from(UsageSample).where(UsageSample.hourly.is_(True))
            )
            sessions = conn.scalar(select(func.count()).select_from(ServerSession))
            still_open = conn.scalar(
                select(func.count())
                .select_from(ServerSession)
                .where(ServerSession.stopped.is_(None))
            )
            n_changes = conn.scalar(select(func.count()).select_from(ChangeRecord))
            oldest = conn.scalar(select(func.min(UsageSample.time)))
        db.close()  # the last connection: SQLite folds the WAL into the file
        wal = Path(f"{path}-wal")
        size = path.stat().st_size
        figures = sqlite_file_figures(path)
        t = time.perf_counter()
        with contextlib.closing(__import__("sqlite3").connect(path)) as conn:
            conn.execute("VACUUM")
        vacuum_s = time.perf_counter() - t
        vacuumed = path.stat().st_size
    per_table = figures["mb_per_table"]
    samples_mb = per_table.get("usage_samples", 0.0)
    sessions_mb = per_table.get("server_sessions", 0.0)
    api_seconds = api_hours * 3600
    return {
        "nodes": args.nodes,
        "gpus": args.nodes * args.gpus,
        "pools": args.pools,
        "days": args.days,
        "occupancy": args.occupancy,
        "session_hours": list(args.session_hours),
        "sessions_open_mean": round(work.target),
        "sessions_per_day": round(work.rate * 86400),
        "size_mb": round(size / 1e6, 1),
        "wal_mb_left": round(wal.stat().st_size / 1e6, 1) if wal.exists() else 0.0,
        "size_after_vacuum_mb": round(vacuumed / 1e6, 1),
        "vacuum_s": round(vacuum_s, 1),
        **figures,
        "rows": {
            "usage_samples_raw": raw,
            "usage_samples_hourly": hourly,
            "server_sessions": sessions,
            "server_sessions_open": still_open,
            "changes": n_changes,
        },
        "oldest_sample_days": round((now - (oldest or now)) / 86400, 1),
        "bytes_per_sample": round(samples_mb * 1e6 / max(1, (raw or 0) + (hourly or 0))),
        "bytes_per_session": round(sessions_mb * 1e6 / max(1, sessions or 0)),
        "sessions_opened": work.opened,
        "sessions_closed": work.closed,
        "bulk_hours": hours - api_hours,
        "bulk_load_s": round(t_load, 1),
        "api_hours": api_hours,
        "api_write_s": round(t_api, 2),
        "api_rows_per_s": round(api_rows / t_api) if t_api else None,
        "api_headroom": round(api_seconds / t_api) if t_api else None,
        "api_tick_p50_ms": round(statistics.median(tick_ms), 1) if tick_ms else None,
        "api_tick_max_ms": round(max(tick_ms), 1) if tick_ms else None,
        "seen_ms": round(seen_ms, 1),
        "prune_p50_ms": round(statistics.median(prune_ms), 1),
        "prune_max_ms": round(max(prune_ms), 1),
    }


# --- the command ---------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    """The summary, for people."""
    lines = []
    adm = result.get("admission")
    if adm:
        lines.append(
            f"Admission with the database off / on: {adm['nodes']} nodes, {adm['pods']} server "
            f"pods, {adm['clients']} clients for {adm['seconds']:g} s per run, sampling every "
            f"{adm['history_interval_s']:g} s, {adm['churn_per_s']:g} pods started+deleted/s"
        )
        head = (
            f"  {'database':<11}{'admissions':>11}{'p50 ms':>9}{'p99 ms':>9}{'/s':>7}"
            f"{'release p99':>13}{'samples':>9}{'sessions':>10}{'p50 x off':>11}{'p99 x off':>11}"
        )
        lines.append(head)
        for name, r in adm["runs"].items():
            if "skipped" in r:
                lines.append(f"  {name:<11}{r['skipped']}")
                continue
            ratio = adm["on_x_off"]
            p50x = ratio.get(f"{name}_p50", 1.0 if name == "off" else None)
            p99x = ratio.get(f"{name}_p99", 1.0 if name == "off" else None)
            lines.append(
                f"  {name:<11}{r['admissions']:>11}{r['admission_p50_ms']:>9}"
                f"{r['admission_p99_ms']:>9}{r['admissions_per_s']:>7}"
                f"{r['release_p99_ms']!s:>13}{r.get('samples_written', '-'):>9}"
                f"{r.get('sessions_written', '-'):>10}{p50x!s:>11}{p99x!s:>11}"
            )
    size = result.get("size")
    if size:
        rows = size["rows"]
        lines += [
            "",
            f"SQLite after {size['days']:g} simulated days: {size['nodes']} nodes "
            f"({size['gpus']} GPUs), {size['pools']} pools sampled every 60 s, "
            f"~{size['sessions_open_mean']} sessions open, ~{size['sessions_per_day']} a day",
            f"  file                 {size['size_mb']} MB ({size['size_after_vacuum_mb']} MB "
            f"after VACUUM; {size['free_pages']} free pages of {size['pages']})",
            f"  per table (MB)       {size['mb_per_table']}",
            f"  usage samples        {rows['usage_samples_raw']} raw + "
            f"{rows['usage_samples_hourly']} hourly, {size['bytes_per_sample']} B each",
            f"  server sessions      {rows['server_sessions']} ({rows['server_sessions_open']} "
            f"open), {size['bytes_per_session']} B each",
            f"  changes              {rows['changes']}",
            f"  queued writes        {size['api_rows_per_s']} rows/s over the last "
            f"{size['api_hours']} h ({size['api_headroom']}x real time); tick p50 "
            f"{size['api_tick_p50_ms']} ms, max {size['api_tick_max_ms']} ms",
            f"  one tick's seen      {size['seen_ms']} ms ({rows['server_sessions_open']} open)",
            f"  hourly prune         p50 {size['prune_p50_ms']} ms, max {size['prune_max_ms']} ms",
            f"  bulk load            {size['bulk_hours']} h in {size['bulk_load_s']} s",
        ]
    for name, runs in (result.get("durable") or {}).items():
        lines += ["", f"Durable writes on {name} (wait p50 / p99 ms, x one commit alone):"]
        if isinstance(runs, str):
            lines.append(f"  {runs}")
            continue
        base = runs["baseline_commit_alone"]
        lines.append(f"  one commit alone     {base['p50_ms']} / {base['p99_ms']}")
        for kind, r in runs.items():
            if kind != "baseline_commit_alone":
                lines.append(
                    f"  {kind:<21}{r['p50_ms']} / {r['p99_ms']} ({r['p50_x_commit']}x / "
                    f"{r['p99_x_commit']}x), {r['per_s']}/s, {r['cpu_ms']} ms CPU, "
                    f"{r['per_commit']} per commit"
                )
    return "\n".join(lines)


def durable_part(args: argparse.Namespace) -> dict[str, Any]:
    """Part 3 (durable_writes.py): each durable write's answer on SQLite and PostgreSQL."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        print("  sqlite:", file=sys.stderr)
        out["sqlite"] = asyncio.run(durable_writes.one_database(f"sqlite:///{tmp}/d.db", args))
    with postgresql(not args.no_postgresql) as (url, why):
        if url is None:
            out["postgresql"] = why
        else:
            print("  postgresql:", file=sys.stderr)
            out["postgresql"] = asyncio.run(durable_writes.one_database(url, args))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", choices=("admission", "size", "durable"), help="run one part only"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    # part 1
    parser.add_argument("--pods", type=int, default=20000, help="running server pods (part 1)")
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=3, help="seconds before measuring")
    parser.add_argument("--interval", type=float, default=1.0, help="history_interval (part 1)")
    parser.add_argument("--churn", type=float, default=20, help="pods started+deleted a second")
    parser.add_argument("--no-postgresql", action="store_true", help="leave PostgreSQL out")
    # part 2
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--occupancy", type=float, default=0.5, help="of the GPUs, in sessions")
    parser.add_argument(
        "--session-hours", type=float, nargs=2, default=(1.0, 8.0), metavar=("MIN", "MAX")
    )
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--user-groups", type=int, default=200)
    parser.add_argument("--changes-per-day", type=float, default=20)
    parser.add_argument("--raw-days", type=float, default=7, help="history_raw_days")
    parser.add_argument("--keep-days", type=float, default=90, help="history_days")
    parser.add_argument(
        "--api-hours",
        type=int,
        default=2,
        help="the last hours written through the Database's queued writes (the rest in bulk)",
    )
    durable_writes.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.pools, args.pods, args.groups = 20, 3, 40, 4
        args.clients, args.seconds, args.warmup, args.churn = 2, 2.5, 0.5, 5
        args.no_postgresql = True
        args.days, args.users, args.user_groups, args.api_hours = 1, 30, 6, 2
        args.writers, args.durable_seconds, args.baseline_n = 4, 1.0, 20
        args.kept_bookings = 20_000  # more than a second deletes (SQLite: up to ~10,000/s)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    result: dict[str, Any] = {}
    if args.only in (None, "admission"):
        print("admission latency, database off / on:", file=sys.stderr)
        result["admission"] = asyncio.run(admission_part(args))
    if args.only in (None, "size"):
        print(f"database size after {args.days:g} simulated days:", file=sys.stderr)
        result["size"] = size_part(args)
    if args.only in (None, "durable"):
        print(f"durable writes, {args.writers} writers:", file=sys.stderr)
        result["durable"] = durable_part(args)
    print(table(result), file=sys.stderr)
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
