"""Property: under any sequence of requests (waiting or not), servers stopping, cancels and
restarts of the service, the fair queue never over-admits, never admits a request over quota in
a pool where a request within quota waits, leaves no request waiting that fits now, and gives
each waiting request its place in the stated order (issue 18).

The service's own admission desk and line run (:class:`~jupyter_gpupool.service.admission.desk.
AdmissionDesk`, :class:`~jupyter_gpupool.service.admission.line.Line`) on a usage index the test feeds
with nodes and pods. An admitted request's pod appears on its node at once, as its spawner
would create it. The checks read the test's OWN LEDGER (what runs where, charged to whom, from
the pods it created) and its own copy of the quotas it wrote, and judge from those alone:

- no node holds more GPUs than it has; no group passes its ``limit`` in a pool; GPUs charged
  within quota never exceed the group's guarantee;
- no admission over quota in pool P while a request that would be within quota in P still waits
  at the end of the step, wherever it stands in line;
- after each step no waiting request fits: a node of one of its pools has its GPUs free and it
  would be within quota there, or over quota where borrowing is allowed, its group's limit is not
  passed and no such waiting request holds the pool;
- the positions the API shows are the issue's order: within quota first, then the group using
  the smallest part of its guarantee (used / max(guaranteed, 1)), then first come, first served,
  counted among the requests that share a pool;
- a user never holds more than ``CAP`` places in line (issue 36): a request refused a place
  (429) came from a user with ``CAP`` waiting and fits nowhere now.

Simplified world, so that the test's own judgement stays small: each user is in one group, the
quotas name only groups (no user entries, no cluster-wide caps), every pool has a quota with
borrowing, requests do not reclaim (reclaim has its own service tests).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from k8s_factories import node, pod

from jupyter_gpupool.core.admission.queue import ADMITTED
from jupyter_gpupool.core.admission.walk import AdmissionRequest
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.service.admission.desk import AdmissionDesk
from jupyter_gpupool.service.admission.entries import entry_of, waiting_from_row
from jupyter_gpupool.service.admission.line import Line
from jupyter_gpupool.service.errors import ApiError
from jupyter_gpupool.service.monitoring.metrics import Metrics
from jupyter_gpupool.service.state import ServiceState

POOLS = ("p", "q")
GROUPS = ("g1", "g2")
USERS = ("u0", "u1", "u2", "u3")
#: The most places one user may hold in line (``max_queued_per_user``): a further request that
#: no pool takes now is refused (429), never put in line, and by the test's rules fits nowhere
CAP = 2


@st.composite
def quotas(draw) -> dict[str, dict[str, dict[str, int]]]:
    """Per pool, per group: guaranteed, and maybe a limit."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for p in POOLS:
        out[p] = {}
        for g in GROUPS:
            guaranteed = draw(st.integers(0, 3))
            entry = {"guaranteed": guaranteed}
            if draw(st.booleans()):
                entry["limit"] = draw(st.integers(guaranteed, 6))
            out[p][g] = entry
    return out


@dataclass(frozen=True)
class Running:
    """A server as the test's ledger has it."""

    aid: str
    user: str
    pool: str
    node: str
    gpus: int
    charged: str
    over_quota: bool


@dataclass(frozen=True)
class Asked:
    """A request the test put in line."""

    aid: str
    user: str
    pools: tuple[str, ...]
    gpus: int
    seq: int


