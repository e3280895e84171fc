"""Policy 4 of ``bench_density.py`` (issue 41): policy 3's day, plus the service's re-cutting.

The replay (``density_replay.Replay``) with one more loop, paced as the service's re-cut watch
(``service/admission/recutwatch.py``, a round at most every ``RECUT_EVERY`` = 2 s): a round is
due when the line or the nodes changed (a request queued, served or gone, a server started or
ended, a re-cut asked or done), at the event's second or 2 s after the last round, whichever
is later, and once a ``poll`` (60 s) while requests wait or a node is away from home, since
time alone moves the planner's answer (``unused``, ``interval``): there the replay is up to a
minute later than the service. A round, per pool whose file has a ``recut``, passes over a
pool whose line wants nothing and whose nodes are all home, as the service's does; else it asks
the product's planner, ``core.admission.recut.plan(policy, configs, nodes, wanted, now)``, and
does what it answers, as NVIDIA's MIG manager would:

- ``nodes``: the policy's nodes as :class:`NodeCut` rows: GFD's product and GPU count, the
  config the node is cut as now (``nvidia.com/mig.config``), the MIG manager's state
  (``pending`` while a re-cut is under way, else ``success``), the GPU pods on it, when the
  replay last asked it to change, and since when no GPU pod ran on it.
- ``wanted``: per shape id, the units that the requests waiting in line for that pool want of
  it, beyond what the pool's nodes offer free. A waiting request counts once per pool, for the
  first shape of its list in that pool that its quota there lets it have
  (``core.admission.quota.shape_headroom``); a request for whole GPUs counts its GPUs.
- A re-cut: the node's ``nvidia.com/mig.config`` is the new config and its
  ``nvidia.com/mig.config.state`` ``pending`` at once (the index then admits nothing new on
  it), and ``--recut-seconds`` later (2 min) the node is written as the device plugin and GFD
  write it cut that way (allocatable ``nvidia.com/mig-<profile>`` / ``nvidia.com/gpu`` and the
  labels ``sim/nodes/partitions.Layout`` computes), ``success``, and the line takes a pass.

The planner is never second-guessed here: what it answers is done, and what it leaves is left.
Counted: every re-cut, those to demand and those home, the re-cuts whose layout no server used
before the node changed again (or the day ended), the nodes at home at the end, the rounds and
the times the planner was asked.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from density_replay import Replay, Result, is_gpu_resource
from density_workload import EXAMPLE_CLUSTER, MIG_NODE

from jupyter_gpupool.core.admission.decision import Decision
from jupyter_gpupool.core.admission.quota import NO_ROOM, shape_headroom
from jupyter_gpupool.core.admission.recut import NodeCut, Recut, plan
from jupyter_gpupool.core.documents.mig_parted import (
    DEFAULT_CONFIGS,
    MigConfigs,
    gpu_layouts,
    read_configs,
    resource_profile,
)
from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.pools.recut_policy import RecutPolicy
from jupyter_gpupool.core.usage.labels import DEFAULT_POOL, POOL_LABEL
from jupyter_gpupool.core.usage.shapes import WHOLE, node_offer
from jupyter_gpupool.sim.cluster import node_object
from jupyter_gpupool.sim.nodes.partitions import GPU_RESOURCE, MIG_PREFIX, Layout, Unit, card_of
from jupyter_gpupool.sim.nodes.spec import NodeSpec, parse_cluster

#: Event kinds after density_replay's: a re-cut the MIG manager finished; the re-cut loop's
#: own tick (every ``poll`` seconds while the day goes on: "unused for 30 min" needs a clock);
#: a round of the re-cut loop (after every other event of its second)
RECUT_DONE, RECUT_TICK, RECUT_ROUND = 5, 6, 7
#: The service's re-cut watch: seconds between two rounds at most often (recutwatch.RECUT_EVERY)
RECUT_EVERY = 2.0
CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"

#: gpu-node-1's layout under policy 3 (density_workload.MIG_DEVICES: 2 GPUs as 3g+3g, 2 as
#: 2g+2g+2g+1g, 4 as 7 x 1g), as the admin's mig-parted config file would name it
MIXED_CONFIG = "density-mixed"
MIXED_CONFIG_FILE = f"""\
version: v1
mig-configs:
  {MIXED_CONFIG}:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {{"3g.40gb": 2}}
    - devices: [2, 3]
      mig-enabled: true
      mig-devices: {{"2g.20gb": 3, "1g.10gb": 1}}
    - devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {{"1g.10gb": 7}}
