"""The day that ``bench_density.py`` replays: notebook sessions drawn from stated distributions,
and the demo's cluster, whole or partly partitioned.

**Arrivals.** A non-homogeneous Poisson process over one day (drawn by thinning), with
``2 x --users`` sessions expected in all (each user starts 2 a day on average; *assumption*),
each started by a user drawn uniformly. The rate follows a working day (*assumption*, shaped
as office hours): a night floor of 5 % of the peak, rising from 08:00 to a plateau at 10:00-16:00
with a dip to 80 % at lunch (12:00-13:00), falling to the floor by 20:00.

**Durations.** Lognormal, median 1.5 h, sigma 1.0 (mean about 2.5 h, 5 % above 7.7 h), clipped
to [5 min, 10 h]. A heavy-tailed run time is what the trace studies report for GPU jobs
(Jeon et al., ATC'19, Philly; Hu et al., SC'21, Helios); the parameters for interactive
sessions are our *assumption*.

**What a session needs** (*assumption* for the split; its direction is the traces'): light
70 % (one GPU asked, a small share of it used: 10-40 % while busy; fits a MIG 1g/2g instance or a
quarter of a shared GPU), medium 20 % (one GPU, 40-90 % while busy; fits a MIG 3g.40gb), heavy
10 % (two GPUs, 50-95 % while busy). Weng et al. (NSDI'22) report from Alibaba PAI's two-month
trace that most GPU instances use a small fraction of the GPU they hold: an analysis of its
``pai_sensor_table`` (affinode.io, below) finds a median lifetime utilization of 1.5 %, a mean of
10.5 %, and 75 % of instances under 10 %.

**Use over time.** Busy and idle stretches alternate, starting busy: busy ~ Exp(mean 15 min),
idle ~ Exp(mean 30 min) (so about a third of an attended session is busy; *assumption*). Idle
stretches use 0-3 % (under the idle policy's 5 %). In 35 % of sessions the user walks away
at a uniform 30-90 % of the session and it stays idle to its end (the forgotten notebook;
*assumption*). That notebook sessions hold GPUs for long lifetimes with intermittent, sporadic
use, idle most of the time, is the finding of Carver et al. (NotebookOS, ASPLOS'26, on
Adobe's production notebook workload); in Philly, exclusively reserved GPUs sat at 0 % for
25-51 % of their jobs' minutes (affinode.io's analysis of the Philly telemetry).

Sources (found with this project's search tool; the parameters above are ours where marked):

- Q. Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale
  Heterogeneous GPU Clusters", USENIX NSDI'22 (https://www.usenix.org/conference/nsdi22,
  project page https://cse.hkust.edu.hk/pg/research/projects/weiwa/mlaas/);
  the figures from its trace: https://affinode.io/case-studies/alibaba-gpu-v2020/case-study.html
- M. Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
  Workloads", USENIX ATC'19 (https://www.usenix.org/conference/atc19/presentation/jeon);
  idle minutes from its telemetry:
  https://affinode.io/case-studies/msft-philly-dataset/analysis/case-study.html
- Q. Hu et al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU
  Datacenters", SC'21 (https://arxiv.org/abs/2109.01313)
- B. Carver et al., "NotebookOS: A Replicated Notebook Platform for Interactive Training with
  On-Demand GPUs", ASPLOS'26 (https://arxiv.org/abs/2503.20591)

**The cluster** is ``examples/cluster.yaml`` (32 GPUs: 16 A100-80G in training-pool, 8 A10 in
inference-pool, 4 RTX 4090 in dev-pool, 4 T4 on node-6, the ``default`` pool), read by the
simulator's own parser and turned into the Node objects the service's watch would see. The
partitioned variant (policy 3) keeps the hardware and cuts some of it, as docs/sim.md's
cluster files do: gpu-node-1's 8 A100s in MIG mixed mode (4 x 3g.40gb, 6 x 2g.20gb,
30 x 1g.10gb over the node: 2 GPUs as 3g+3g, 2 as 2g+2g+2g+1g, 4 as 7 x 1g), and the A10
nodes time-sliced, 4 replicas a GPU (16 a node); gpu-node-2, dev-pool and node-6 stay whole.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jupyter_gpupool.sim.cluster import node_object
from jupyter_gpupool.sim.nodes.spec import parse_cluster

HOUR = 3600.0
DAY = 24 * HOUR
EXAMPLE_CLUSTER = Path(__file__).resolve().parents[1] / "examples" / "cluster.yaml"

SESSIONS_PER_USER = 2.0
#: (from hour, rate as a share of the peak) — linear between the points
DIURNAL = (
    (0.0, 0.05),
    (8.0, 0.05),
    (10.0, 1.0),
    (12.0, 1.0),
    (12.5, 0.8),
    (13.0, 1.0),
    (16.0, 1.0),
    (20.0, 0.05),
    (24.0, 0.05),
)
DURATION_MEDIAN = 1.5 * HOUR
DURATION_SIGMA = 1.0
DURATION_MIN, DURATION_MAX = 5 * 60.0, 10 * HOUR
BUSY_MEAN, IDLE_MEAN = 15 * 60.0, 30 * 60.0
IDLE_UTIL = (0.0, 3.0)
WALK_AWAY = 0.35


@dataclass(frozen=True)
class Need:
    name: str
    share: float  # of sessions
    gpus: int  # whole GPUs asked
    busy_util: tuple[float, float]  # percent of a whole GPU while busy


NEEDS = (
    Need("light", 0.70, 1, (10.0, 40.0)),
    Need("medium", 0.20, 1, (40.0, 90.0)),
    Need("heavy", 0.10, 2, (50.0, 95.0)),
)

#: Groups as examples/pools/quotas.yaml has them: (group or "", share of users)
GROUPS = (("ml-research", 0.4), ("ml-ops", 0.3), ("", 0.3))


@dataclass(frozen=True)
class Session:
    """One notebook session: who, when it is asked for, how long it would run once started,
    what it needs, and its GPU use over time (``starts``/``utils``: a step function of the
    seconds since it started)."""

    id: int
    user: str
    group: str
    arrival: float
    duration: float
    need: Need
    starts: tuple[float, ...]
    utils: tuple[float, ...]

    @property
    def groups(self) -> tuple[str, ...]:
        return (self.group,) if self.group else ()

    def util_at(self, t: float) -> float:
        """Percent of a whole GPU in use ``t`` seconds after the start."""
        return self.utils[max(0, bisect.bisect_right(self.starts, t) - 1)]

    def idle_seconds(self, until: float, below: float) -> float:
        """Seconds in [0, until] spent under ``below`` percent."""
        total = 0.0
        ends = (*self.starts[1:], math.inf)
        for start, end, util in zip(self.starts, ends, self.utils, strict=True):
            if start >= until:
                break
            if util < below:
                total += min(end, until) - start
        return total

    def busy_after(self, t: float, below: float) -> bool:
        """Whether the user would have used the GPU again after ``t`` (before the end)."""
        i = bisect.bisect_right(self.starts, t)
        return any(
            u >= below
            for s, u in zip(self.starts[i:], self.utils[i:], strict=True)
            if s < self.duration
        )


def diurnal(t: float) -> float:
    """The arrival rate at ``t`` seconds into the day, as a share of the peak."""
    h = (t % DAY) / HOUR
    for (h0, r0), (h1, r1) in itertools.pairwise(DIURNAL):
        if h0 <= h <= h1:
            return r0 + (r1 - r0) * (h - h0) / (h1 - h0) if h1 > h0 else r1
    return DIURNAL[-1][1]


def _mean_share() -> float:
    steps = 24 * 60
    return sum(diurnal((i + 0.5) * 60) for i in range(steps)) / steps


def arrivals(rng: random.Random, expected: float) -> list[float]:
    """Arrival times over one day: a Poisson process of rate ``peak x diurnal(t)`` (thinning)."""
    peak = expected / (DAY * _mean_share())
    out, t = [], 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= DAY:
            return out
        if rng.random() < diurnal(t):
            out.append(t)


def activity(rng: random.Random, duration: float, need: Need) -> tuple[list[float], list[float]]:
    """Busy and idle stretches over ``duration``, and an idle tail when the user walks away."""
    away = duration * rng.uniform(0.3, 0.9) if rng.random() < WALK_AWAY else duration
    starts: list[float] = []
    utils: list[float] = []
    t, busy = 0.0, True
    while t < away:
        starts.append(t)
        if busy:
            utils.append(rng.uniform(*need.busy_util))
            t += rng.expovariate(1 / BUSY_MEAN)
        else:
            utils.append(rng.uniform(*IDLE_UTIL))
            t += rng.expovariate(1 / IDLE_MEAN)
        busy = not busy
    if away < duration:
        starts.append(away)
        utils.append(rng.uniform(*IDLE_UTIL))
    return starts, utils


def users_and_groups(n: int) -> dict[str, str]:
    """``user -> group`` ("" for none), in GROUPS' shares."""
    out: dict[str, str] = {}
    bounds, acc = [], 0.0
    for group, share in GROUPS:
        acc += share
        bounds.append((acc, group))
    for i in range(n):
        frac = (i + 0.5) / n
        out[f"user{i:03d}"] = next(g for b, g in bounds if frac <= b + 1e-9)
    return out


