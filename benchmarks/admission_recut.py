"""bench_admission's ``--recut`` mode (issue 41): admissions while the service plans re-cuts.

The run is made twice on clusters built from the same seed (with GFD's ``nvidia.com/gpu.product``
and ``.count`` on every node, which the planning reads): first with no pool file's ``recut``
section, then with every pool's given ``recut: {nodes: <all its nodes>, configs: [all-disabled,
all-1g.10gb, all-balanced]}`` and ``--waiting`` requests in line, spread over the pools, half
of them asking a ``mig-1g.10gb`` instance (which no node offers: every pool's line wants some)
and half whole GPUs, so that the planner has work in every pool.

In the second run, every 2 s of wall time (``RECUT_EVERY``, as the service's loop
``admission.recut``), the service's planning runs exactly as the service runs it: a real
:class:`~jupyter_gpupool.service.admission.recutwatch.RecutWatch` over the run's registry, usage
index and reservations, whose line is the waiting requests, asked for ``plans(now)``. The service
plans under the admission desk's lock, so an admission arriving meanwhile waits for the round:
the round's time is charged to the admission that comes next (its latency is its own plus the
round's). The re-cuts planned are counted, **not applied**: no node is relabelled and no MIG
manager answers, so every round plans from the same layouts and asks about the same re-cuts
again (the service would see them under way and ask none).

What this measures and what not: admissions here come back to back, so a round meets one
admission in the thousands and the p99 sees a round's length only through that one (and its
garbage and cache misses through the others); in a service admitting steadily, every admission
arriving during a round waits for the rest of it, up to ``recut_round_ms`` (the share of them
that do is about the round over the round plus 2 s). The second run's ``rss_mb`` counts the
service's modules too, imported for the watch.

Prints ``{"none": {...}, "recut": {...}, "recut_x_none_p99": ..., "recut_round_ms": {"p50": ...,
"max": ...}, "recut_rounds": ..., "recuts_asked": {...}}``: both runs' figures, the recut run's
admission p99 over the first's (the target: at most 1.10), the planning rounds' times and how
many there were, and the re-cuts the plans asked (in the first round, at most in one, and the
distinct nodes over all rounds). Run::

    python benchmarks/bench_admission.py --recut --waiting 1000
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jupyter_gpupool.core.admission.decision import AdmissionState
from jupyter_gpupool.core.admission.queue import Waiting
from jupyter_gpupool.core.admission.walk import AdmissionRequest
from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.time.bookings_in_force import Calendar
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations

#: The mig-parted configs every pool may choose among (the GPU operator's default file has them)
CONFIGS = ("all-disabled", "all-1g.10gb", "all-balanced")
#: GFD's ``nvidia.com/gpu.product`` for the benchmark's GPU types (only A100s cut in MIG here)
PRODUCTS = {
    "A100-80G": "NVIDIA-A100-SXM4-80GB",
    "H100-80G": "NVIDIA-H100-80GB-HBM3",
    "L40S-48G": "NVIDIA-L40S",
    "A10-24G": "NVIDIA-A10",
}
MIG_SHAPE = "mig-1g.10gb"


def recut_section(nodes: Sequence[str]) -> dict[str, Any]:
    """A pool file's ``recut`` allowing every one of ``nodes`` every config of :data:`CONFIGS`."""
    return {"nodes": list(nodes), "configs": list(CONFIGS)}


def gfd_labels(gpu_type: str, gpus: int) -> dict[str, str]:
    """What GFD labels a node of ``gpus`` GPUs of ``gpu_type`` with (product and count)."""
    return {L.GFD_PRODUCT_LABEL: PRODUCTS[gpu_type], L.GFD_COUNT_LABEL: str(gpus)}