"""
#: The GPU operator's default A100 configs and the admin's own
CONFIGS: dict[str, Any] = {**DEFAULT_CONFIGS, **read_configs(MIXED_CONFIG_FILE, "admin-config")}

#: The node policy 4 may re-cut by default: training-pool's second 8-GPU A100 node, as the demo
#: allows (docs/density.md says why not gpu-node-1 too; ``--recut-nodes`` tries it)
RECUT_NODES = ("gpu-node-2",)
RECUT_CONFIGS = ("all-disabled", "all-1g.10gb", "all-balanced")
RECUT_POOL = "training-pool"
#: The config each re-cut node starts the day in: policy 3's hardware
START = {MIG_NODE: MIXED_CONFIG, "gpu-node-2": "all-disabled"}


def recut_policy(nodes: Sequence[str] = RECUT_NODES) -> RecutPolicy:
    """What training-pool's file would say: these nodes, among the three configs, home whole
    GPUs, the pool file's defaults for ``unused`` (30 min) and ``interval`` (10 min)."""
    return RecutPolicy(tuple(nodes), RECUT_CONFIGS, "all-disabled")


def with_recut(registry: Registry, policy: RecutPolicy, pool: str = RECUT_POOL) -> Registry:
    """The registry with ``pool``'s file given ``policy`` as its ``recut``."""
    pools = dict(registry.pools)
    pools[pool] = replace(pools[pool], recut=policy)
    return replace(registry, pools=pools)


def whole_specs() -> dict[str, NodeSpec]:
    """The cluster file's nodes with every GPU whole (the base each layout is written over)."""
    spec = parse_cluster(EXAMPLE_CLUSTER.read_text(), str(EXAMPLE_CLUSTER))
    out = {}
    for n in spec.nodes:
        gpu = replace(n.gpu, mig=None, sharing=None)
        out[n.name] = replace(n, gpu=gpu, labels=dict(n.labels))
    return out


def layout_of(configs: MigConfigs, config: str, spec: NodeSpec) -> Layout | None:
    """How ``config`` cuts the node's GPUs (None: all whole), each GPU as the config says."""
    per_gpu = gpu_layouts(configs[config], spec.gpu.count, spec.gpu.product)
    card = card_of(spec.gpu.product)
    if per_gpu is None or card is None or all(g is None for g in per_gpu):
        return None
    units: list[Unit] = []
    for g, layout in enumerate(per_gpu):
        if layout is None:
            units.append(Unit(GPU_RESOURCE, g, memory_mib=spec.gpu.memory_mib))
            continue
        gi = 0
        for profile, count in layout:
            prof = card.profile(profile)
            for _ in range(count):
                gi += 1
                memory = prof.memory_mib if prof else None
                res = MIG_PREFIX + resource_profile(profile)
                units.append(Unit(res, g, profile, gi, None, memory))
    return Layout("mig-mixed", spec.gpu.count, units, card)


