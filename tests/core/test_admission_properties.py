"""Property: no sequence of admissions, pods appearing and releases over-admits.

Random clusters, quotas and users; random steps: admit (and reserve, as the service does), the pod
of an admission appears pending or bound on its node, a server stops, reservations expire. After
every step no node holds more than its GPUs, no subject or user is above any limit, and every
admission fitted on one node when it was made.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from k8s_factories import node, pod

from jupyter_gpupool.admission import AdmissionRequest, AdmissionState, decide
from jupyter_gpupool.poolfile import load_string
from jupyter_gpupool.reservations import Reservations
from jupyter_gpupool.usage import UsageIndex

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
def registries(draw):
    """Small quotas, so that guarantees and limits are reached within a few admissions."""
    docs = []
    for name in POOLS:
        doc = {"kind": "pool", "version": "v0.1", "pool": {"name": name}}
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
    caps = {
        "kind": "quota",
        "quota": {"name": "caps"},
        "namespace": {
            g: {"gpu": draw(st.integers(0, 10))}
            for g in draw(st.lists(st.sampled_from(GROUPS), unique=True, max_size=2))
        },
    }
    if draw(st.integers(0, 3)) == 0:
        caps["default"] = {"gpu": draw(st.integers(0, 10))}
    docs.append(caps)
    return load_string("\n---\n".join(json.dumps(d) for d in docs))


class Model:
    def __init__(self, registry, nodes):
        self.registry = registry
        self.reservations = Reservations()
        self.index = UsageIndex(on_admission=self.reservations.observe)
        self.capacity = {}
        for name, pool_name, gpus in nodes:
            self.capacity[name] = gpus
            self.index.apply_node("ADDED", node(name, pool_name, gpus))
        self.now = 0.0
        self.waiting = {}  # admission id -> decision, pod not yet seen
        self.pending = {}  # admission id -> decision, pod pending
        self.running = {}  # admission id -> decision, pod bound
        self.seq = 0

    def admit(self, user, groups, pools, gpus):
        self.seq += 1
        aid = f"a{self.seq}"
        req = AdmissionRequest(user, tuple(groups), tuple(pools), gpus, admission_id=aid)
        d = decide(req, AdmissionState(self.registry, self.index, self.reservations))
        if not d.admitted:
            return
        # it fitted on ONE node when it was decided, reservations counted
        held = self.reservations.pool_nodes(d.pool).get(d.node, 0)
        assert self.index.node_free(d.node) - held >= gpus
        assert d.pool in pools
        self.reservations.add(d.reservation(expires_at=self.now + 5))
        self.waiting[aid] = d
        # "within quota" means within the charged subject's guarantee
        quota = self.registry.quota(d.pool)
        if quota is not None and gpus and not d.over_quota:
            kind, name = d.charged.split(":", 1)
            entry = quota.groups.get(name) if kind == "group" else quota.user_entry(name)
            used = self.index.subject_used(d.pool, d.charged)
            assert used + self.reservations.subject_reserved(d.pool, d.charged) <= entry.guaranteed

    def pod_of(self, d, bound):
        req = d.request
        return pod(
            req.admission_id,
            req.gpus,
            d.node if bound else None,
            user=req.user,
            pool=d.pool,
            charged=d.charged,
            over_quota=d.over_quota,
            admission=req.admission_id,
            created=f"2025-01-01T00:00:{self.seq:02d}Z",
        )

    def appear(self, i, bound):
        source = self.waiting if not bound else (self.pending or self.waiting)
        if not source:
            return
        aid = sorted(source)[i % len(source)]
        d = source.pop(aid)
        self.index.apply_pod("ADDED", self.pod_of(d, bound))
        (self.running if bound else self.pending)[aid] = d

    def stop(self, i):
        if not self.running:
            return
        aid = sorted(self.running)[i % len(self.running)]
        d = self.running.pop(aid)
        self.index.apply_pod("DELETED", self.pod_of(d, True))

    def tick(self):
        self.now += 3
        for r in self.reservations.expire(self.now):
            # the spawn gave up: its pod never comes (or is deleted while pending)
            if r.admission_id in self.pending:
                d = self.pending.pop(r.admission_id)
                self.index.apply_pod("DELETED", self.pod_of(d, False))
            self.waiting.pop(r.admission_id, None)

    def check(self):
        reg, idx, res = self.registry, self.index, self.reservations
        for name, gpus in self.capacity.items():
            pool_name = idx.node(name).pool
            assert gpus - idx.node_free(name) + res.pool_nodes(pool_name).get(name, 0) <= gpus
        for pool_name in POOLS:
            quota = reg.quota(pool_name)
            if quota is None:
                continue
            for g, e in quota.groups.items():
                if e.limit is not None:
                    s = f"group:{g}"
                    assert (
                        idx.subject_used(pool_name, s) + res.subject_reserved(pool_name, s)
                        <= e.limit
                    )
            for u in USERS:
                e = quota.user_entry(u)
                if e is not None and e.limit is not None:
                    assert idx.user_used(pool_name, u) + res.user_reserved(pool_name, u) <= e.limit
        for g in GROUPS:
            cap = reg.group_cap(g)
            if cap is not None:
                s = f"group:{g}"
                assert idx.subject_used_total(s) + res.subject_reserved_total(s) <= cap


class OverAdmission(RuleBasedStateMachine):
    """Hypothesis drives random steps; ``check`` runs after every one."""

    model: Model

    @initialize(
        registry=registries(),
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
    def setup(self, registry, nodes, memberships):
        self.model = Model(registry, [(f"n{i}", p, g) for i, (p, g) in enumerate(nodes)])
        self.memberships = dict(zip(USERS, memberships, strict=True))

    @rule(
        user=st.sampled_from(USERS),
        pools=st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True),
        gpus=st.sampled_from([0, 1, 1, 2, 2, 3, 4, 8]),
    )
    def admit(self, user, pools, gpus):
        self.model.admit(user, self.memberships[user], pools, gpus)

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
        if not hasattr(self, "model"):
            return
        self.model.check()
        for u in USERS:  # the cluster-wide user cap, for the users it applies to
            cap = self.model.registry.user_cap(u, self.memberships[u])
            if cap is not None:
                idx, res = self.model.index, self.model.reservations
                assert idx.user_used_total(u) + res.user_reserved_total(u) <= cap


OverAdmission.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_no_sequence_over_admits = OverAdmission.TestCase
