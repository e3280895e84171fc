"""Wait estimates benchmark (issue 31): how far from the truth is the estimate a request gets
when it joins the line?

A recorded day is replayed through the core with a moved clock (``density_replay.py``: the
line's order and passes, the idle policy, admission; the day of ``density_workload.py``:
arrivals, durations, needs), on the demo's cluster with whole GPUs, the idle policy and the
queue (``bench_density.py``'s policy 2). Nobody gives up (``--patience``, default a day), so
every request in line is admitted in the end and its true admission time is known.

The history the estimator reads is the ledger of the day before: the same workload with another
seed (``--seed + 1000``) replayed first, each ended session's duration kept per pool, as the
service's ledger keeps them over ``history_days``. When a request joins the line it gets

- **ours**: :func:`jupyter_gpupool.core.time.wait_estimate.estimate` over the whole line in its order,
  the running servers with their age, the idle policy's stops already warned of (sure ends),
  and that history;
- **naive**: its position in line x the mean session duration of its pools' history.

Prints the median and p90 of the absolute error against the true admission time (minutes) of
each, the requests that had no estimate, and the ratios ``naive_x_ours_p50``/``p90`` (naive's
error over ours: above 1, ours is closer). Run::

    python benchmarks/bench_estimate.py                 # 100 users, seed 1
    python benchmarks/bench_estimate.py --users 140 --seed 7
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_admission import percentile
from bench_density import IDLE, POOLS, whole_request
from density_replay import Replay
from density_workload import Session, cluster_nodes, make_day

from jupyter_gpupool.core.admission.decision import Decision
from jupyter_gpupool.core.admission.queue import order, pools_of, positions
from jupyter_gpupool.core.time.wait_estimate import Ask, Held, History, estimate
from jupyter_gpupool.poolfiles import load_paths


class Recording(Replay):
    """The replay, keeping each ended session's duration per pool (the ledger's)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.durations: dict[tuple[str, str | None], list[float]] = {}

    def on_end(self, admission_id: str) -> None:
        r = self.running.get(admission_id)
        if r is not None:
            self.durations.setdefault((r.pool, None), []).append(self.now - r.start)
        super().on_end(admission_id)


class Estimating(Replay):
    """The replay, estimating each request as it joins the line, and noting when it gets in."""

    def __init__(self, history: History, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.history = history
        self.means = {key: sum(d) / len(d) for key, d in history.durations.items() if len(d) > 0}
        self.joined: dict[int, tuple[float, float | None, float | None, float | None]] = {}
        self.admitted: dict[int, float] = {}

    def on_attempt(self, s: Session) -> None:
        before = set(self.waiting)
        super().on_attempt(s)
        for aid in set(self.waiting) - before:
            self.joined[s.id] = (self.now, *self.estimates(aid))

    def start(self, s: Session, decision: Decision) -> None:
        if s.id in self.joined:
            self.admitted[s.id] = self.now
        super().start(s, decision)

    def holding(self) -> list[Held]:
        out = []
        for aid, r in self.running.items():
            sure = None
            if self.idle is not None:
                st = self.clock.state(aid, self.idle)
                if st is not None and self.now >= st.warn_at:
                    sure = st.due_at  # warned: stopped then unless used again
            gpus = r.session.need.gpus
            out.append(Held(r.pool, None, gpus, r.start, sure, "an idle stop", r.node))
        return out

    def estimates(self, aid: str) -> tuple[float | None, float | None, float | None]:
        base = self.state()
        ranked = order(self.waiting.values(), base)
        line = [
            Ask(w.id, w.request.choices(pools_of(w.request, base)), w.request.gpus)
            for w, _ in ranked
        ]
        free = {
            (p, None, n): self.index.node_free(n)
            for p in self.index.pool_names()
            for n in self.index.node_names(p)
        }
        ours = estimate(line, self.holding(), free, self.history, self.now)[aid].at
        w = self.waiting[aid]
        means = [
            self.means[(p, None)] for p in pools_of(w.request, base) if (p, None) in self.means
        ]
        place = positions(ranked, base)[aid]
        mean = sum(means) / len(means) if means else None
        naive = self.now + place * mean if mean is not None else None
        # the same, over the GPUs of its pools (servers run side by side): a fairer naive
        gpus = sum(self.index.pool_totals(p)[0] for p in pools_of(w.request, base))
        per_gpu = self.now + place * mean / max(gpus, 1) if mean is not None else None
        return ours, naive, per_gpu


def replay(cls: type[Replay], sessions: Sequence[Session], patience: float, *extra: Any) -> Any:
    r = cls(
        *extra,
        load_paths([POOLS]),
        cluster_nodes(False),
        whole_request,
        queue=True,
        idle=IDLE,
        patience=patience,
        retry=300.0,
        poll=60.0,
    )
    r.run(sessions)
    return r


def errors(r: Estimating, which: int) -> list[float]:
    out = []
    for sid, joined in r.joined.items():
        guess = joined[which]
        if guess is not None and sid in r.admitted:
            out.append(abs(guess - r.admitted[sid]) / 60)
    return sorted(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--patience", type=float, default=24 * 60.0, help="minutes")
    args = parser.parse_args(argv)

    before = replay(Recording, make_day(args.seed + 1000, args.users), args.patience * 60)
    history = History({k: sorted(v) for k, v in before.durations.items()}, 1)
    sessions = make_day(args.seed, args.users)
    r = replay(Estimating, sessions, args.patience * 60, history)
    ours, naive, per_gpu = errors(r, 1), errors(r, 2), errors(r, 3)
    both = [sid for sid, j in r.joined.items() if j[1] is not None and sid in r.admitted]
    out: dict[str, Any] = {
        "ours_p50_min": round(percentile(ours, 0.5), 2) if ours else None,
        "ours_p90_min": round(percentile(ours, 0.9), 2) if ours else None,
        "naive_p50_min": round(percentile(naive, 0.5), 2) if naive else None,
        "naive_p90_min": round(percentile(naive, 0.9), 2) if naive else None,
        "naive_per_gpu_p50_min": round(percentile(per_gpu, 0.5), 2) if per_gpu else None,
        "naive_per_gpu_p90_min": round(percentile(per_gpu, 0.9), 2) if per_gpu else None,
        "users": args.users,
        "seed": args.seed,
        "sessions": len(sessions),
        "history_sessions": sum(len(v) for v in before.durations.values()),
        "queued": len(r.joined),
        "admitted_from_line": len(r.admitted),
        "estimated": len(both),
        "no_estimate": sum(1 for j in r.joined.values() if j[1] is None),
    }
    for q in ("p50", "p90"):
        a, b = out[f"naive_{q}_min"], out[f"ours_{q}_min"]
        out[f"naive_x_ours_{q}"] = round(a / b, 2) if a is not None and b else None
        c = out[f"naive_per_gpu_{q}_min"]
        out[f"naive_per_gpu_x_ours_{q}"] = round(c / b, 2) if c is not None and b else None
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
