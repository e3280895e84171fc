"""Property: no sequence of admissions, pods appearing and releases over-admits.

Random clusters, quotas and users; random steps: admit (and reserve, as the service does), the pod
of an admission appears pending or bound on its node, a server stops, reservations expire.

The checks do not read the usage index or the reservations: the test keeps its OWN LEDGER of the
admissions it made and has not ended yet (reserved and waiting for a pod, pending, or bound), and
its own copy of the capacities and limits it wrote into the cluster and the quota documents.
After every step, from that ledger alone:

- no node holds more GPUs than the test gave it (admissions whose pod is pending count on their
  node: the node was promised to them);
- no hard limit is passed: a group's ``limit`` in a pool, a user's ``limit`` in a pool (on all
  their GPUs there), gpuctl's cluster-wide caps per group (``namespace``) and per user
  (``users``, else ``default`` for users outside every ``namespace`` group);
- GPUs charged within quota never exceed the charged subject's guarantee; nothing is over quota
  where the pool has no quota or allows no borrowing;
- every admission went to a pool the user asked for, to a node of that pool, within its
  ``max-gpus``, charged to the user or to a group the user is in and that the quotas name.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from k8s_factories import node, pod

from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, decide
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations

POOLS = ("p", "q")
GROUPS = ("g1", "g2", "g3")
USERS = ("u0", "u1", "u2", "u3")


@st.composite
def entries(draw):
    guaranteed = draw(st.integers(0, 4))
    limit = draw(st.none() | st.integers(guaranteed, 6))
    out = {"guaranteed": guaranteed}
    if limit is not None:
        out["limit"] = limit
    return out


@st.composite
def documents(draw) -> list[dict[str, Any]]:
    """Small quotas, so that guarantees and limits are reached within a few admissions."""
    docs: list[dict[str, Any]] = []
    for name in POOLS:
        doc: dict[str, Any] = {"kind": "pool", "version": "v0.1", "pool": {"name": name}}
        if draw(st.integers(0, 4)):  # mostly with quota
            quota = {
                "borrowing": draw(st.booleans()),
                "groups": {
                    g: draw(entries())
                    for g in draw(st.lists(st.sampled_from(GROUPS), unique=True, min_size=1))
                },
                "users": {
                    u: draw(entries()) for u in draw(st.lists(st.sampled_from(USERS), unique=True))
                },
            }
            if draw(st.booleans()):
                quota["user-default"] = draw(entries())
            doc["quota"] = quota
        if draw(st.integers(0, 3)) == 0:
            doc["limits"] = {"max-gpus": draw(st.integers(1, 8))}
        docs.append(doc)
    caps: dict[str, Any] = {
        "kind": "quota",
        "quota": {"name": "caps"},
        "namespace": {
            g: {"gpu": draw(st.integers(0, 10))}
            for g in draw(st.lists(st.sampled_from(GROUPS), unique=True, max_size=2))
        },
    }
    if draw(st.integers(0, 3)) == 0:
        caps["users"] = {
            u: {"gpu": draw(st.integers(0, 6))}
            for u in draw(st.lists(st.sampled_from(USERS), unique=True, min_size=1, max_size=2))
        }
    if draw(st.integers(0, 3)) == 0:
        caps["default"] = {"gpu": draw(st.integers(0, 10))}
    docs.append(caps)
    return docs


class Limits:
    """The limits the test wrote, read back from its own documents (not from the registry)."""

    def __init__(self, docs: list[dict[str, Any]], memberships: dict[str, list[str]]):
        pools = [d for d in docs if d["kind"] == "pool"]
        [caps] = [d for d in docs if d["kind"] == "quota"]
        self.quota: dict[str, dict[str, Any] | None] = {
            d["pool"]["name"]: d.get("quota") for d in pools
        }
        self.max_gpus: dict[str, int | None] = {
            d["pool"]["name"]: d.get("limits", {}).get("max-gpus") for d in pools
        }
        self.group_cap = {g: c["gpu"] for g, c in caps.get("namespace", {}).items()}
        # gpuctl: a user's own entry; else `default`, only for users outside every team
        self.user_cap: dict[str, int] = {}
        for u in USERS:
            if u in caps.get("users", {}):
                self.user_cap[u] = caps["users"][u]["gpu"]
            elif "default" in caps and not set(memberships[u]) & set(self.group_cap):
                self.user_cap[u] = caps["default"]["gpu"]

    def user_entry(self, pool: str, user: str) -> dict[str, Any] | None:
        quota = self.quota[pool]
        if quota is None:
            return None
        return quota["users"].get(user, quota.get("user-default"))


@dataclass(frozen=True)
class Admitted:
    """One admission as the ledger records it: where its GPUs went and who pays for them."""

    aid: str
    pool: str
    node: str
    gpus: int
    user: str
    charged: str
    over_quota: bool


class Model:
    def __init__(self, docs, nodes, memberships):
        self.registry = load_string("\n---\n".join(json.dumps(d) for d in docs))
        self.limits = Limits(docs, memberships)
        self.memberships = memberships
        self.reservations = Reservations()
        self.index = UsageIndex(on_admission=self.reservations.observe)
        self.capacity: dict[str, int] = {}
        self.node_pool: dict[str, str] = {}
        for name, pool_name, gpus in nodes:
            self.capacity[name] = gpus
            self.node_pool[name] = pool_name
            self.index.apply_node("ADDED", node(name, pool_name, gpus))
        self.now = 0.0
        # The ledger: admission id -> what was admitted, for every admission not ended yet.
        self.live: dict[str, Admitted] = {}
        self.waiting: dict[str, float] = {}  # reserved, no pod yet: id -> reservation expiry
        self.pending: dict[str, float] = {}  # pod pending: id -> reservation expiry
        self.running: set[str] = set()  # pod bound to its node
        self.seq = 0

    # --- steps -----------------------------------------------------------------------------------

    def admit(self, user, pools, gpus):
        self.seq += 1
        aid = f"a{self.seq}"
        groups = tuple(self.memberships[user])
        req = AdmissionRequest(user, groups, tuple(pools), gpus, admission_id=aid)
        d = decide(req, AdmissionState(self.registry, self.index, self.reservations))
        if not d.admitted:
            return
        assert d.pool is not None and d.node is not None and d.charged is not None
        a = Admitted(aid, d.pool, d.node, gpus, user, d.charged, d.over_quota)
        self.check_admission(a, pools)
        expires = self.now + 5
        self.reservations.add(d.reservation(expires_at=expires))
        self.live[aid] = a
        self.waiting[aid] = expires
        # the ledger with this admission in it: everything still holds
        self.check()
        if gpus and not a.over_quota and self.limits.quota[a.pool] is not None:
            # within quota: the subject's guarantee covered ALL it is charged in the pool,
            # borrowed GPUs included, this request too
            charged = sum(x.gpus for x in self.in_pool(a.pool) if x.charged == a.charged)
            assert charged <= self.guarantee(a.pool, a.charged), (
                f"{aid} within quota of {a.charged} in {a.pool}, "
                f"which is charged {charged} > guaranteed {self.guarantee(a.pool, a.charged)}"
            )

    def pod_of(self, aid, bound):
        a = self.live[aid]
        return pod(
            aid,
            a.gpus,
            a.node if bound else None,
            user=a.user,
            pool=a.pool,
            charged=a.charged,
            over_quota=a.over_quota,
            admission=aid,
            created=f"2025-01-01T00:00:{self.seq:02d}Z",
        )

    def appear(self, i, bound):
        source = self.waiting if not bound else (self.pending or self.waiting)
        if not source:
            return
        aid = sorted(source)[i % len(source)]
        expires = source.pop(aid)
        self.index.apply_pod("ADDED", self.pod_of(aid, bound))
        if bound:
            self.running.add(aid)
        else:
            self.pending[aid] = expires

    def stop(self, i):
        if not self.running:
            return
        aid = sorted(self.running)[i % len(self.running)]
        self.running.remove(aid)
        self.index.apply_pod("DELETED", self.pod_of(aid, True))
        del self.live[aid]

    def tick(self):
        """Time passes: spawns whose pod is not bound by their expiry give up, as the spawner
        does (the pending pod is deleted). Decided by the test's own clock, not by what
        :meth:`Reservations.expire` returns."""
        self.now += 3
        self.reservations.expire(self.now)
        for aid, expires in sorted(self.pending.items()):
            if expires <= self.now:
                self.index.apply_pod("DELETED", self.pod_of(aid, False))
                del self.pending[aid]
                del self.live[aid]
        for aid, expires in sorted(self.waiting.items()):
            if expires <= self.now:
                del self.waiting[aid]
                del self.live[aid]

    # --- the ledger ------------------------------------------------------------------------------

    def in_pool(self, pool):
        return [a for a in self.live.values() if a.pool == pool]

    def guarantee(self, pool, subject):
        quota = self.limits.quota[pool]
        assert quota is not None
        kind, name = subject.split(":", 1)
        groups = quota["groups"]
        entry = groups.get(name) if kind == "group" else self.limits.user_entry(pool, name)
        return entry["guaranteed"] if entry is not None else 0

    def check_admission(self, a, asked):
        """What one admission may be, from the request and the test's documents."""
        assert a.pool in asked, f"{a.aid} admitted to {a.pool}, asked for {asked}"
        assert self.node_pool.get(a.node) == a.pool, (
            f"{a.aid} admitted to {a.pool} on node {a.node} of pool {self.node_pool.get(a.node)}"
        )
        max_gpus = self.limits.max_gpus[a.pool]
        assert max_gpus is None or a.gpus <= max_gpus, f"{a.aid}: {a.gpus} > max-gpus {max_gpus}"
        quota = self.limits.quota[a.pool]
        chargeable = {f"user:{a.user}"} | {
            f"group:{g}"
            for g in self.memberships[a.user]
            if g in self.limits.group_cap or (quota is not None and g in quota["groups"])
        }
        assert a.charged in chargeable, f"{a.aid} charged to {a.charged}, not one of {chargeable}"
        if a.over_quota:
            assert quota is not None and quota["borrowing"], (
                f"{a.aid} over quota in {a.pool}, whose quota is {quota}"
            )

    def check(self):
        live = list(self.live.values())
        per_node = Counter()
        for a in live:
            per_node[a.node] += a.gpus
        for name, gpus in self.capacity.items():
            assert per_node[name] <= gpus, (
                f"node {name} has {gpus} GPUs and holds {per_node[name]}: "
                + ", ".join(f"{a.aid}={a.gpus}" for a in live if a.node == name)
            )
        for pool_name in POOLS:
            quota = self.limits.quota[pool_name]
            if quota is None:
                continue
            here = self.in_pool(pool_name)
            charged = Counter()
            within = Counter()
            by_user = Counter()
            for a in here:
                charged[a.charged] += a.gpus
                by_user[a.user] += a.gpus
                if not a.over_quota:
                    within[a.charged] += a.gpus
            for g, e in quota["groups"].items():
                s = f"group:{g}"
                if "limit" in e:
                    assert charged[s] <= e["limit"], (
                        f"{s} is charged {charged[s]} in {pool_name}, limit {e['limit']}"
                    )
            for s, n in within.items():
                g = self.guarantee(pool_name, s) if n else 0
                assert n <= g, f"{s} has {n} GPUs within quota in {pool_name}, guaranteed {g}"
            for u in USERS:
                e = self.limits.user_entry(pool_name, u)
                if e is not None and "limit" in e:
                    assert by_user[u] <= e["limit"], (
                        f"user {u} holds {by_user[u]} in {pool_name}, limit {e['limit']}"
                    )
        charged_total = Counter()
        user_total = Counter()
        for a in live:
            charged_total[a.charged] += a.gpus
            user_total[a.user] += a.gpus
        for g, cap in self.limits.group_cap.items():
            s = f"group:{g}"
            assert charged_total[s] <= cap, f"{s} is charged {charged_total[s]}, cap {cap}"
        for u, cap in self.limits.user_cap.items():
            assert user_total[u] <= cap, f"user {u} holds {user_total[u]}, cap {cap}"