def waiting_line(
    pools: Sequence[str], users: Sequence[str], memberships: Mapping[str, tuple[str, ...]], n: int
) -> list[Waiting]:
    """``n`` requests in line, one pool each in turn, every other round of the pools a
    ``mig-1g.10gb`` instance each, the others 1 to 8 whole GPUs (so each pool has both)."""
    rng = random.Random(len(pools) * 1_000 + n)
    out = []
    for i in range(n):
        user = users[i % len(users)]
        mig = i // len(pools) % 2 == 0
        request = AdmissionRequest(
            user,
            memberships[user],
            (pools[i % len(pools)],),
            1 if mig else rng.choice((1, 1, 2, 4, 8)),
            server=f"w{i}",
            admission_id=f"waiting-{i}",
            shapes=(MIG_SHAPE,) if mig else (),
        )
        out.append(Waiting(request, seq=i, since=0.0))
    return out


class WatchedState:
    """What the re-cut watch reads of the service's state (``ServiceState`` offers the same)."""

    def __init__(self, registry: Registry, index: UsageIndex, reservations: Reservations):
        self.registry = registry
        self.index = index
        self.reservations = reservations
        self.now = 0.0
        #: no bookings: the watch plans for the line only (bookings' layouts are not measured)
        self.calendar = Calendar(())

    def admission_state(self) -> AdmissionState:
        return AdmissionState(self.registry, self.index, self.reservations, now=self.now)


async def _no_patch(node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
    raise AssertionError("the benchmark applies no re-cut")


def rounds(
    syn: Any, registry: Registry, index: UsageIndex, reservations: Reservations
) -> RecutRounds:
    """The planning rounds of a run on bench_admission's ``syn`` cluster, for a line of
    ``--waiting`` requests in its pools."""
    line = waiting_line(syn.pools, syn.users, syn.memberships, syn.args.waiting)
    return RecutRounds(registry, index, reservations, line)


class RecutRounds:
    """The service's re-cut planning beside the admissions: a round every ``every`` seconds of
    wall time (``RECUT_EVERY``; the first at the first admission, as the loop's), charged to the admission that
    comes next."""

    def __init__(
        self,
        registry: Registry,
        index: UsageIndex,
        reservations: Reservations,
        waiting: Iterable[Waiting],
        every: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        # imported here: the service package loads the whole app (JupyterHub's auth, the
        # Kubernetes client), which the other modes of bench_admission would count in rss_mb
        from jupyter_gpupool.service.admission.recutwatch import RECUT_EVERY, RecutWatch
        from jupyter_gpupool.service.records.changelog import ChangeLog

        line = list(waiting)
        self.state = WatchedState(registry, index, reservations)
        self.watch = RecutWatch(self.state, _no_patch, lambda: line, ChangeLog())
        self.every = RECUT_EVERY if every is None else every
        self.clock = clock
        self.next_at = float("-inf")
        self.seconds: list[float] = []
        self.asked: list[int] = []
        self.nodes: set[str] = set()

    def before(self, now: float) -> float:
        """Before an admission at ``now`` (the run's clock): the seconds it waits for the
        planning round that was due (0 when none was)."""
        began = self.clock()
        if began < self.next_at:
            return 0.0
        self.state.now = now
        plans = self.watch.plans(now)
        ended = self.clock()
        self.next_at = ended + self.every  # the loop sleeps its interval after each round
        self.seconds.append(ended - began)
        self.asked.append(len(plans))
        self.nodes.update(cut.node for _, cut in plans)
        return ended - began

    def figures(self) -> dict[str, Any]:
        ms = sorted(s * 1000 for s in self.seconds) or [0.0]
        return {
            "recut_round_ms": {"p50": round(ms[len(ms) // 2], 4), "max": round(ms[-1], 4)},
            "recut_rounds": len(self.seconds),
            "recuts_asked": {
                "first_round": self.asked[0] if self.asked else 0,
                "max_per_round": max(self.asked, default=0),
                "nodes": len(self.nodes),
            },
        }


def compare(args: argparse.Namespace, run: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Both runs (``run`` is bench_admission's) and their figures side by side."""
    none = run(args)
    gc.collect()
    recut = run(args, recut=True)
    rounds = recut.pop("recut_watch")
    return {
        "none": none,
        "recut": recut,
        "recut_x_none_p99": round(recut["admission_p99_ms"] / none["admission_p99_ms"], 2),
        **rounds,
    }
