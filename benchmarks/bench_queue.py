"""Benchmark of the fair queue: from a release of GPUs to the next queued admission.

Builds a full cluster (default: 5,000 nodes x 8 GPUs in 50 pools, bench_admission's quotas, every
node's GPUs held by one running server) and puts 1,000 requests in line through the service's
admission desk (``queue=True``: each answered 202). Then, ``--releases`` times: a server on a
random Ready node stops (the pod's DELETED event applied to the usage index, as the cluster view
does, and the line kicked), and the service's pass runs (under the desk's lock) until a request
waiting for that pool is admitted; that admission's pod then appears, and a new request joins the
line so that it stays 1,000 long. Prints one JSON line:

- ``release_to_admission_p50_ms`` / ``_p99_ms``: from the event to the admission (the pass that
  ranks the whole line and decides what fits);
- ``immediate_p50_ms`` / ``_p99_ms``: an admission that fits at once (decide and reserve through
  the same desk, with an empty line), on the same cluster with a node freed the same way;
- ``release_to_admission_x_immediate``: release-to-admission p50 over immediate p50: what the
  line costs (above 1 by construction: the timed path applies the event and ranks the whole
  line besides deciding what fits);
- ``queued``: the line's length during the releases; ``admitted``: releases that let a request in.

The event loop's wake-up (the pass runs as a task in the service) is not in the figures.

With ``--held N`` it measures instead what N places held in line cost the service as the hub
runs it (``held_places.py``: the service's CPU seconds and a bystander's ``GET api/v1/pools``
p50 / p99, with the places held by ``--askers`` batch questions while the line moves every
``--every`` seconds, against none held in the same run). Run::

    python benchmarks/bench_queue.py            # full size
    python benchmarks/bench_queue.py --nodes 50 --pools 5 --queued 40 --releases 20
    python benchmarks/bench_queue.py --held 1000                # 1,000 places held, 15 s a way
    python benchmarks/bench_queue.py --held 40 --seconds 2      # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_admission import Synthetic, percentile

from jupyter_gpupool.core.admission.walk import AdmissionRequest, Decision
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.service.admission.desk import AdmissionDesk
from jupyter_gpupool.service.admission.line import Line
from jupyter_gpupool.service.admission.outcome import Outcome
from jupyter_gpupool.service.monitoring.metrics import Metrics
from jupyter_gpupool.service.state import ServiceState


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.syn = Synthetic(args)
        self.rng = random.Random(args.seed + 5)
        self.state = ServiceState(self.syn.registry())
        self.desk = self.new_desk(line=True)
        self.loop = asyncio.new_event_loop()
        self.keys = 0
        self.on_node: dict[str, list[dict]] = {}  # node -> the server pods holding its GPUs
        nodes = self.syn.node_objects()
        self.ready = [
            n["metadata"]["name"] for n in nodes if n["status"]["conditions"][0]["status"] == "True"
        ]
        for n in nodes:
            self.state.index.apply_node("ADDED", n)
        for name in self.syn.node_pool:
            self.fill(name)

    def new_desk(self, line: bool) -> AdmissionDesk:
        desk = AdmissionDesk(self.state, metrics=Metrics(lambda: self.state), ttl=3600)
        if line:
            desk.line = Line(desk, heartbeat=10**9, max_per_user=0)  # random users: no cap
        return desk

    def fill(self, node: str, gpus: int | None = None, admitted: Decision | None = None) -> None:
        """A server takes ``gpus`` of the node's GPUs (all that are free by default): an
        admitted request's (its user, charged as decided), else a batch job's that no quota
        counts."""
        self.keys += 1
        user = charged = admission = None
        if admitted is not None:
            user, charged = admitted.request.user, admitted.charged
            admission = admitted.request.admission_id
        free = self.args.gpus_per_node - sum(self.gpus_of(p) for p in self.on_node.get(node, ()))
        pod = self.syn.pod_object(self.keys, gpus or free, node, user, charged)
        if admission is not None:
            pod["metadata"]["labels"][L.POD_ADMISSION] = admission
        self.state.index.apply_pod("ADDED", pod)
        self.on_node.setdefault(node, []).append(pod)

    @staticmethod
    def gpus_of(pod: dict) -> int:
        return int(pod["spec"]["containers"][0]["resources"]["limits"][L.GPU_RESOURCE])

    def release(self, node: str) -> None:
        """The servers holding the node stop; its GPUs are free."""
        for pod in self.on_node.pop(node):
            self.state.index.apply_pod("DELETED", pod)

    def full(self, node: str) -> None:
        """What is still free on the node is taken (not timed)."""
        held = sum(self.gpus_of(p) for p in self.on_node.get(node, ()))
        if held < self.args.gpus_per_node:
            self.fill(node)

    def request(self, i: int, pool: str | None = None) -> AdmissionRequest:
        user = self.rng.choice(self.syn.users)
        pools = tuple(self.rng.sample(self.syn.pools, self.rng.randint(1, 3)))
        if pool is not None and pool not in pools:
            pools = (pool, *pools[1:])
        return AdmissionRequest(
            user,
            self.syn.memberships[user],
            pools,
            self.rng.choice((1, 1, 2, 2, 4, 8)),
            server=f"s{i}",
            admission_id=f"q-{i}",
            reclaim=True,  # as the spawner asks
        )

    def admit(self, desk: AdmissionDesk, req: AdmissionRequest, queue: bool) -> Outcome:
        return self.loop.run_until_complete(desk.admit(req, queue=queue))

    def run_pass(self) -> None:
        line = self.desk.line
        assert line is not None

        async def one() -> None:
            async with self.desk.lock:
                line.run_pass()

        self.loop.run_until_complete(one())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--queued", type=int, default=1000)
    parser.add_argument("--releases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    held = parser.add_argument_group("places held in line (--held: held_places.py)")
    held.add_argument("--held", type=int, default=0, help="places held in line (0: not run)")
    held.add_argument("--per-user", type=int, default=4, help="places each user holds")
    held.add_argument("--askers", type=int, default=5, help="batch questions holding them")
    held.add_argument("--every", type=float, default=0.2, help="seconds between moves")
    held.add_argument("--seconds", type=float, default=15.0, help="seconds each way is measured")
    args = parser.parse_args(argv)
    if args.held:
        import held_places

        print(json.dumps(asyncio.run(held_places.run(args))))
        return 0

    started = time.perf_counter()
    b = Bench(args)
    built_s = time.perf_counter() - started
    line = b.desk.line
    assert line is not None
    i = 0
    while len(line.waiting) < args.queued:
        i += 1
        status = b.admit(b.desk, b.request(i), queue=True).status
        assert status in (202, 409), status  # nothing fits: in line, or never possible
    b.run_pass()
    fill_s = time.perf_counter() - started

    # --- release -> the next admission from the line ----------------------------------------
    latencies: list[float] = []
    admitted = 0
    for _ in range(args.releases):
        node = b.rng.choice([n for n in b.ready if n in b.on_node])
        pool = b.syn.node_pool[node]
        before = set(line.ended)
        t0 = time.perf_counter()
        b.release(node)
        line.kick()
        b.run_pass()
        latencies.append(time.perf_counter() - t0)
        new = [aid for aid in line.ended if aid not in before]
        admitted += bool(new)
        for aid in new:  # the admitted servers' pods appear
            outcome = line.ended[aid].outcome
            assert outcome is not None and outcome.decision.node is not None
            b.fill(outcome.decision.node, outcome.decision.request.gpus, outcome.decision)
        b.full(node)  # what nothing waited for fills again, not timed
        while len(line.waiting) < args.queued:  # the line stays as long
            i += 1
            b.admit(b.desk, b.request(i, pool), queue=True)
        b.run_pass()

    # --- an immediate admission, for comparison ------------------------------------------------
    direct = b.new_desk(line=False)
    immediate: list[float] = []
    borrowing = [
        n for n in b.ready if (q := b.state.registry.quota(b.syn.node_pool[n])) and q.borrowing
    ]
    for k in range(args.releases):
        node = b.rng.choice(borrowing)  # a pool any user may use, within quota or not
        b.release(node)
        req = b.request(10**7 + k, b.syn.node_pool[node])
        req = AdmissionRequest(
            req.user,
            req.groups,
            (b.syn.node_pool[node],),
            1,
            server="x",
            admission_id=f"i-{k}",
            reclaim=False,
        )
        t0 = time.perf_counter()
        outcome = b.admit(direct, req, queue=False)
        immediate.append(time.perf_counter() - t0)
        assert outcome.status == 201, outcome.message
        b.state.reservations.release(req.admission_id)
        b.full(node)

    latencies.sort()
    immediate.sort()
    p50, im50 = percentile(latencies, 0.5), percentile(immediate, 0.5)
    print(
        json.dumps(
            {
                "release_to_admission_p50_ms": round(p50 * 1000, 3),
                "release_to_admission_p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
                "immediate_p50_ms": round(im50 * 1000, 3),
                "immediate_p99_ms": round(percentile(immediate, 0.99) * 1000, 3),
                "release_to_admission_x_immediate": round(p50 / im50, 2),
                "queued": args.queued,
                "releases": args.releases,
                "admitted": admitted,
                "nodes": args.nodes,
                "pools": args.pools,
                "build_s": round(built_s, 1),
                "fill_line_s": round(fill_s, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
