"""Density benchmark (issues 29, 38): one day of notebook sessions on the demo's cluster, replayed
on the core under three policies, the whole-GPU ones on two clusters.

1. ``whole``: whole GPUs only, no idle policy, no queue. A user refused retries every 5 minutes.
2. ``whole+idle+queue``: whole GPUs, the idle policy (under 5 % for 1 h, warned 15 min before;
   then stopped; measured every 60 s), and the fair queue.
3. ``shapes+idle+queue``: the same hardware, more of it partitioned (density_workload.py says how),
   the idle policy and the queue; a session that needs little asks for a MIG 1g/2g instance or a
   shared replica first, a medium one for a MIG 3g.40gb, then each falls back to whole GPUs.

Policies 1 and 2 run twice: on the demo's cluster as it is (``demo``: its MIG A100 and
time-sliced A10 are of no use to whole-GPU requests) and on the **equal-hardware** cluster
(``whole``: those two GPUs whole), so that policy 3 is compared with them on the same 34 GPUs;
the headline ratio is policy 3's over policy 1's on equal hardware.

A session on a slice runs slower while it wants more than its slice, and a user whose server the
idle policy stopped comes back at their next busy moment with the rest of their work (a new
request, waiting and giving up like any); both as ``density_workload.py`` states them.

Every user gives up after 30 minutes without a server (``--patience``). Each user asks for
their group's pools in order (examples/pools/quotas.yaml's ``default-pools``, with the pools it
leaves out after them). The day (arrivals, durations, needs, GPU use over time, each
distribution with its sources) is described in ``density_workload.py``; the replay on the core in
``density_replay.py``. Prints, per policy: sessions served (started), abandoned (gave up after
waiting), refused (no pool could ever take it), wait p50/p95 of the served (minutes),
GPU-hours held and held idle (while the session's use was under the idle threshold; counted in
GPU-equivalents: a MIG 1g of an A100 is 1/7, a replica of a GPU shared 4 ways 1/4), servers
the idle policy stopped (and of those, how many users came back), each with its ratio to policy
1; users back after an idle stop (served again, gave up), sessions completed
(served, and every return of theirs served), servers slowed by their slice. ``--seeds`` runs
several days and prints, per seed, sessions served and the ratios, then their median and range.
Run::

    python benchmarks/bench_density.py                   # 120 users, seed 1
    python benchmarks/bench_density.py --users 200 --seed 7
    python benchmarks/bench_density.py --json            # one JSON line, with the ledger
    python benchmarks/bench_density.py --seeds 1-10      # per seed, median and range
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_admission import percentile
from density_recut import (
    RECUT_NODES,
    RecutReplay,
    partitioned_recut_nodes,
    recut_policy,
    with_recut,
)
from density_replay import Replay, RequestFor, Result
from density_workload import NEEDS, Session, cluster_gpus, cluster_nodes, make_day

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
    hardware: str  # density_workload.HARDWARE
    recut: bool = False  # the service re-cuts MIG layouts to demand (density_recut.py)


POLICIES = (
    Policy("whole", "1 whole GPUs", whole_request, False, None, "demo"),
    Policy("whole_idle_queue", "2 whole + idle + queue", whole_request, True, IDLE, "demo"),
    Policy(
        "shapes_idle_queue", "3 shapes + idle + queue", shaped_request, True, IDLE, "partitioned"
    ),
    Policy(
        "recut_idle_queue",
        "4 shapes+idle+queue+recut",
        shaped_request,
        True,
        IDLE,
        "partitioned",
        recut=True,
    ),
)
#: Policies 1 and 2 on the equal-hardware cluster (the demo's slices whole)
EQUAL = tuple(dataclasses.replace(p, hardware="whole") for p in POLICIES[:2])
#: The policies on the partitioned cluster, compared with policy 1 on equal hardware
SHAPED = POLICIES[2:]


def run_policy(p: Policy, sessions: Sequence[Session], args: argparse.Namespace) -> Result:
    registry = load_paths([POOLS])
    nodes = cluster_nodes(False, hardware=p.hardware)
    kind: type[Replay] = Replay
    extra: dict[str, Any] = {}
    if p.recut:
        registry = with_recut(registry, recut_policy(args.recut_nodes))
        nodes = partitioned_recut_nodes(nodes)
        kind = RecutReplay
        extra = {"recut_seconds": args.recut_seconds}
    replay = kind(
        registry,
        nodes,
        p.request_for,
        queue=p.queue,
        idle=p.idle,
        patience=args.patience * 60,
        retry=args.retry * 60,
        poll=args.poll,
        returns=True,
        **extra,
    )
    return replay.run(sessions)


def figures(r: Result, sessions: int) -> dict[str, Any]:
    waits = sorted(r.waits)
    outcomes = list(r.outcome.values())
    backs = list(r.back_outcome.values())
    cut_off = {r.back_of[b] for b, how in r.back_outcome.items() if how != "served"}
    return {
        "sessions": sessions,
        "served": outcomes.count("served"),
        "completed": outcomes.count("served") - len(cut_off),
        "abandoned": outcomes.count("abandoned"),
        "refused": outcomes.count("refused"),
        "back": len(r.back_of),
        "back_served": backs.count("served"),
        "back_abandoned": backs.count("abandoned") + backs.count("refused"),
        "back_wait_p50_min": round(percentile(sorted(r.back_waits), 0.5) / 60, 1),
        "slowed": r.slowed,
        "slowed_hours": round(r.slowed_hours, 1),
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
        "back_ledger": sorted((b, r.back_of[b], how) for b, how in r.back_outcome.items()),
        **r.extra,
    }


def by_need(r: Result, *outcomes: str) -> dict[str, int]:
    out = {n.name: 0 for n in NEEDS}
    for sid, how in r.outcome.items():
        if how in outcomes:
            out[r.need[sid]] += 1
    return out


RATIO_KEYS = (
    "served",
    "completed",
    "wait_p50_min",
    "wait_p95_min",
    "gpu_hours_held",
    "gpu_hours_idle",
)


def ratios(f: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    return {k: round(f[k] / base[k], 2) if base[k] else None for k in RATIO_KEYS}


def row(title: str, f: dict[str, Any], idle: bool) -> str:
    stops = f"{f['idle_stopped']} ({f['back']})" if idle else "-"
    back = f"{f['back_served']}/{f['back_abandoned']}" if idle else "-"
    return (
        f"{title:<26}{f['served']:>7}{f['completed']:>7}{f['abandoned']:>7}{f['refused']:>7}"
        f"{f['wait_p50_min']:>8.1f} m{f['wait_p95_min']:>8.1f} m"
        f"{f['gpu_hours_held']:>12.1f}{f['gpu_hours_idle']:>12.1f}{stops:>12}{back:>10}"
    )


def ratio_words(title: str, rs: dict[str, float | None]) -> str:
    words = ", ".join(
        f"{k.replace('_min', '').replace('_', ' ')} "
        + (f"x{v:.2f}" if v is not None else "- (policy 1's is 0)")
        for k, v in rs.items()
    )
    return f"  {title}: {words}"


def table(out: dict[str, Any], args: argparse.Namespace) -> str:
    eq = out["equal_hardware"]
    lines = [
        f"bench_density: {out['sessions']} sessions of {args.users} users over one day "
        f"(seed {args.seed}), on examples/cluster.yaml ({out['gpus']} GPUs); "
        f"patience {args.patience:g} min",
        "",
        f"{'policy':<26}{'served':>7}{'compl.':>7}{'aband.':>7}{'refus.':>7}{'wait p50':>10}"
        f"{'wait p95':>10}{'GPU-h held':>12}{'GPU-h idle':>12}{'idle stops':>12}"
        f"{'back s/a':>10}",
        "demo hardware (the demo's MIG A100 and time-sliced A10 as they are):",
    ]
    for p in POLICIES:
        lines.append(row(p.title, out["policies"][p.key], p.idle is not None))
    lines.append("equal hardware (those two GPUs whole):")
    for p in EQUAL:
        lines.append(row(p.title, eq[p.key], p.idle is not None))
    lines += ["", "against policy 1 (x = this policy's figure / policy 1's), equal hardware:"]
    lines.append(ratio_words(EQUAL[1].title, eq[EQUAL[1].key]["ratios"]))
    for p in SHAPED:
        lines.append(ratio_words(p.title, eq[f"{p.key}_ratios"]))
    lines.append("demo hardware:")
    for p in POLICIES[1:]:
        lines.append(ratio_words(p.title, out["policies"][p.key]["ratios"]))
    p3 = out["policies"]["shapes_idle_queue"]
    p4 = out["policies"]["recut_idle_queue"]
    lines += [
        "",
        "compl.: served, and every return of theirs served too; idle stops: servers the idle "
        "policy stopped (in brackets: of those, the users who came back at their next busy "
        "moment); back s/a: of those returns, served again / gave up",
        f"policy 3: {p3['slowed']} servers ran slower on their slice "
        f"(+{p3['slowed_hours']:.1f} h to their sessions)",
        recut_words(p4, args),
    ]
    for p in POLICIES:
        f = out["policies"][p.key]
        lines.append(
            f"{p.title}: served by pool {f['served_by_pool']}; by shape "
            f"{f['served_by_shape']}; by need {f['served_by_need']}, not served "
            f"{f['not_served_by_need']}"
        )
    return "\n".join(lines)


def recut_words(f: dict[str, Any], args: argparse.Namespace) -> str:
    """Policy 4's re-cuts, in one line, and each one after it."""
    head = (
        f"policy 4 (re-cutting {', '.join(args.recut_nodes)} among "
        f"{', '.join(recut_policy(args.recut_nodes).configs)}, {args.recut_seconds:g} s a re-cut): "
        f"{f['recuts']} re-cuts ({f['recuts_to_demand']} to demand, {f['recuts_home']} home), "
        f"{f['recuts_unused']} whose layout no server used, {f['nodes_home_at_end']} of "
        f"{f['recut_nodes']} nodes home at the end; the planner asked {f['plans']} times "
        f"in {f['recut_rounds']} rounds"
    )
    cuts = [
        f"  {c['at_min'] / 60:5.2f} h {c['node']}: {c['from']} -> {c['to']} ({c['reason']}; "
        f"{c['servers']} servers on it after)"
        for c in f["recut_log"]
    ]
    return "\n".join([head, *cuts])


