"""Benchmark of the usage index and admission on a large synthetic cluster.

Builds a cluster (default: 5,000 nodes x 8 GPUs in 50 pools, 100,000 pods, 2,000 users in 200
groups), feeds it to the :class:`~jupyter_gpupool.core.usage.index.UsageIndex` as watch events (each pod is
created pending, then bound and running; one in ten then finishes or is deleted), then runs
admissions the way the service does (decide, then reserve; pods of admitted requests appear and
reservations expire as time passes). Prints one JSON line:

- ``events_per_s``: watch events applied per second;
- ``admissions_per_s``, ``admission_p50_ms``, ``admission_p99_ms``: decide + reserve;
- ``rss_mb``: resident memory after feeding and admitting (the index's working set);
- ``baseline_x_admission``: the mean time of a naive admission that recomputes usage from the
  full pod list (what gpuctl does per call, ``baseline_ms``), measured in the same run, over our
  mean admission time (above 1: ours is that many times faster).

Only the applying and the deciding are timed, not building the synthetic objects.

With ``--mig-fraction F`` (issue 29) the run is made twice on clusters built from the same seed:
first all whole GPUs, then with a fraction ``F`` of the nodes MIG-partitioned (mixed strategy,
each of their 8 A100-80GB cut into 7 x ``1g.10gb``: ``nvidia.com/mig-1g.10gb: 56`` and no
``nvidia.com/gpu``), where half the admissions ask for a ``mig-1g.10gb`` instance in their
pools; it prints ``{"whole": {...}, "mig": {...}, "mig_x_whole_admissions_per_s": ...,
"mig_x_whole_p99": ...}`` (the MIG run's figure over the whole run's). Run::

    python benchmarks/bench_admission.py            # full size
    python benchmarks/bench_admission.py --nodes 50 --pools 5 --pods 500 --users 40 --groups 8
    python benchmarks/bench_admission.py --mig-fraction 0.5    # half of 5,000 nodes MIG
    python benchmarks/bench_admission.py --bookings 1000       # with 1,000 bookings defined
    python benchmarks/bench_admission.py --recut               # re-cutting allowed everywhere

With ``--bookings N`` (issue 30) the run is made twice on clusters built from the same seed,
both at the same moment (a Tuesday, 10:30 UTC, in term): first with no booking, then with ``N``
weekly bookings of 1 to 4 whole GPUs for a group, two hours on one to three weekdays each
between 08:00 and 18:00 (UTC or Europe/Berlin), from January to March 2027, spread over the
pools (about one in ten is in force at that moment, so members are admitted within them and
the others see their GPUs held). Each request is decided twice, on the same cluster at the same
moment: once as if no booking were defined and once with them (in turn one first, then the
other), and the second decision is the one kept; so the two latencies are measured on the same
cluster, requests and load. It adds the decision's own latency (without the reservation) both
ways, ``none_decide_p50_ms``/``p99`` and ``bookings_decide_p50_ms``/``p99``, and their ratio
``bookings_x_none_p99`` (the target: at most 1.10) to the figures.

With ``--recut`` (issue 41) the run is made twice on clusters built from the same seed, first
without a pool file's ``recut`` section, then with re-cutting allowed on every node of every
pool and the service's re-cut planning run every 2 s beside the admissions for a line of
``--waiting`` requests, each round's time charged to the admission that comes next;
``recut_x_none_p99`` is the second run's admission p99 over the first's (the target: at most
1.10). ``admission_recut.py`` says how, and what else it prints.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import random
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import admission_recut
from naive_admission import naive_decide

from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, decide
from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.time.bookings import Booking, Weekly, Window
from jupyter_gpupool.core.time.bookings_in_force import Calendar
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations

GPU_TYPES = ("A100-80G", "H100-80G", "L40S-48G", "A10-24G")
CREATED = "2025-01-01T00:00:00Z"
#: A MIG node's GPUs: A100-80GB, each cut into 7 x 1g.10gb (mixed strategy)
MIG_PROFILE = "1g.10gb"
MIG_RESOURCE = "nvidia.com/mig-" + MIG_PROFILE
MIG_SHAPE = "mig-" + MIG_PROFILE
MIG_PER_GPU = 7
#: The moment admissions are decided at with ``--bookings``: Tuesday 2027-01-19 10:30 UTC
BOOKINGS_NOW = 1_800_354_600.0


def rss_mb() -> float:
    """Current resident set size (Linux), else the peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Synthetic:
    """The synthetic cluster: registry, node objects, and pods generated in batches."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.pools = [f"pool-{i:02d}" for i in range(args.pools)]
        self.groups = [f"group-{i:03d}" for i in range(args.groups)]
        self.users = [f"user{i:04d}@example.org" for i in range(args.users)]
        self.memberships: dict[str, tuple[str, ...]] = {}
        for i, u in enumerate(self.users):
            gs = [self.groups[i % args.groups]]
            if i % 3 == 0:
                gs.append(self.groups[(i * 7 + 1) % args.groups])
            self.memberships[u] = tuple(dict.fromkeys(gs))
        self.node_pool: dict[str, str] = {}
        self.pool_nodes: dict[str, list[str]] = defaultdict(list)
        for i in range(args.nodes):
            name = f"node-{i:05d}"
            pool = self.pools[i % args.pools]
            self.node_pool[name] = pool
            self.pool_nodes[pool].append(name)
        # every k-th node MIG-partitioned, k = 1 / mig_fraction (spread over the pools)
        fraction = getattr(args, "mig_fraction", 0.0)  # bench_queue's arguments have none
        every = round(1 / fraction) if fraction > 0 else 0
        self.mig = {
            name for i, name in enumerate(self.node_pool) if every and i // args.pools % every == 0
        }
        self.free = {
            n: args.gpus_per_node * (MIG_PER_GPU if n in self.mig else 1) for n in self.node_pool
        }
        self.alive: dict[str, tuple[Any, ...]] = {}  # final state, for the baseline

    def bookings(self, n: int) -> list[Booking]:
        """``n`` weekly bookings of whole GPUs for a group, spread over the pools."""
        rng = random.Random(self.args.seed + 5)
        out = []
        for i in range(n):
            hour = rng.randint(8, 16)
            out.append(
                Booking(
                    name=f"booking-{i:04d}",
                    pool=self.pools[i % len(self.pools)],
                    window=Window(
                        rng.choice(("UTC", "Europe/Berlin")),
                        weekly=Weekly(
                            tuple(sorted(rng.sample(range(5), rng.randint(1, 3)))),
                            dt.time(hour),
                            dt.time(hour + 2),
                            dt.date(2027, 1, 4),
                            dt.date(2027, 3, 28),
                        ),
                    ),
                    gpus=rng.randint(1, 4),
                    groups=(rng.choice(self.groups),),
                )
            )
        return out

    def registry(self, recut: bool = False) -> Registry:
        docs: list[dict[str, Any]] = []
        rng = random.Random(self.args.seed + 1)
        per_pool = max(1, len(self.groups) * 10 // max(1, len(self.pools)))
        for i, pool in enumerate(self.pools):
            quota_groups = rng.sample(self.groups, min(per_pool, len(self.groups)))
            docs.append(
                {
                    "kind": "pool",
                    "version": "v0.1",
                    "pool": {"name": pool},
                    "quota": {
                        "borrowing": i % 4 != 0,
                        "user-default": {"guaranteed": 0, "limit": 16},
                        "groups": {
                            g: {"guaranteed": rng.choice([8, 16, 24]), "limit": 64}
                            for g in quota_groups
                        },
                    },
                    "defaults": {"cpu-per-gpu": 8, "memory-per-gpu": "32Gi", "cpu": 1},
                    "limits": {"max-gpus": 8},
                    "template": {
                        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                        "env": [{"name": "POOL", "value": pool}],
                    },
                }
            )
            if recut:
                docs[-1]["recut"] = admission_recut.recut_section(self.pool_nodes[pool])
        docs.append(
            {
                "kind": "quota",
                "quota": {"name": "bench"},
                "namespace": {g: {"gpu": 400} for g in self.groups[:20]},
                "default": {"gpu": 32},
                "default-pools": {
                    "groups": {
                        g: rng.sample(self.pools, min(3, len(self.pools))) for g in self.groups
                    }
                },
            }
        )
        return load_string("\n---\n".join(json.dumps(d) for d in docs), "<bench>")

    def node_objects(self) -> list[dict[str, Any]]:
        out = []
        for i, (name, pool) in enumerate(self.node_pool.items()):
            labels = {
                L.HOSTNAME_LABEL: name,
                L.POOL_LABEL: pool,
                L.GPU_TYPE_LABEL: GPU_TYPES[(i // len(self.pools)) % 2 + (i % 2) * 2],
            }
            spec: dict[str, Any] = {}
            if i % 5 == 0:
                spec["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
            gpus = self.args.gpus_per_node
            if getattr(self.args, "recut", False):  # GFD's labels, which re-cut planning reads
                labels.update(admission_recut.gfd_labels(labels[L.GPU_TYPE_LABEL], gpus))
            allocatable = {"cpu": "96", "memory": "1024Gi", L.GPU_RESOURCE: str(gpus)}
            if name in self.mig:
                labels.update(mig_labels(gpus))
                labels[L.GPU_TYPE_LABEL] = "A100-80G"
                allocatable[L.GPU_RESOURCE] = "0"
                allocatable[MIG_RESOURCE] = str(gpus * MIG_PER_GPU)
            out.append(
                {
                    "metadata": {"name": name, "labels": labels, "resourceVersion": str(i)},
                    "spec": spec,
                    "status": {
                        "allocatable": allocatable,
                        "conditions": [
                            {"type": "Ready", "status": "False" if i % 97 == 0 else "True"},
                            {"type": "MemoryPressure", "status": "False"},
                            {"type": "DiskPressure", "status": "False"},
                        ],
                    },
                }
            )
        return out

    def pod_object(
        self,
        key: int,
        gpus: int,
        node: str | None,
        user: str | None,
        charged: str | None,
        resource: str = L.GPU_RESOURCE,
    ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "quay.io/jupyter/base-notebook"}
        if gpus:
            container["resources"] = {
                "limits": {resource: str(gpus)},
                "requests": {"cpu": "1", "memory": "4Gi", resource: str(gpus)},
            }
        labels: dict[str, str] = {"app": "jupyterhub", "component": "singleuser-server"}
        annotations: dict[str, str] = {}
        if user is not None and charged is not None:
            labels[L.POD_USER] = L.safe_label_value(user)
            labels[L.POD_OVER_QUOTA] = "false"
            labels[L.POD_POOL] = self.node_pool[node] if node else ""
            annotations[L.POD_USER] = user
            annotations[L.POD_CHARGED] = charged
        spec: dict[str, Any] = {"containers": [container]}
        if node is not None:
            spec["nodeName"] = node
        return {
            "metadata": {
                "name": f"pod-{key:06d}",
                "namespace": "jhub" if user else "batch",
                "uid": f"uid-{key}",
                "labels": labels,
                "annotations": annotations,
                "creationTimestamp": CREATED,
                "resourceVersion": str(key),
            },
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        }

    def pod_batches(self, batch: int) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        """Events for all pods, ``batch`` pods at a time: pending, bound, maybe finished."""
        args, rng = self.args, self.rng
        node_names = list(self.node_pool)
        # GPU pods averaging 1.5 GPUs, enough of them to fill ~70% of the GPUs before one in
        # ten ends; the other pods use no GPU (CPU notebooks, batch jobs, daemons).
        gpu_pods = args.nodes * args.gpus_per_node * 0.7 / 1.5
        gpu_every = max(1, round(args.pods / max(gpu_pods, 1)))
        events: list[tuple[str, dict[str, Any]]] = []
        for key in range(args.pods):
            gpus = 0
            if key % gpu_every == 0:
                gpus = rng.choice((1, 1, 2, 2, 4)) if key % 2 else 1
            node = rng.choice(node_names)
            if gpus:
                pool_nodes = self.pool_nodes[self.node_pool[node]]
                for _ in range(8):
                    if self.free[node] >= gpus:
                        break
                    node = rng.choice(pool_nodes)
                else:
                    gpus = 0
            user = charged = None
            if key % 4 != 3:  # three in four pods are notebook servers
                user = self.users[key % len(self.users)]
                groups = self.memberships[user]
                charged = f"group:{groups[0]}" if key % 2 else f"user:{user}"
            resource = L.GPU_RESOURCE
            if gpus and node in self.mig:
                gpus, resource = 1, MIG_RESOURCE  # one MIG device a pod
            if gpus:
                self.free[node] -= gpus
            pending = self.pod_object(key, gpus, None, user, charged, resource)
            bound = self.pod_object(key, gpus, node, user, charged, resource)
            events.append(("ADDED", pending))
            events.append(("MODIFIED", bound))
            if key % 10 == 0:
                events.append(("DELETED", bound))
                self.free[node] += gpus
            else:
                self.alive[f"pod-{key:06d}"] = (key, gpus, node, user, charged, resource)
            if len(events) >= batch * 2:
                yield events
                events = []
        if events:
            yield events


def mig_labels(gpus: int) -> dict[str, str]:
    """GFD's labels for a node of ``gpus`` A100-80GB, each cut into 7 x 1g.10gb (mixed)."""
    key = "nvidia.com/mig-" + MIG_PROFILE
    return {
        L.GFD_PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB",
        L.GFD_COUNT_LABEL: str(gpus),
        L.GFD_MEMORY_LABEL: "81920",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config.state": "success",
        f"{key}.count": str(gpus * MIG_PER_GPU),
        f"{key}.product": f"NVIDIA-A100-SXM4-80GB-MIG-{MIG_PROFILE}",
        f"{key}.memory": "9856",
        f"{key}.replicas": "1",
    }


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[i]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--admissions", type=int, default=20_000)
    parser.add_argument("--baseline-admissions", type=int, default=20)
    parser.add_argument("--batch", type=int, default=10_000, help="pods generated at a time")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--mig-fraction",
        type=float,
        default=0.0,
        help="also run with this fraction of the nodes MIG-partitioned, and compare",
    )
    parser.add_argument(
        "--bookings",
        type=int,
        default=0,
        help="also run with this many bookings defined, and compare (issue 30)",
    )
    parser.add_argument("--recut", action="store_true", help="also run with re-cutting allowed")
    parser.add_argument("--waiting", type=int, default=1000, help="with --recut: requests in line")

    args = parser.parse_args(argv)
    if not 0 <= args.mig_fraction <= 1:
        parser.error("--mig-fraction is a fraction between 0 and 1")
    if args.bookings < 0:
        parser.error("--bookings is a number of bookings, 0 or more")
    if args.recut:
        print(json.dumps(admission_recut.compare(args, run)))
        return 0
    if args.bookings:
        result = run(args, at=BOOKINGS_NOW)
        print(json.dumps(result))
        return 0
    if not args.mig_fraction:
        print(json.dumps(run(args)))
        return 0
    mig_fraction = args.mig_fraction
    args.mig_fraction = 0.0
    whole = run(args)
    gc.collect()
    args.mig_fraction = mig_fraction
    mig = run(args)
    print(
        json.dumps(
            {
                "whole": whole,
                "mig": mig,
                "mig_x_whole_admissions_per_s": round(
                    mig["admissions_per_s"] / whole["admissions_per_s"], 2
                ),
                "mig_x_whole_p99": round(mig["admission_p99_ms"] / whole["admission_p99_ms"], 2),
            }
        )
    )
    return 0


