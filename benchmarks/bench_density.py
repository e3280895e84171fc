"""Density benchmark (issue 29): one day of notebook sessions on the demo's cluster, replayed on
the core under three policies.

1. ``whole``: whole GPUs only, no idle policy, no queue. A user refused retries every 5 minutes.
2. ``whole+idle+queue``: whole GPUs, the idle policy (under 5 % for 1 h, warned 15 min before;
   then stopped; measured every 60 s), and the fair queue.
3. ``shapes+idle+queue``: the same hardware partly partitioned (density_workload.py says how),
   the idle policy and the queue; a session that needs little asks for a MIG 1g/2g instance or a
   shared replica first, a medium one for a MIG 3g.40gb, then each falls back to whole GPUs.

Every user gives up after 30 minutes without a server (``--patience``). Each user asks for
their group's pools in order (examples/pools/quotas.yaml's ``default-pools``, with the pools it
leaves out after them). The day (arrivals, durations, needs, GPU use over time, each
distribution with its sources) is described in ``density_workload.py``; the replay on the core in
``density_replay.py``. Prints, per policy: sessions served (started), abandoned (gave up after
waiting), refused (no pool could ever take it), wait p50/p95 of the served (minutes),
GPU-hours held and held idle (while the session's use was under the idle threshold; counted in
GPU-equivalents: a MIG 1g of an A100 is 1/7, a replica of a GPU shared 4 ways 1/4), servers
the idle policy stopped (and of those, how many the user would have used again), each with its
ratio to policy 1. Run::

    python benchmarks/bench_density.py                   # 120 users, seed 1
    python benchmarks/bench_density.py --users 200 --seed 7
    python benchmarks/bench_density.py --json            # one JSON line, with the ledger
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_admission import percentile
from density_replay import Replay, RequestFor, Result
from density_workload import NEEDS, Session, cluster_nodes, make_day

from jupyter_gpupool.core.admission.walk import AdmissionRequest
from jupyter_gpupool.core.time.idle import IdlePolicy
from jupyter_gpupool.poolfiles import load_paths

POOLS = Path(__file__).resolve().parents[1] / "examples" / "pools"
IDLE = IdlePolicy(below_percent=5, after="1h", warn="15m", action="stop")

#: The pools each group asks for, in order
ORDER = {
    "ml-research": ("training-pool", "inference-pool", "dev-pool", "default"),
    "ml-ops": ("inference-pool", "dev-pool", "default", "training-pool"),
    "": ("dev-pool", "default", "inference-pool", "training-pool"),
}
#: Policy 3: the shapes asked for first, per need and pool, before whole GPUs
SHAPES_FIRST = {
    "light": {"training-pool": ("mig-1g.10gb", "mig-2g.20gb"), "inference-pool": ("shared-4",)},
    "medium": {"training-pool": ("mig-3g.40gb",)},
    "heavy": {},
}


def whole_request(s: Session, admission_id: str) -> AdmissionRequest:
    return AdmissionRequest(
        s.user,
        s.groups,
        ORDER[s.group],
        s.need.gpus,
        server=f"s{s.id}",
        admission_id=admission_id,
        reclaim=False,
    )


def shape_choices(s: Session) -> list[tuple[str, str]]:
    """``(pool, shape id)`` in the order the session asks for them."""
    first = SHAPES_FIRST[s.need.name]
    order = ORDER[s.group]
    return [(p, sh) for p in order for sh in first.get(p, ())] + [(p, "whole") for p in order]


def shaped_request(s: Session, admission_id: str) -> AdmissionRequest:
    choices = shape_choices(s)
    return AdmissionRequest(
        s.user,
        s.groups,
        tuple(p for p, _ in choices),
        s.need.gpus,
        server=f"s{s.id}",
        admission_id=admission_id,
        reclaim=False,
        shapes=tuple(sh for _, sh in choices),
    )


@dataclasses.dataclass(frozen=True)
class Policy:
    key: str
    title: str
    request_for: RequestFor
    queue: bool
    idle: IdlePolicy | None
    partitioned: bool


POLICIES = (
    Policy("whole", "1 whole GPUs", whole_request, False, None, False),
    Policy("whole_idle_queue", "2 whole + idle + queue", whole_request, True, IDLE, False),
    Policy("shapes_idle_queue", "3 shapes + idle + queue", shaped_request, True, IDLE, True),
)


def run_policy(p: Policy, sessions: Sequence[Session], args: argparse.Namespace) -> Result:
    replay = Replay(
        load_paths([POOLS]),
        cluster_nodes(p.partitioned),
        p.request_for,
        queue=p.queue,
        idle=p.idle,
        patience=args.patience * 60,
        retry=args.retry * 60,
        poll=args.poll,
    )
    return replay.run(sessions)


def figures(r: Result, sessions: int) -> dict[str, Any]:
    waits = sorted(r.waits)
    outcomes = list(r.outcome.values())
    return {
        "sessions": sessions,
        "served": outcomes.count("served"),
        "abandoned": outcomes.count("abandoned"),
        "refused": outcomes.count("refused"),
        "wait_p50_min": round(percentile(waits, 0.5) / 60, 1),
        "wait_p95_min": round(percentile(waits, 0.95) / 60, 1),
        "gpu_hours_held": round(r.held_gpu_hours, 1),
        "gpu_hours_idle": round(r.idle_gpu_hours, 1),
        "idle_stopped": r.idle_stopped,
        "idle_stopped_cut_short": r.cut_short,
        "served_by_pool": dict(sorted(r.served_by_pool.items())),
        "served_by_shape": dict(sorted(r.served_by_shape.items())),
        "served_by_need": by_need(r, "served"),
        "not_served_by_need": by_need(r, "abandoned", "refused"),
        "decisions": r.decisions,
        "passes": r.passes,
        "peak": r.peak,
        "capacity": r.capacity,
        "ledger": sorted(r.outcome.items()),
    }


def by_need(r: Result, *outcomes: str) -> dict[str, int]:
    out = {n.name: 0 for n in NEEDS}
    for sid, how in r.outcome.items():
        if how in outcomes:
            out[r.need[sid]] += 1
    return out


RATIO_KEYS = ("served", "wait_p50_min", "wait_p95_min", "gpu_hours_held", "gpu_hours_idle")


def ratios(f: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    return {k: round(f[k] / base[k], 2) if base[k] else None for k in RATIO_KEYS}


def table(out: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"bench_density: {out['sessions']} sessions of {args.users} users over one day "
        f"(seed {args.seed}), on examples/cluster.yaml (32 GPUs); patience {args.patience:g} min",
        "",
        f"{'policy':<26}{'served':>7}{'aband.':>7}{'refus.':>7}{'wait p50':>10}{'wait p95':>10}"
        f"{'GPU-h held':>12}{'GPU-h idle':>12}{'idle stops':>12}",
    ]
    for p in POLICIES:
        f = out["policies"][p.key]
        stops = f"{f['idle_stopped']} ({f['idle_stopped_cut_short']})" if p.idle else "-"
        lines.append(
            f"{p.title:<26}{f['served']:>7}{f['abandoned']:>7}{f['refused']:>7}"
            f"{f['wait_p50_min']:>8.1f} m{f['wait_p95_min']:>8.1f} m"
            f"{f['gpu_hours_held']:>12.1f}{f['gpu_hours_idle']:>12.1f}{stops:>12}"
        )
    lines += ["", "against policy 1 (x = this policy's figure / policy 1's):"]
    for p in POLICIES[1:]:
        f = out["policies"][p.key]
        words = ", ".join(
            f"{k.replace('_min', '').replace('_', ' ')} "
            + (f"x{v:.2f}" if v is not None else "- (policy 1's is 0)")
            for k, v in f["ratios"].items()
        )
        lines.append(f"  {p.title}: {words}")
    lines += [
        "",
        "idle stops: servers the idle policy stopped (in brackets: of those, the ones whose "
        "user would have used the GPU again)",
    ]
    for p in POLICIES:
        f = out["policies"][p.key]
        lines.append(
            f"{p.title}: served by pool {f['served_by_pool']}; by shape "
            f"{f['served_by_shape']}; by need {f['served_by_need']}, not served "
            f"{f['not_served_by_need']}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--patience", type=float, default=30.0, help="minutes")
    parser.add_argument("--retry", type=float, default=5.0, help="minutes (policy 1)")
    parser.add_argument("--poll", type=float, default=60.0, help="seconds (idle policy)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)

    sessions = make_day(args.seed, args.users)
    out: dict[str, Any] = {
        "users": args.users,
        "seed": args.seed,
        "sessions": len(sessions),
        "patience_min": args.patience,
        "policies": {},
    }
    base: dict[str, Any] | None = None
    for p in POLICIES:
        f = figures(run_policy(p, sessions, args), len(sessions))
        if base is None:
            base = f
        else:
            f["ratios"] = ratios(f, base)
        out["policies"][p.key] = f
    if args.json:
        print(json.dumps(out))
    else:
        print(table(out, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