def day(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One day, every policy on its hardware and policies 1 and 2 on equal hardware too."""
    sessions = make_day(seed, args.users)
    out: dict[str, Any] = {
        "users": args.users,
        "seed": seed,
        "sessions": len(sessions),
        "patience_min": args.patience,
        "gpus": cluster_gpus(),
        "policies": {},
        "equal_hardware": {},
    }
    for group, key in ((POLICIES, "policies"), (EQUAL, "equal_hardware")):
        base: dict[str, Any] | None = None
        for p in group:
            f = figures(run_policy(p, sessions, args), len(sessions))
            if base is None:
                base = f
            else:
                f["ratios"] = ratios(f, base)
            out[key][p.key] = f
    eq = out["equal_hardware"]
    for p in SHAPED:
        eq[f"{p.key}_ratios"] = ratios(out["policies"][p.key], eq["whole"])
    return out


def seed_list(text: str) -> list[int]:
    """``1-10`` or ``1,3,5`` (or both: ``1-5,9``)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            out += list(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--seeds {text!r}: expected seeds as 1-10 or 1,3,5"
            ) from None
    if not out:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: no seed in it")
    return out


#: ``--seeds``' ratios: name -> (figure, this group and policy, policy 1's group)
SEED_RATIOS = {
    "p3_x_p1_equal": ("served", ("policies", "shapes_idle_queue"), "equal_hardware"),
    "p3_x_p1_demo": ("served", ("policies", "shapes_idle_queue"), "policies"),
    "p2_x_p1_equal": ("served", ("equal_hardware", "whole_idle_queue"), "equal_hardware"),
    "p3_x_p1_equal_completed": ("completed", ("policies", "shapes_idle_queue"), "equal_hardware"),
    "p4_x_p1_equal": ("served", ("policies", "recut_idle_queue"), "equal_hardware"),
    "p2_x_p1_equal_held": (
        "gpu_hours_held",
        ("equal_hardware", "whole_idle_queue"),
        "equal_hardware",
    ),
}
#: The claim (issue 38): policy 3 over policy 1 on equal hardware, sessions served
CLAIM_MEDIAN, CLAIM_FLOOR = 1.5, 1.3
#: The goal (issue 41): policy 4 over policy 1 on equal hardware, sessions served, at the median
GOAL_RECUT = 2.0
#: ``--seeds``' figures per policy, each given as median and range
SEED_FIGURES = (
    "served",
    "completed",
    "back",
    "back_abandoned",
    "wait_p50_min",
    "wait_p95_min",
    "gpu_hours_held",
)
RECUT_FIGURES = ("recuts", "recuts_to_demand", "recuts_home", "recuts_unused", "nodes_home_at_end")


def over_seeds(seeds: Sequence[int], args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for seed in seeds:
        out = day(seed, args)
        r: dict[str, Any] = {"seed": seed, "sessions": out["sessions"]}
        runs = {
            "whole_demo": out["policies"]["whole"],
            "whole_idle_queue_demo": out["policies"]["whole_idle_queue"],
            "shapes_idle_queue": out["policies"]["shapes_idle_queue"],
            "recut_idle_queue": out["policies"]["recut_idle_queue"],
            "whole_equal": out["equal_hardware"]["whole"],
            "whole_idle_queue_equal": out["equal_hardware"]["whole_idle_queue"],
        }
        for name, f in runs.items():
            r[name] = {x: f[x] for x in (*SEED_FIGURES, *RECUT_FIGURES) if x in f}
        for name, (fig, (group, key), base) in SEED_RATIOS.items():
            b = out[base]["whole"][fig]
            r[name] = round(out[group][key][fig] / b, 3) if b else None
        # the most any policy could reach over policy 1 on equal hardware: every session served
        p1 = out["equal_hardware"]["whole"]["served"]
        r["ceiling_x_p1_equal"] = round(out["sessions"] / p1, 3) if p1 else None
        rows.append(r)
    summary = {}
    for name in (*SEED_RATIOS, "ceiling_x_p1_equal"):
        values = [r[name] for r in rows if r[name] is not None]
        summary[name] = {
            "median": round(statistics.median(values), 3),
            "min": min(values),
            "max": max(values),
        }
    per_policy: dict[str, dict[str, dict[str, float]]] = {}
    for run in rows[0]:
        if not isinstance(rows[0][run], dict):
            continue
        per_policy[run] = {
            x: spread([r[run][x] for r in rows]) for x in rows[0][run] if x in rows[0][run]
        }
    head = summary["p3_x_p1_equal"]
    holds = head["median"] >= CLAIM_MEDIAN and head["min"] >= CLAIM_FLOOR
    return {
        "users": args.users,
        "seeds": list(seeds),
        "per_seed": rows,
        "summary": summary,
        "per_policy": per_policy,
        "claim_holds": holds,
        "recut_goal_holds": summary["p4_x_p1_equal"]["median"] >= GOAL_RECUT,
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values)}


def seeds_table(res: dict[str, Any]) -> str:
    names = [*SEED_RATIOS, "ceiling_x_p1_equal"]
    lines = [
        f"bench_density --seeds: {res['users']} users, seeds {res['seeds'][0]}-{res['seeds'][-1]}"
        f" ({len(res['seeds'])} days); served by policy, then ratios (x = A / B)",
        "",
        f"{'seed':>4}{'sess.':>6}{'p1 demo':>8}{'p1 eq':>7}{'p2 eq':>7}{'p3':>5}{'p3 back/lost':>14}"
        f"{'p4':>5}{'cuts':>6}" + "".join(f"{n:>{max(len(n), 6) + 2}}" for n in names),
    ]
    for r in res["per_seed"]:
        p3 = r["shapes_idle_queue"]
        lines.append(
            f"{r['seed']:>4}{r['sessions']:>6}{r['whole_demo']['served']:>8}"
            f"{r['whole_equal']['served']:>7}{r['whole_idle_queue_equal']['served']:>7}"
            f"{p3['served']:>5}{p3['back']:>8}/{p3['back_abandoned']:<5}"
            f"{r['recut_idle_queue']['served']:>5}{r['recut_idle_queue']['recuts']:>6}"
            + "".join(f"{r[n]:>{max(len(n), 6) + 2}.2f}" for n in names)
        )
    lines.append("")
    for n, s in res["summary"].items():
        lines.append(f"{n}: median x{s['median']:.2f}, range x{s['min']:.2f} to x{s['max']:.2f}")
    head = res["summary"]["p3_x_p1_equal"]
    lines.append(
        "ceiling_x_p1_equal: sessions / policy 1's served on equal hardware, the most any policy "
        "could reach (every session served)"
    )
    lines.append(
        f"claim (policy 3 over policy 1 on equal hardware, sessions served: median >= "
        f"x{CLAIM_MEDIAN}, no seed below x{CLAIM_FLOOR}): "
        + ("holds" if res["claim_holds"] else "does not hold")
        + f" (median x{head['median']:.2f}, lowest x{head['min']:.2f})"
    )
    p4 = res["summary"]["p4_x_p1_equal"]
    lines.append(
        f"goal (policy 4 over policy 1 on equal hardware, sessions served: median >= "
        f"x{GOAL_RECUT}): "
        + ("holds" if res["recut_goal_holds"] else "does not hold")
        + f" (median x{p4['median']:.2f}, x{p4['min']:.2f} to x{p4['max']:.2f})"
    )
    lines += ["", "per policy, median (range) over the seeds:"]
    titles = {
        "whole_equal": "1 whole, equal hw",
        "whole_idle_queue_equal": "2 whole+idle+queue, eq.",
        "shapes_idle_queue": "3 shapes+idle+queue",
        "recut_idle_queue": "4 shapes+idle+queue+recut",
    }
    for run, title in titles.items():
        figs = res["per_policy"][run]
        words = ", ".join(
            f"{x.replace('_min', ' min').replace('_', ' ')} {v['median']:g} "
            f"({v['min']:g}-{v['max']:g})"
            for x, v in figs.items()
        )
        lines.append(f"  {title}: {words}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=seed_list, help="several days: 1-10 or 1,3,5")
    parser.add_argument("--patience", type=float, default=30.0, help="minutes")
    parser.add_argument("--retry", type=float, default=5.0, help="minutes (policy 1)")
    parser.add_argument("--poll", type=float, default=60.0, help="seconds (idle policy)")
    parser.add_argument(
        "--recut-nodes",
        type=lambda t: tuple(n for n in t.split(",") if n),
        default=RECUT_NODES,
        help=f"policy 4: training-pool's nodes it may re-cut (default {','.join(RECUT_NODES)})",
    )
    parser.add_argument(
        "--recut-seconds", type=float, default=120.0, help="policy 4: how long a re-cut takes"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)

    if args.seeds:
        res = over_seeds(args.seeds, args)
        print(json.dumps(res) if args.json else seeds_table(res))
        return 0
    out = day(args.seed, args)
    print(json.dumps(out) if args.json else table(out, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