class World:
    def __init__(self, quota, nodes, groups_of):
        self.quota = quota
        self.groups_of = groups_of
        docs = [
            {
                "kind": "pool",
                "version": "v0.1",
                "pool": {"name": p},
                "quota": {"borrowing": True, "groups": quota[p]},
            }
            for p in POOLS
        ]
        self.state = ServiceState(load_string("\n---\n".join(json.dumps(d) for d in docs)))
        self.capacity: dict[str, int] = {}
        self.node_pool: dict[str, str] = {}
        for name, pool_name, gpus in nodes:
            self.capacity[name] = gpus
            self.node_pool[name] = pool_name
            self.state.index.apply_node("ADDED", node(name, pool_name, gpus))
        self.loop = asyncio.new_event_loop()
        self.desk = self._new_desk()
        self.running: dict[str, Running] = {}
        self.waiting: dict[str, Asked] = {}
        self.seq = 0
        self.admitted_now: list[Running] = []  # during the current step

    def _new_desk(self) -> AdmissionDesk:
        desk = AdmissionDesk(self.state, metrics=Metrics(lambda: self.state), ttl=60)
        desk.line = Line(desk, heartbeat=3600, max_per_user=CAP)
        return desk

    @property
    def line(self) -> Line:
        assert self.desk.line is not None
        return self.desk.line

    def close(self) -> None:
        self.loop.close()

    # --- steps -----------------------------------------------------------------------------------

    def ask(self, user: str, pools: tuple[str, ...], gpus: int, queue: bool) -> None:
        self.seq += 1
        aid = f"a{self.seq:03d}"
        req = AdmissionRequest(
            user, (self.groups_of[user],), pools, gpus, admission_id=aid, reclaim=False
        )
        mine = sum(1 for a in self.waiting.values() if a.user == user)
        try:
            outcome = self.loop.run_until_complete(self.desk.admit(req, queue=queue))
        except ApiError as e:  # not put in line: its user waits with the most places already
            assert e.status == 429, e
            assert queue and mine == CAP, f"{aid} refused a place with {mine} of {user}'s"
            asked = Asked(aid, user, pools, gpus, self.seq)
            assert self.fits(asked) is None, (
                f"{asked} refused a place, but fits in {self.fits(asked)}"
            )
            assert aid not in self.line.waiting
            self._admitted_from_line()
            self._settle()
            return
        if outcome.status == 201:
            self._picked_up(aid, outcome.decision)
        elif outcome.status == 202:
            assert queue, f"{aid} put in line without asking to wait"
            assert mine < CAP, f"{aid} put in line beside {mine} of {user}'s"
            self.waiting[aid] = Asked(aid, user, pools, gpus, self.seq)
        else:
            assert outcome.status == 409, outcome
            if not queue:  # refused at once: by the test's rules too
                asked = Asked(aid, user, pools, gpus, self.seq)
                assert self.fits(asked) is None, f"{asked} refused, but fits in {self.fits(asked)}"
        self._admitted_from_line()
        self._settle()

    def stop(self, i: int) -> None:
        if not self.running:
            return
        r = self.running.pop(sorted(self.running)[i % len(self.running)])
        self.state.index.apply_pod("DELETED", self._pod(r))
        self.line.kick()  # as the cluster view does on a change
        self._settle()

    def cancel(self, i: int) -> None:
        if not self.waiting:
            return
        aid = sorted(self.waiting)[i % len(self.waiting)]

        async def cancel() -> bool:
            async with self.desk.lock:
                return self.line.cancel(aid)

        assert self.loop.run_until_complete(cancel())
        del self.waiting[aid]
        self._settle()

    def restart(self) -> None:
        """The service restarts: a new desk and line take up the entries as the database
        keeps them (JSON), and every spawner asks again (all spawns are alive here)."""
        kept = [json.loads(json.dumps(entry_of(w))) for w in self.line.waiting.values()]
        self.desk = self._new_desk()
        self.line.take_up(waiting_from_row(e) for e in kept)
        for aid in self.waiting:
            self.line.seen(aid)
        self._settle()

    # --- what the service does, and what the test sees of it ------------------------------------

    def _pass(self) -> None:
        async def run() -> None:
            async with self.desk.lock:
                self.line.run_pass()

        self.loop.run_until_complete(run())
        self._admitted_from_line()

    def _settle(self) -> None:
        """The service's loop: a pass after each kick, until nothing changes."""
        while self.line.dirty and self.line.waiting:
            self._pass()

    def _admitted_from_line(self) -> None:
        for aid in list(self.waiting):
            ended = self.line.ended.get(aid)
            if ended is None:
                continue
            assert ended.state == ADMITTED and ended.outcome is not None, (aid, ended)
            del self.waiting[aid]
            self._picked_up(aid, ended.outcome.decision)

    def _picked_up(self, aid: str, decision: Any) -> None:
        """The spawner creates the pod on the admitted node."""
        req = decision.request
        r = Running(
            aid,
            req.user,
            decision.pool,
            decision.node,
            req.gpus,
            decision.charged,
            decision.over_quota,
        )
        assert r.pool in req.pools, f"{aid} admitted to {r.pool}, asked {req.pools}"
        assert self.node_pool[r.node] == r.pool, f"{aid}: node {r.node} is not in {r.pool}"
        assert r.charged == f"group:{self.groups_of[r.user]}", (aid, r.charged)
        self.running[aid] = r
        self.admitted_now.append(r)
        self.state.index.apply_pod("ADDED", self._pod(r))
        self.line.kick()  # as the cluster view does on a change

    def _pod(self, r: Running) -> dict[str, Any]:
        return pod(
            f"jupyter-{r.aid}",
            r.gpus,
            r.node,
            user=r.user,
            pool=r.pool,
            charged=r.charged,
            over_quota=r.over_quota,
            admission=r.aid,
            phase="Running",
        )

    # --- the test's own judgement ----------------------------------------------------------------

    def used(self, pool: str, group: str) -> int:
        return sum(
            r.gpus
            for r in self.running.values()
            if r.pool == pool and r.charged == f"group:{group}"
        )

    def within(self, a: Asked, pool: str) -> bool:
        g = self.groups_of[a.user]
        return self.used(pool, g) + a.gpus <= self.quota[pool][g]["guaranteed"]

    def may_borrow(self, a: Asked, pool: str) -> bool:
        g = self.groups_of[a.user]
        limit = self.quota[pool][g].get("limit")
        return limit is None or self.used(pool, g) + a.gpus <= limit

    def held_nodes(self) -> set[tuple[str, str]]:
        """The nodes a waiting request would be within quota on, of pools it lists, and big
        enough for it: no borrower there (one too small for it may take a borrower)."""
        return {
            (p, n)
            for a in self.waiting.values()
            for p in a.pools
            if self.within(a, p)
            for n, q in self.node_pool.items()
            if q == p and self.capacity[n] >= a.gpus
        }

    def free_nodes(self, pool: str, gpus: int) -> list[str]:
        on = Counter()
        for r in self.running.values():
            on[r.node] += r.gpus
        return [
            n for n, p in self.node_pool.items() if p == pool and self.capacity[n] - on[n] >= gpus
        ]

    def fits(self, a: Asked) -> str | None:
        """Where ``a`` could be admitted now, by the test's rules; None if nowhere."""
        held = self.held_nodes()
        for p in a.pools:
            free = self.free_nodes(p, a.gpus)
            if not free:
                continue
            if self.within(a, p):
                return p
            if self.may_borrow(a, p) and any((p, n) not in held for n in free):
                return p
        return None

    def rank_key(self, a: Asked) -> tuple[bool, float, int]:
        g = self.groups_of[a.user]
        best: tuple[bool, float] | None = None
        for p in a.pools:
            within = self.within(a, p)
            if not within and not self.may_borrow(a, p):
                continue
            here = (not within, self.used(p, g) / max(self.quota[p][g]["guaranteed"], 1))
            best = here if best is None or here < best else best
        if best is None:
            best = (True, float("inf"))
        return (*best, a.seq)

    def positions(self) -> dict[str, int]:
        out: dict[str, int] = {}
        ahead: list[Asked] = []
        for a in sorted(self.waiting.values(), key=self.rank_key):
            out[a.aid] = 1 + sum(1 for b in ahead if set(b.pools) & set(a.pools))
            ahead.append(a)
        return out

    # --- the checks ------------------------------------------------------------------------------

    def check(self) -> None:
        per_node = Counter()
        for r in self.running.values():
            per_node[r.node] += r.gpus
        for n, gpus in self.capacity.items():
            assert per_node[n] <= gpus, f"node {n} has {gpus} GPUs and holds {per_node[n]}"
        for p in POOLS:
            for g in GROUPS:
                entry = self.quota[p][g]
                used = self.used(p, g)
                if "limit" in entry:
                    assert used <= entry["limit"], f"{g} holds {used} in {p}, limit {entry}"
                within = sum(
                    r.gpus
                    for r in self.running.values()
                    if r.pool == p and r.charged == f"group:{g}" and not r.over_quota
                )
                assert within <= entry["guaranteed"], f"{g}: {within} within quota in {p}, {entry}"
        held = self.held_nodes()
        for r in self.admitted_now:
            if r.over_quota and r.aid in self.running:
                assert (r.pool, r.node) not in held, (
                    f"{r.aid} admitted over quota on {r.node} of {r.pool} while a request within "
                    f"quota waits for it: {[a for a in self.waiting.values() if r.pool in a.pools]}"
                )
        for a in self.waiting.values():
            assert self.fits(a) is None, f"{a} waits but fits in {self.fits(a)} now"
        assert set(self.line.waiting) == set(self.waiting)
        shown = {row["id"]: row["position"] for row in self.line.rows()}
        assert shown == self.positions(), (shown, self.positions())
        self.admitted_now = []