class OverAdmission(RuleBasedStateMachine):
    """Hypothesis drives random steps; the ledger is checked after every one."""

    model: Model

    @initialize(
        docs=documents(),
        nodes=st.lists(
            st.tuples(st.sampled_from(POOLS), st.sampled_from([0, 2, 4, 8, 8])),
            min_size=2,
            max_size=6,
        ),
        memberships=st.lists(
            st.lists(st.sampled_from(GROUPS), unique=True, min_size=1, max_size=2),
            min_size=len(USERS),
            max_size=len(USERS),
        ),
    )
    def setup(self, docs, nodes, memberships):
        self.model = Model(
            docs,
            [(f"n{i}", p, g) for i, (p, g) in enumerate(nodes)],
            dict(zip(USERS, memberships, strict=True)),
        )

    @rule(
        user=st.sampled_from(USERS),
        pools=st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True),
        gpus=st.sampled_from([0, 1, 1, 2, 2, 3, 4, 8]),
    )
    def admit(self, user, pools, gpus):
        self.model.admit(user, pools, gpus)

    @rule(i=st.integers(0, 10), bound=st.booleans())
    def appear(self, i, bound):
        self.model.appear(i, bound)

    @rule(i=st.integers(0, 10))
    def stop(self, i):
        self.model.stop(i)

    @rule()
    def tick(self):
        self.model.tick()

    @invariant()
    def nothing_over(self):
        if hasattr(self, "model"):
            self.model.check()


OverAdmission.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_no_sequence_over_admits = OverAdmission.TestCase
