"""Benchmark of what awaiting a durable write's commit costs the event loop
(``jupyter_gpupool.service.commits``), apart from the database.

``--waiters`` asyncio tasks (the service's handlers under a spawn storm) each queue a write and
await its future, one after the other, ``--rounds`` times; a thread takes the queued writes in
batches and completes their concurrent futures, as the database's writer does after a commit
(no database: what is measured is the wait, not the commit). Measured twice in the same run:

- ``until_committed``: as the service awaits now (one wake of the loop per batch);
- the baseline, ``wrap_future``: ``asyncio.wait_for(asyncio.wrap_future(future), timeout)``, as
  it awaited before (a wake of the loop per future, and two more hops through it).

Figures: wall and CPU microseconds per wait, loop wakes from the thread per wait, and
``wrap_future_x_until_committed``: the baseline's CPU per wait over the service's. Prints one JSON
line. Run::

    python benchmarks/bench_commit_waits.py
    python benchmarks/bench_commit_waits.py --rounds 200     # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_gpupool.service.commits import until_committed


async def wrapped(future: Future[None], timeout: float) -> None:
    await asyncio.wait_for(asyncio.wrap_future(future), timeout)


async def measure(kind: str, rounds: int, waiters: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    wait = until_committed if kind == "until_committed" else wrapped
    queue: list[Future[None]] = []
    cond = threading.Condition()
    stopping = False
    wakes = 0
    real_wake = loop.call_soon_threadsafe

    def counted(*args: Any, **kw: Any) -> Any:
        nonlocal wakes
        wakes += 1
        return real_wake(*args, **kw)

    def writer() -> None:
        while True:
            with cond:
                while not queue and not stopping:
                    cond.wait()
                if not queue:
                    return
                batch = queue[:]
                queue.clear()
            for future in batch:
                if future.set_running_or_notify_cancel():
                    future.set_result(None)

    async def handler() -> None:
        for _ in range(rounds):
            future: Future[None] = Future()
            with cond:
                queue.append(future)
                cond.notify()
            await wait(future, 30)

    thread = threading.Thread(target=writer, name="writer")
    thread.start()
    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(handler() for _ in range(waiters)))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        loop.call_soon_threadsafe = real_wake  # type: ignore[method-assign]
        with cond:
            stopping = True
            cond.notify()
        thread.join()
    n = rounds * waiters
    return {
        "wall_us": round(1e6 * wall / n, 2),
        "cpu_us": round(1e6 * cpu / n, 2),
        "wakes_per_wait": round(wakes / n, 3),
    }


def main(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": args.rounds, "waiters": args.waiters}
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):  # interleaved, the best of each: less of the machine's noise
        for kind in ("until_committed", "wrap_future"):
            got = asyncio.run(measure(kind, args.rounds, args.waiters))
            if kind not in best or got["cpu_us"] < best[kind]["cpu_us"]:
                best[kind] = got
    out["until_committed"] = best["until_committed"]
    out["baseline_wrap_future"] = best["wrap_future"]
    out["wrap_future_x_until_committed"] = round(
        best["wrap_future"]["cpu_us"] / max(best["until_committed"]["cpu_us"], 1e-9), 2
    )
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3000, help="waits per waiter")
    parser.add_argument("--waiters", type=int, default=16, help="concurrent handlers")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the best kept")
    print(json.dumps(main(parser.parse_args())))