def test_a_borrower_never_takes_gpus_a_request_within_quota_waits_for():
    """The starvation case spelled out: u0's group is guaranteed 3 GPUs of p and he waits
    for them; a smaller request over quota that waits behind him (or an immediate one) takes
    no GPU of the big node, the only one that could hold his 3, but may take the small node's,
    which he could never use."""
    quota = {
        "p": {"g1": {"guaranteed": 3}, "g2": {"guaranteed": 0}},
        "q": {"g1": {"guaranteed": 0}, "g2": {"guaranteed": 0}},
    }
    world = World(
        quota, [("big", "p", 4), ("small", "p", 2)], dict(zip(USERS, GROUPS * 2, strict=True))
    )
    try:
        world.ask("u3", ("p",), 1, queue=False)  # g2 borrows a GPU: of small (binpack)
        world.ask("u1", ("p",), 2, queue=False)  # and 2 of big: 2 are left there
        world.check()
        world.ask("u0", ("p",), 3, queue=True)  # g1, within its guarantee: waits for big
        world.check()
        assert [a.user for a in world.waiting.values()] == ["u0"]
        world.ask("u1", ("p",), 1, queue=True)  # over quota: small's last GPU, not big's
        world.ask("u3", ("p",), 1, queue=False)  # over quota: big's 2 are u0's, refused
        world.check()
        assert [(r.user, r.node) for r in world.running.values()] == [
            ("u3", "small"),
            ("u1", "big"),
            ("u1", "small"),
        ]
        assert [a.user for a in world.waiting.values()] == ["u0"]
        world.stop(1)  # u1's 2 of big end: u0 gets big
        world.check()
        assert not world.waiting
        assert ("u0", "big") in [(r.user, r.node) for r in world.running.values()]
    finally:
        world.close()