def run(args: argparse.Namespace, at: float = 0.0, recut: bool = False) -> dict[str, Any]:
    """One run (feed, admit, baseline) on the cluster ``args`` describe, deciding at ``at``
    (epoch seconds), with re-cutting allowed and planned when ``recut``: its figures."""
    syn = Synthetic(args)
    registry = syn.registry(recut)
    reservations = Reservations()
    index = UsageIndex(on_admission=reservations.observe)
    rounds = admission_recut.rounds(syn, registry, index, reservations) if recut else None
    count = getattr(args, "bookings", 0)
    calendar = Calendar(syn.bookings(count)) if count else None
    state = AdmissionState(registry, index, reservations, now=at, bookings=calendar)
    unbooked = AdmissionState(registry, index, reservations, now=at)
    latencies_none: list[float] = []  # decide alone, with no booking and with them
    latencies_booked: list[float] = []

    # --- feed watch events ---------------------------------------------------------------------
    events = 0
    feed_time = 0.0
    node_objects = syn.node_objects()
    t0 = time.perf_counter()
    for n in node_objects:
        index.apply_node("ADDED", n)
    feed_time += time.perf_counter() - t0
    events += len(node_objects)
    gc.collect()
    for batch in syn.pod_batches(args.batch):
        apply = index.apply_pod
        t0 = time.perf_counter()
        for etype, obj in batch:
            apply(etype, obj)
        feed_time += time.perf_counter() - t0
        events += len(batch)
        del batch

    # --- admissions ----------------------------------------------------------------------------
    rng = random.Random(args.seed + 2)
    latencies: list[float] = []
    admitted = within = 0
    now = 0.0
    pending: list[tuple[str, Any]] = []
    for i in range(args.admissions):
        user = rng.choice(syn.users)
        groups = syn.memberships[user]
        pools: tuple[str, ...] = ()
        if i % 2:
            pools = tuple(rng.sample(syn.pools, min(len(syn.pools), rng.randint(1, 3))))
        gpus = rng.choice((1, 1, 1, 2, 2, 4, 8))
        shapes: tuple[str | None, ...] = ()
        if syn.mig and i % 4 < 2:  # half the requests: a MIG instance in 1-3 pools
            pools = pools or tuple(rng.sample(syn.pools, min(len(syn.pools), 2)))
            shapes, gpus = (MIG_SHAPE,) * len(pools), 1
        req = AdmissionRequest(
            user,
            groups,
            pools,
            gpus,
            gpu_type=GPU_TYPES[i % 4] if i % 5 == 0 and not shapes else None,
            server=f"s{i}",
            admission_id=f"bench-{i}",
            shapes=shapes,
        )
        if calendar is not None and i % 2:  # the same request as if no booking were defined
            t0 = time.perf_counter()
            decide(req, unbooked)
            latencies_none.append(time.perf_counter() - t0)
        waited = rounds.before(now) if rounds is not None else 0.0  # for the desk's lock
        t0 = time.perf_counter()
        d = decide(req, state)
        decided = time.perf_counter()
        if d.admitted:
            reservations.add(d.reservation(expires_at=now + 30.0))
        latencies.append(time.perf_counter() - t0 + waited)
        if calendar is not None:
            latencies_booked.append(decided - t0)
        if calendar is not None and not i % 2:
            t0 = time.perf_counter()
            decide(req, unbooked)
            latencies_none.append(time.perf_counter() - t0)
        if d.admitted:
            admitted += 1
            within += (d.charged or "").startswith("booking:")
            pending.append((req.admission_id, d))
        # time passes; most admitted pods show up (bound), the rest expire
        now += 0.01
        if i % 50 == 49:
            reservations.expire(now)
            for aid, dec in pending[:-5]:
                if aid in reservations and rng.random() < 0.8:
                    p = syn.pod_object(
                        10_000_000 + i, dec.request.gpus, dec.node, user, dec.charged, dec.resource
                    )
                    p["metadata"]["labels"][L.POD_ADMISSION] = aid
                    p["metadata"]["annotations"].update(dec.overrides.get("annotations", {}))
                    p["metadata"]["name"] = f"adm-{aid}"
                    index.apply_pod("ADDED", p)
            pending = pending[-5:]
    admit_time = sum(latencies)
    latencies.sort()
    rss = rss_mb()

    # --- the naive baseline, on the same cluster ----------------------------------------------
    ours_mean = admit_time / max(1, len(latencies))
    alive = list(syn.alive.values())
    syn.alive.clear()
    pod_list = [syn.pod_object(*a) for a in alive]
    del alive
    naive = []
    brng = random.Random(args.seed + 3)
    for _ in range(args.baseline_admissions):
        user = brng.choice(syn.users)
        req = AdmissionRequest(user, syn.memberships[user], (), brng.choice((1, 2, 4)))
        t0 = time.perf_counter()
        naive_decide(req, registry, node_objects, pod_list)
        naive.append(time.perf_counter() - t0)
    naive_mean = sum(naive) / max(1, len(naive))

    result = {
        "events_per_s": round(events / feed_time),
        "admissions_per_s": round(len(latencies) / admit_time),
        "admission_p50_ms": round(percentile(latencies, 0.50) * 1000, 4),
        "admission_p99_ms": round(percentile(latencies, 0.99) * 1000, 4),
        "rss_mb": round(rss, 1),
        "baseline_x_admission": round(naive_mean / ours_mean, 1),
        "events": events,
        "admissions": len(latencies),
        "admitted": admitted,
        "baseline_ms": round(naive_mean * 1000, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "nodes": args.nodes,
        "pods": args.pods,
        "pools": args.pools,
    }
    if syn.mig:
        result["mig_nodes"] = len(syn.mig)
    if getattr(args, "recut", False):  # both runs: the admission that waited for a round
        result["admission_max_ms"] = round(latencies[-1] * 1000, 4)
    if rounds is not None:
        result["recut_watch"] = rounds.figures()
    if calendar is not None:
        result["bookings"] = len(calendar)
        result["bookings_in_force"] = sum(len(calendar.in_force(p, at)) for p in syn.pools)
        result["admitted_within_bookings"] = within
        for key, values in (("none", latencies_none), ("bookings", latencies_booked)):
            values.sort()
            result[f"{key}_decide_p50_ms"] = round(percentile(values, 0.50) * 1000, 4)
            result[f"{key}_decide_p99_ms"] = round(percentile(values, 0.99) * 1000, 4)
        result["bookings_x_none_p99"] = round(
            result["bookings_decide_p99_ms"] / result["none_decide_p99_ms"], 2
        )
    return result


if __name__ == "__main__":
    sys.exit(main())