def make_day(seed: int, users: int) -> list[Session]:
    """The day's sessions, in arrival order (the same seed and users: the same day)."""
    rng = random.Random(seed)
    who = users_and_groups(users)
    names = list(who)
    sessions = []
    for i, t in enumerate(arrivals(rng, SESSIONS_PER_USER * users)):
        user = rng.choice(names)
        need = rng.choices(NEEDS, weights=[n.share for n in NEEDS])[0]
        duration = rng.lognormvariate(math.log(DURATION_MEDIAN), DURATION_SIGMA)
        duration = min(max(duration, DURATION_MIN), DURATION_MAX)
        starts, utils = activity(rng, duration, need)
        sessions.append(Session(i, user, who[user], t, duration, need, tuple(starts), tuple(utils)))
    return sessions


# --- the cluster ---------------------------------------------------------------------------------

MIG_NODE = "gpu-node-1"
MIG_DEVICES = {"3g.40gb": 4, "2g.20gb": 6, "1g.10gb": 30}
SHARED_NODES = ("gpu-node-3", "gpu-node-4")
SHARED_REPLICAS = 4


def cluster_nodes(partitioned: bool) -> list[dict[str, Any]]:
    """The demo cluster's Node objects (as the API would serve them), partitioned or not."""
    data = yaml.safe_load(EXAMPLE_CLUSTER.read_text())
    if partitioned:
        for node in data["nodes"]:
            if node["name"] == MIG_NODE:
                node["gpu"]["mig"] = {"strategy": "mixed", "devices": dict(MIG_DEVICES)}
            elif node["name"] in SHARED_NODES:
                node["gpu"]["sharing"] = {"strategy": "time-slicing", "replicas": SHARED_REPLICAS}
    spec = parse_cluster(yaml.safe_dump(data), str(EXAMPLE_CLUSTER))
    return [node_object(n, 0.0) for n in spec.nodes]
