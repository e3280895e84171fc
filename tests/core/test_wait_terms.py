"""What quota lets a waiting request into, as the wait estimate reads it (issue 38): the terms
(``core/admission/wait_terms.py``) against the real admission's answer, request after request,
on the admission tests' quotas (tests/core/data/quotas.yaml, training-pool: ml-research
guaranteed 12, limit 16; students guaranteed 0, limit 4; alice guaranteed 2; borrowing on)."""

from __future__ import annotations

from test_admission import demo

from jupyter_gpupool.core.admission.wait_terms import counters, terms
from jupyter_gpupool.core.admission.walk import AdmissionRequest

POOL = "training-pool"


def walk(pool: str, gpus: int, asked: list[tuple[str, tuple[str, ...]]]) -> list[tuple]:
    """Each request in turn: its terms' answer (the counters of the servers and reservations
    held so far) checked against the real admission's, which is then carried out."""
    world = demo()
    seen = []
    for n, (user, groups) in enumerate(asked):
        req = AdmissionRequest(user, groups, (pool,), gpus, admission_id=f"a{n}", reclaim=False)
        used: dict[str, float] = {}
        for held in [*world.index.servers(pool), *world.reservations]:
            names, amount = counters(held)
            for c in names:
                used[c] = used.get(c, 0.0) + amount
        got = terms(req, pool, None, world.state).charge(used)
        decision = world.admit(user, groups, (pool,), gpus, reclaim=False)
        if decision.admitted:
            assert got is not None, user
            world.run(f"{user}-nb", decision)
            assert (got[0][0], got[1]) == (f"{pool} {decision.charged}", not decision.over_quota)
            seen.append((user, got[0][0], got[1]))
        else:
            assert got is None, (user, decision.skipped)
            seen.append((user, None, None))
    return seen


def test_the_terms_say_within_over_or_waiting_as_admission_decides():
    seen = walk(
        POOL,
        2,
        [
            ("carl", ("ml-research",)),  # within ml-research's guarantee
            ("alice", ()),  # within her own guarantee (2 GPUs), in no group
            ("sam", ("students",)),  # students borrow (no guarantee), under their limit of 4
            ("sue", ("students",)),  # the same: students now use 4
            ("sid", ("students",)),  # over the students' limit: waits for their servers
            ("dave", ()),  # no group, no guarantee: borrows as himself
        ],
    )
    assert seen == [
        ("carl", f"{POOL} group:ml-research", True),
        ("alice", f"{POOL} user:alice", True),
        ("sam", f"{POOL} group:students", False),
        ("sue", f"{POOL} group:students", False),
        ("sid", None, None),
        ("dave", f"{POOL} user:dave", False),
    ]


def test_where_the_pool_allows_no_borrowing_past_the_guarantee_is_waiting():
    # inference-pool: ml-research guaranteed 6, no borrowing; 4 GPUs each, two nodes of 4
    seen = walk(
        "inference-pool",
        4,
        [("carl", ("ml-research",)), ("cleo", ("ml-research",)), ("dave", ())],
    )
    assert seen == [
        ("carl", "inference-pool group:ml-research", True),
        ("cleo", None, None),  # 4 + 4 > 6, and no borrowing: a node is free, quota is not
        ("dave", None, None),  # no guarantee, no borrowing
    ]


def test_a_pool_without_quota_lets_everyone_in_within():
    world = demo()
    req = AdmissionRequest("dave", (), ("default",), 1, admission_id="a1")
    t = terms(req, "default", None, world.state)
    assert not t.managed and t.charge({}) == ((), True, 0.0)


def test_a_users_limit_in_the_pool_caps_them_whatever_their_group():
    # dev-pool: students guaranteed 2, limit 4; every user's limit there 2 (user-default)
    seen = walk("dev-pool", 2, [("sam", ("students",)), ("sam", ("students",))])
    assert seen == [("sam", "dev-pool group:students", True), ("sam", None, None)]