class FairQueue(RuleBasedStateMachine):
    world: World

    @initialize(
        quota=quotas(),
        nodes=st.lists(
            st.tuples(st.sampled_from(POOLS), st.sampled_from([2, 4])), min_size=1, max_size=4
        ),
        groups=st.lists(st.sampled_from(GROUPS), min_size=len(USERS), max_size=len(USERS)),
    )
    def setup(self, quota, nodes, groups):
        self.world = World(
            quota,
            [(f"n{i}", p, g) for i, (p, g) in enumerate(nodes)],
            dict(zip(USERS, groups, strict=True)),
        )

    def teardown(self):
        if hasattr(self, "world"):
            self.world.close()

    @rule(
        user=st.sampled_from(USERS),
        pools=st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True),
        gpus=st.sampled_from([1, 1, 2, 2, 3, 4]),
        queue=st.booleans(),
    )
    def ask(self, user, pools, gpus, queue):
        self.world.ask(user, tuple(pools), gpus, queue)

    @rule(i=st.integers(0, 10))
    def stop(self, i):
        self.world.stop(i)

    @rule(i=st.integers(0, 10))
    def cancel(self, i):
        self.world.cancel(i)

    @precondition(lambda self: hasattr(self, "world") and bool(self.world.waiting))
    @rule()
    def restart(self):
        self.world.restart()

    @invariant()
    def fair(self):
        if hasattr(self, "world"):
            self.world.check()


FairQueue.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_queue_is_fair_and_never_over_admits = FairQueue.TestCase
