"""Benchmark: an unrelated request's latency while booking changes are checked.

The service runs in a process of its own against a small simulated cluster (default: 40 nodes x
8 GPUs in 2 pools). A poller GETs ``api/v1/pools`` back to back the whole time; each case sends
booking changes to ``POST api/v1/bookings`` and the poller's latencies while the case runs are
its figure. The **baseline** is the same poller with no booking change, measured first in the
same run. Printed as one JSON line: per case, the status of each answer, how long the booking
requests took, and the poller's p50/p99 in ms and ``p99_x_baseline`` (the case's p99 over the
baseline's p99: 1 is "the booking change did not slow anyone down").

The cases (issue 36), all in pool-00:

- ``weekdays``: five bookings of 1 GPU, Mon-Fri 09:00-17:00 for ``--years`` years each, sent one
  after the other (the fifth is checked against the other four);
- ``daily_beside_weekly``: a weekly booking, then a daily one for ``--daily-years`` years;
- ``one_body``: ``--body`` once bookings of 1 GPU (an hour each, one after the other) in one
  body.

Each case starts from no booking (the bookings of the case before are deleted). Run::

    python benchmarks/bench_bookings.py                     # the testers' sizes
    python benchmarks/bench_bookings.py --years 1 --daily-years 1 --body 2000
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tornado.httpclient
from bigcluster import ADMIN_TOKEN, SYNC_TIMEOUT, build, hub_models, percentile, write_pools
from service_process import (
    answers_ok,
    quiet,
    start_hub_stub,
    start_service,
    stop_service,
    wait_answering,
)

UNRELATED = "api/v1/pools"
START = dt.date(2027, 1, 4)  # a Monday


def booking(name: str, window: dict[str, Any], **members: list[str]) -> dict[str, Any]:
    """A booking of one GPU in pool-00 for ``members`` (``groups=[...]`` or ``users=[...]``)."""
    return {
        "kind": "booking",
        "version": "v0.1",
        "booking": {"name": name},
        "pool": "pool-00",
        "gpus": 1,
        **members,
        "window": window,
    }


def weekly(name: str, days: list[str], years: float, start: str, end: str) -> dict[str, Any]:
    window = {
        "weekly": {"days": days, "start": start, "end": end},
        "from": START.isoformat(),
        "until": (START + dt.timedelta(days=round(365 * years))).isoformat(),
        "timezone": "Europe/Berlin",
    }
    return booking(name, window, groups=["g00"])


def once(name: str, hour: int) -> dict[str, Any]:
    start = dt.datetime.combine(START, dt.time()) + dt.timedelta(hours=hour)
    window = {
        "once": {
            "start": f"{start:%Y-%m-%dT%H:%M}",
            "end": f"{start + dt.timedelta(hours=1):%Y-%m-%dT%H:%M}",
        },
        "timezone": "UTC",
    }
    return booking(name, window, users=["u0"])


def cases(args: argparse.Namespace) -> dict[str, list[list[dict[str, Any]]]]:
    """Per case, its requests, each a list of booking documents (one body)."""
    weekdays = ["mon", "tue", "wed", "thu", "fri"]
    every_day = [*weekdays, "sat", "sun"]
    return {
        "weekdays": [
            [weekly(f"weekdays-{i}", weekdays, args.years, "09:00", "17:00")] for i in range(5)
        ],
        "daily_beside_weekly": [
            [weekly("weekly", ["tue"], args.daily_years, "10:00", "12:00")],
            [weekly("daily", every_day, args.daily_years, "08:00", "18:00")],
        ],
        "one_body": [[once(f"body-{i}", i) for i in range(args.body)]],
    }


class Poller:
    """GETs of ``url`` back to back until stopped; the latencies (ms) of those started since
    :meth:`mark`."""

    def __init__(self, url: str):
        self.url = url
        self.http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        self.times: list[tuple[float, float]] = []  # (started, ms)
        self.failed = 0
        self._stop = False

    async def run(self) -> None:
        while not self._stop:
            t0 = time.perf_counter()
            resp = await self.http.fetch(
                self.url,
                headers={"Authorization": f"token {ADMIN_TOKEN}"},
                raise_error=False,
                request_timeout=600,
            )
            if resp.code != 200:
                self.failed += 1
            self.times.append((t0, 1000 * (time.perf_counter() - t0)))
            await asyncio.sleep(0.01)

    def since(self, t: float) -> list[float]:
        return [ms for started, ms in self.times if started >= t]

    def stop(self) -> None:
        self._stop = True


def figures(times: list[float]) -> dict[str, Any]:
    if not times:
        return {"requests": 0}
    return {
        "requests": len(times),
        "p50_ms": round(statistics.median(times), 1),
        "p99_ms": round(percentile(times, 99), 1),
        "max_ms": round(max(times), 1),
    }


async def run_case(
    http: tornado.httpclient.AsyncHTTPClient,
    base: str,
    poller: Poller,
    requests: list[list[dict[str, Any]]],
) -> dict[str, Any]:
    headers = {"Authorization": f"token {ADMIN_TOKEN}", "Content-Type": "application/json"}
    t0 = time.perf_counter()
    statuses, took = [], []
    for docs in requests:
        body = (
            json.dumps(docs[0]) if len(docs) == 1 else "\n---\n".join(json.dumps(d) for d in docs)
        )
        t = time.perf_counter()
        resp = await http.fetch(
            base + "api/v1/bookings",
            method="POST",
            body=body,
            headers=headers if len(docs) == 1 else {**headers, "Content-Type": "application/yaml"},
            raise_error=False,
            request_timeout=1200,
        )
        took.append(round(time.perf_counter() - t, 2))
        statuses.append(resp.code)
        if resp.code >= 400:
            print(f"{resp.code}: {resp.body[:300]!r}", file=sys.stderr)
    await asyncio.sleep(0.2)  # the poller's request under way when the last answer came
    during = poller.since(t0)
    # start the next case from no booking
    listed = await http.fetch(
        base + "api/v1/bookings", headers=headers, raise_error=False, request_timeout=600
    )
    if listed.code == 200:
        for row in json.loads(listed.body)["bookings"]:
            await http.fetch(
                base + f"api/v1/bookings/{row['name']}",
                method="DELETE",
                headers=headers,
                raise_error=False,
            )
    return {"statuses": statuses, "booking_request_s": took, **figures(during)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    hub_api = start_hub_stub(hub_models())
    built = await build(args)
    cluster = built.cluster
    out: dict[str, Any] = {
        "nodes": args.nodes,
        "gpus_per_node": args.gpus,
        "pools": args.pools,
        "years": args.years,
        "daily_years": args.daily_years,
        "body": args.body,
    }
    with tempfile.TemporaryDirectory() as tmp:
        pools_dir = Path(tmp) / "pools"
        write_pools(pools_dir, args.pools, args.groups)
        proc, base = start_service(
            cluster.kubeconfig,
            pools_dir,
            hub_api,
            SYNC_TIMEOUT,
            # a body of 6,000 bookings is larger than the default limit
            f"--GPUPoolService.max_body_size={64 * 1024 * 1024}",
        )
        http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        poller = Poller(base + UNRELATED)
        try:
            await wait_answering(proc, answers_ok(base + "api/v1/", ADMIN_TOKEN))
            await quiet(proc.pid)
            task = asyncio.ensure_future(poller.run())
            t0 = time.perf_counter()
            await asyncio.sleep(args.baseline_s)
            baseline = figures(poller.since(t0))
            out["baseline"] = {"path": UNRELATED, **baseline}
            for name, requests in cases(args).items():
                if args.only and name not in args.only:
                    continue
                found = await run_case(http, base, poller, requests)
                if "p99_ms" in found and baseline.get("p99_ms"):
                    found["p99_x_baseline"] = round(found["p99_ms"] / baseline["p99_ms"], 2)
                out[name] = found
            poller.stop()
            await task
            out["unrelated_failed"] = poller.failed
        finally:
            http.close()
            stop_service(proc)
            await cluster.stop()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--pools", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--pods", type=int, default=0)
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--years", type=float, default=5)
    parser.add_argument("--daily-years", type=float, default=100)
    parser.add_argument("--body", type=int, default=6000)
    parser.add_argument("--baseline-s", type=float, default=5)
    parser.add_argument("--only", nargs="*", help="cases to run (default: all)")
    print(json.dumps(asyncio.run(main(parser.parse_args()))), flush=True)
