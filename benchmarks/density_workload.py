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
- NVIDIA, MIG user guide, "Supported MIG Profiles"
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html)
- NVIDIA GPU Operator, "Time-Slicing GPUs in Kubernetes"
  (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html)

**On a slice smaller than its need** (*assumption*, its direction NVIDIA's): a session runs
slower while it wants more of a GPU than its slice has, and keeps its slice longer. A stretch
whose use is ``u`` % of a whole GPU, on a slice of share ``f`` of one (a MIG 1g.10gb of an A100
1/7, 2g.20gb 2/7, 3g.40gb 3/7; a replica of a GPU time-sliced 4 ways 1/4), takes ``u / (100 f)``
times as long where ``u > 100 f``, as long where not (idle stretches never stretch). A MIG
instance is a fixed share of the GPU's compute (NVIDIA's MIG user guide, "Supported MIG
Profiles": on an A100 a 1g instance has 1/7 of the SMs, a 2g 2/7, a 3g 3/7), so a notebook that
would use 30 % of the A100 is held to its 1g's 14 % and takes about twice as long: the work is
taken as bound by the compute it gets. A time-sliced replica isolates nothing (NVIDIA GPU
Operator, "Time-Slicing GPUs in Kubernetes": the replicas of a GPU interleave on it, with no
memory or fault isolation); 1/4 is what a replica gets when the four on its GPU are all busy,
less than it gets when the others idle, so this over-states the slowdown there (the replay does
not know which replicas share a physical GPU). Whole GPUs never slow down, whatever their model.

**A user whose server the idle policy stopped** comes back at the next busy moment the session
had (*assumption*: they had not finished; a user who walked away does not come back): a new
request, at that moment, for the same need, that waits and gives up like any other, and if served
runs the rest of the session's work (its stretches from that busy one on) as a new session.

**The cluster** is ``examples/cluster.yaml`` (34 GPUs: 17 A100-80G in training-pool, one of them
MIG-cut on gpu-node-mig-1; 9 A10 in inference-pool, one of them time-sliced 4 ways on
gpu-node-shared-1; 4 RTX 4090 in dev-pool; 4 T4 on node-6, the ``default`` pool), read by the
simulator's own parser and turned into the Node objects the service's watch would see, in three
variants: ``demo`` (the file as it is), ``whole`` (the equal-hardware comparison for the
whole-GPU policies: the demo's MIG A100 and time-sliced A10 given back whole, as the MIG manager
with mig-parted's ``all-disabled`` config and a device plugin without time-slicing would offer
them) and ``partitioned`` (policy 3: the demo's cluster with more of it cut, as docs/sim.md's
cluster files do: gpu-node-1's 8 A100s in MIG mixed mode (4 x 3g.40gb, 6 x 2g.20gb, 30 x 1g.10gb
over the node: 2 GPUs as 3g+3g, 2 as 2g+2g+2g+1g, 4 as 7 x 1g), and the A10 nodes gpu-node-3
and -4 time-sliced, 4 replicas a GPU (16 a node); gpu-node-2, dev-pool and node-6 stay whole).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass, replace
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
    #: the session this one continues, when it is a user back after an idle stop
    back_from: int | None = None

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
        return self.next_busy(t, below) is not None

    def next_busy(self, t: float, below: float) -> int | None:
        """The first stretch after ``t`` in which the user uses the GPU (its index), if any."""
        i = bisect.bisect_right(self.starts, t)
        for j in range(i, len(self.starts)):
            if self.starts[j] < self.duration and self.utils[j] >= below:
                return j
        return None

    def rest(self, stretch: int, new_id: int, arrival: float) -> Session:
        """The session's work from its stretch ``stretch`` on, asked for again at ``arrival``
        (the user back after an idle stop): a new session, of the same need and user."""
        cut = self.starts[stretch]
        return replace(
            self,
            id=new_id,
            arrival=arrival,
            duration=self.duration - cut,
            starts=tuple(s - cut for s in self.starts[stretch:]),
            utils=self.utils[stretch:],
            back_from=self.id if self.back_from is None else self.back_from,
        )

    def on_slice(self, share: float) -> Session:
        """The session as it runs on a slice of ``share`` of a GPU: each stretch whose use is
        over the slice's ``100 x share`` percent takes ``use / (100 x share)`` times as long
        (the module's docstring); the same stretches, in the same order, so stretch ``i`` here is
        stretch ``i`` of the session's work. A whole GPU (``share >= 1``): the session itself."""
        if share >= 1:
            return self
        cap = 100 * share
        starts, t = [], 0.0
        ends = (*self.starts[1:], self.duration)
        for start, end, util in zip(self.starts, ends, self.utils, strict=True):
            starts.append(t)
            t += (min(end, self.duration) - start) * (util / cap if util > cap else 1.0)
        return replace(self, duration=t, starts=tuple(starts))


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


#: The demo's own slices (examples/cluster.yaml): made whole for the equal-hardware comparison
DEMO_SLICED = ("gpu-node-mig-1", "gpu-node-shared-1")
HARDWARE = ("demo", "whole", "partitioned")


def cluster_nodes(partitioned: bool, *, hardware: str | None = None) -> list[dict[str, Any]]:
    """The demo cluster's Node objects (as the API would serve them). ``hardware`` (one of
    HARDWARE; the module's docstring says what each is) wins over ``partitioned``, which is
    ``partitioned`` when true and ``demo`` when false."""
    kind = hardware or ("partitioned" if partitioned else "demo")
    if kind not in HARDWARE:
        raise ValueError(f"hardware {kind!r}: expected one of {', '.join(HARDWARE)}")
    data = yaml.safe_load(EXAMPLE_CLUSTER.read_text())
    for node in data["nodes"]:
        if kind == "partitioned" and node["name"] == MIG_NODE:
            node["gpu"]["mig"] = {"strategy": "mixed", "devices": dict(MIG_DEVICES)}
        elif kind == "partitioned" and node["name"] in SHARED_NODES:
            node["gpu"]["sharing"] = {"strategy": "time-slicing", "replicas": SHARED_REPLICAS}
        elif kind == "whole" and node["name"] in DEMO_SLICED:
            node["gpu"].pop("mig", None)
            node["gpu"].pop("sharing", None)
            labels = node.get("labels") or {}
            if "nvidia.com/mig.config" in labels:
                labels["nvidia.com/mig.config"] = "all-disabled"
    spec = parse_cluster(yaml.safe_dump(data), str(EXAMPLE_CLUSTER))
    return [node_object(n, 0.0) for n in spec.nodes]


def cluster_gpus() -> int:
    """The physical GPUs in the demo's cluster file (every variant has these, cut or whole)."""
    spec = parse_cluster(EXAMPLE_CLUSTER.read_text(), str(EXAMPLE_CLUSTER))
    return sum(n.gpu.count for n in spec.nodes)