def node_cut_as(spec: NodeSpec, configs: MigConfigs, config: str, state: str) -> dict[str, Any]:
    """The Node as the device plugin and GFD write it once the MIG manager applied ``config``
    (``state``: ``success``), as MigManager._apply rewrites allocatable and GFD's labels."""
    node = node_object(spec, 0.0)
    layout = layout_of(configs, config, spec)
    labels = node["metadata"]["labels"]
    if layout is not None:
        labels.update(layout.labels(spec.gpu.product, spec.gpu.memory_mib))
        for key in ("capacity", "allocatable"):
            res = {k: v for k, v in node["status"][key].items() if k != GPU_RESOURCE}
            res.update((k, str(v)) for k, v in sorted(layout.resources().items()))
            node["status"][key] = res
    labels.update({CONFIG_LABEL: config, STATE_LABEL: state})
    return node


@dataclass
class Cut:
    """One re-cut asked for: what the planner answered, and what came of it."""

    at: float
    recut: Recut
    came_from: str
    done: float | None = None
    servers: int = 0  # servers placed on the node in this layout


@dataclass
class NodeState:
    spec: NodeSpec
    config: str
    state: str = "success"
    last_change: float | None = None
    unused_since: float | None = 0.0
    gpu_pods: int = 0
    cuts: list[Cut] = field(default_factory=list)


class RecutReplay(Replay):
    """The replay with the service's re-cutting (the module's words)."""

    #: a round due is a clock's too: what it follows (a server, a wait, a re-cut) has its own event
    clocks = frozenset({*Replay.clocks, RECUT_TICK, RECUT_ROUND})

    def __init__(
        self,
        registry: Registry,
        nodes: Sequence[dict[str, Any]],
        *args: Any,
        configs: MigConfigs = CONFIGS,
        recut_seconds: float = 120.0,
        start: Mapping[str, str] = START,
        plan_fn: Callable[..., list[Recut]] = plan,
        **kwargs: Any,
    ):
        super().__init__(registry, nodes, *args, **kwargs)
        self.configs = configs
        self.recut_seconds = recut_seconds
        self.plan_fn = plan_fn
        self.plans = 0  # times the planner was asked
        self.rounds = 0  # rounds of the re-cut loop
        self.changed = True  # the line or the nodes changed since the last round
        self.round_due = False  # a round is in the heap
        self.last_round = float("-inf")
        #: per node, what it offers free of: (shape id, resource, units); none while re-cut
        self.offers: dict[str, list[tuple[str, str, int]]] = {}
        self.shape_equivalents: dict[str, dict[str, Fraction]] = {}
        self.allocatable: dict[str, dict[str, int]] = {}
        self.pool_nodes: dict[str, list[str]] = {}
        for n in nodes:
            labels, alloc = _read(n)
            name = n["metadata"]["name"]
            self.pool_nodes.setdefault(labels.get(POOL_LABEL, DEFAULT_POOL), []).append(name)
            self._offer(name, labels, alloc)
        specs = whole_specs()
        self.policies = {
            name: pool.recut for name, pool in self.registry.pools.items() if pool.recut
        }
        self.nodes: dict[str, NodeState] = {}
        #: per pool, what one unit of each shape id counts in GPU-equivalents
        self.equivalent: dict[str, dict[str, Fraction]] = {}
        for pool, policy in self.policies.items():
            eq = self.equivalent.setdefault(pool, {WHOLE: Fraction(1)})
            for name in self.pool_nodes.get(pool, []):
                eq.update(self.shape_equivalents[name])
            for name in policy.nodes:
                st = self.nodes[name] = NodeState(specs[name], start.get(name, policy.home))
                for config in {*policy.configs, st.config}:
                    offer = node_offer(*_read(node_cut_as(st.spec, configs, config, "success")))
                    eq.update((o.shape.id, o.shape.equivalent) for o in offer.shapes)
                self._write_node(name)

    # --- the MIG manager's side ------------------------------------------------------------------

    def _offer(self, name: str, labels: dict[str, str], alloc: Mapping[str, Any]) -> None:
        offer = node_offer(labels, alloc)
        shapes = offer.shapes if offer.admits else ()
        self.offers[name] = [(o.shape.id, o.shape.resource, o.count) for o in shapes]
        self.shape_equivalents[name] = {o.shape.id: o.shape.equivalent for o in offer.shapes}
        self.per_unit[name] = {o.shape.resource: o.shape.equivalent for o in offer.shapes}
        self.allocatable[name] = {r: int(v) for r, v in alloc.items() if is_gpu_resource(r)}
        cap = self.result.capacity.setdefault(name, {})
        for r, v in self.allocatable[name].items():
            if v:
                cap[r] = max(cap.get(r, 0), v)

    def _write_node(self, name: str) -> None:
        st = self.nodes[name]
        node = node_cut_as(st.spec, self.configs, st.config, st.state)
        self.index.apply_node("MODIFIED", node)
        self._offer(name, *_read(node))

    def handlers(self) -> dict[int, Callable[[Any], None]]:
        return {
            **super().handlers(),
            RECUT_DONE: self.on_recut_done,
            RECUT_TICK: self.on_tick,
            RECUT_ROUND: self.on_round,
        }

    def on_tick(self, _: None) -> None:
        if self.waiting or any(st.config != self._home(n) for n, st in self.nodes.items()):
            self.changed = True  # time moves the planner's answer: unused, interval
        if self.day_goes_on():
            self.push(self.now + self.poll, RECUT_TICK, None)

    def stepped(self) -> None:
        """A round is due when something changed, at most every RECUT_EVERY seconds."""
        if self.changed and not self.round_due:
            self.round_due = True
            self.push(max(self.now, self.last_round + RECUT_EVERY), RECUT_ROUND, None)

    def on_round(self, _: None) -> None:
        self.round_due, self.changed, self.last_round = False, False, self.now
        self.rounds += 1
        for pool, policy in self.policies.items():
            wanted = self.wanted(pool)
            if not wanted and all(self.nodes[n].config == policy.home for n in policy.nodes):
                continue  # the service's round passes over it too
            rows = [self._row(n) for n in policy.nodes]
            self.plans += 1
            for r in self.plan_fn(policy, self.configs, rows, wanted, self.now):
                self._recut(r)

    def _home(self, name: str) -> str:
        return next(p.home for p in self.policies.values() if name in p.nodes)

    def _row(self, name: str) -> NodeCut:
        st = self.nodes[name]
        return NodeCut(
            name,
            st.spec.gpu.product,
            st.spec.gpu.count,
            st.config,
            st.state,
            st.gpu_pods,
            last_change=st.last_change,
            unused_since=st.unused_since if st.gpu_pods == 0 else None,
        )

    def _recut(self, r: Recut) -> None:
        st = self.nodes[r.node]
        assert st.gpu_pods == 0 and st.state == "success", (r, st.gpu_pods, st.state)
        st.cuts.append(Cut(self.now, r, st.config))
        st.config, st.state, st.last_change = r.config, "pending", self.now
        self._write_node(r.node)
        self.push(self.now + self.recut_seconds, RECUT_DONE, r.node)
        self.changed = True

    def on_recut_done(self, name: str) -> None:
        st = self.nodes[name]
        st.state = "success"
        st.cuts[-1].done = self.now
        assert not any(self.held[name].values())  # nothing could be placed meanwhile
        self._write_node(name)
        self.line_pass()
        self.changed = True

    # --- what the line waits for -----------------------------------------------------------------

    def wanted(self, pool: str) -> dict[str, int]:
        """Per shape id, the units the line wants in ``pool`` beyond what it offers free."""
        if not self.waiting:
            return {}
        state = self.state()
        eq = self.equivalent[pool]
        raw: Counter[str] = Counter()
        for w in self.waiting.values():
            req = w.request
            for name, shape in req.choices():
                if name != pool:
                    continue
                sid = shape or WHOLE
                units = req.gpus if sid == WHOLE else 1
                amount = eq.get(sid, Fraction(1)) * units
                room = shape_headroom(pool, req.user, req.groups, state, {sid: amount})
                if room[sid] != NO_ROOM:
                    raw[sid] += units
                    break
        free = self.free_units(pool)
        return {s: n - free[s] for s, n in raw.items() if n > free[s]}

    def free_units(self, pool: str) -> Counter[str]:
        """Per shape id, the units free on the pool's nodes that take servers now."""
        out: Counter[str] = Counter()
        for name in self.pool_nodes.get(pool, []):
            for sid, resource, count in self.offers[name]:
                out[sid] += count - self.held[name].get(resource, 0)
        return out

    # --- servers on the re-cut nodes -------------------------------------------------------------

    def on_attempt(self, s: Any) -> None:
        before = len(self.waiting)
        super().on_attempt(s)
        if len(self.waiting) != before:
            self.changed = True

    def on_give_up(self, admission_id: str) -> None:
        if admission_id in self.waiting:
            self.changed = True
        super().on_give_up(admission_id)

    def start(self, s: Any, decision: Decision) -> None:
        super().start(s, decision)
        self.changed = True
        st = self.nodes.get(decision.node or "")
        if st is None:
            return
        alloc = self.allocatable[decision.node or ""]
        for r, u in self.held[decision.node or ""].items():
            assert u <= alloc.get(r, 0), (decision.node, r, u, alloc)
        st.gpu_pods += 1
        st.unused_since = None
        if st.cuts:
            st.cuts[-1].servers += 1

    def on_end(self, admission_id: str) -> None:
        r = self.running.get(admission_id)
        if r is not None:
            self.changed = True
        st = self.nodes.get(r.node) if r is not None else None
        if st is not None:
            st.gpu_pods -= 1
            if st.gpu_pods == 0:
                st.unused_since = self.now
        super().on_end(admission_id)

    # --- the figures -----------------------------------------------------------------------------

    def run(self, sessions: Sequence[Any]) -> Result:
        self.push(self.poll, RECUT_TICK, None)
        result = super().run(sessions)
        result.extra.update(self.recut_figures())
        return result

    def recut_figures(self) -> dict[str, Any]:
        cuts = [(name, c) for name, st in self.nodes.items() for c in st.cuts]
        log = [
            {
                "node": name,
                "at_min": round(c.at / 60, 1),
                "from": c.came_from,
                "to": c.recut.config,
                "shape": c.recut.shape,
                "waiting": c.recut.waiting,
                "back": c.recut.back,
                "servers": c.servers,
                "reason": c.recut.reason,
            }
            for name, c in sorted(cuts, key=lambda x: x[1].at)
        ]
        homes = {n: p.home for p in self.policies.values() for n in p.nodes}
        return {
            "recuts": len(cuts),
            "recuts_to_demand": sum(not c.recut.back for _, c in cuts),
            "recuts_home": sum(c.recut.back for _, c in cuts),
            "recuts_unused": sum(c.servers == 0 for _, c in cuts),
            "recuts_to_demand_unused": sum(c.servers == 0 and not c.recut.back for _, c in cuts),
            "nodes_home_at_end": sum(st.config == homes[n] for n, st in self.nodes.items()),
            "recut_nodes": len(self.nodes),
            "plans": self.plans,
            "recut_rounds": self.rounds,
            "recut_log": log,
        }


def _read(node: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    return node["metadata"]["labels"], node["status"]["allocatable"]


def partitioned_recut_nodes(nodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Policy 3's Node objects, the re-cut nodes written as their starting config (the same
    resources: density-mixed is MIG_DEVICES as mig-parted would cut it)."""
    specs = whole_specs()
    out = []
    for n in nodes:
        name = n["metadata"]["name"]
        if name in START:
            n = node_cut_as(specs[name], CONFIGS, START[name], "success")
        out.append(copy.deepcopy(n))
    return out
