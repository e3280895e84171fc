"""What a request waiting within quota holds back from borrowers: only what it could use (the
shape it asks for, of its GPU type, on the nodes that could take it), never its whole pool.

The world: training-pool, where group lab is guaranteed 4 GPU-equivalents (ops 8) and others
may borrow, with a mixed-strategy MIG A100 (four 1g.10gb instances and one whole GPU), an 8-GPU
A100 node and a 2-GPU T4 node. What each request gets is the core's own decision; what is held
comes from the line's standings of the waiting requests (:func:`holds_of`), as a pass builds it.
The truth the tests read is the nodes the test built and the pods it ran.
"""

from __future__ import annotations

from dataclasses import replace

from k8s_factories import node, pod
from test_admission_shapes import World
from test_usage_shapes import mig_node

from jupyter_gpupool.core.admission.holds import Hold, Holds
from jupyter_gpupool.core.admission.queue import Pass, Waiting, holds_of, order
from jupyter_gpupool.core.admission.walk import (
    PROMISED,
    AdmissionRequest,
    AdmissionState,
    Decision,
    decide,
)

POOLS = """
kind: pool
version: v0.1
pool: {name: training-pool}
quota:
  borrowing: true
  groups:
    lab: {guaranteed: 4}
    ops: {guaranteed: 8}
"""


def training() -> World:
    w = World(
        POOLS,
        mig_node("mig", "training-pool", {"1g.10gb": 4}, whole=1),
        node("big", "training-pool", 8),
        node("t4", "training-pool", 2, gpu_type="T4"),
    )
    # the big A100 node is full: 8 GPUs borrowed by someone outside lab
    w.index.apply_pod(
        "ADDED",
        pod(
            "busy", 8, "big", user="zed", pool="training-pool", charged="user:zed", over_quota=True
        ),
    )
    return w


def waiting(w: World, user: str, gpus: int, shape: str | None = None, gpu_type=None) -> Waiting:
    req = AdmissionRequest(
        user,
        ("lab",),
        ("training-pool",),
        gpus,
        gpu_type=gpu_type,
        admission_id=f"wait-{user}",
        shapes=(shape,),
    )
    return Waiting(req, seq=len(user), since=0.0)


def state(w: World, *line: Waiting) -> AdmissionState:
    """The state a pass decides with: what ``line``'s requests within quota hold."""
    base = AdmissionState(w.registry, w.index, w.reservations)
    return replace(base, promised=Pass(base, lambda p: 0, order(line, base)).promised)


def borrow(w: World, st: AdmissionState, gpus=1, shape=None, gpu_type=None) -> Decision:
    w.count += 1
    req = AdmissionRequest(
        f"bob{w.count}",
        (),
        ("training-pool",),
        gpus,
        gpu_type=gpu_type,
        admission_id=f"b-{w.count}",
        shapes=(shape,),
    )
    return decide(req, st)


def test_a_request_waiting_for_whole_gpus_leaves_the_mig_instances_to_borrowers():
    w = training()
    alice = waiting(w, "alice", 4)  # within lab's 4: waits for the big node
    st = state(w, alice)
    assert holds_of(order([alice], st), st) == Holds.of([Hold("training-pool", None, None, 4)])
    d = borrow(w, st, shape="mig-1g.10gb")
    assert d.admitted and d.over_quota and d.node == "mig", d.message
    # the whole GPU beside the instances: a node of 1, too small for alice's 4
    d = borrow(w, st)
    assert d.admitted and d.node in ("mig", "t4"), d.message


def test_a_borrower_is_refused_only_what_the_waiting_request_could_use():
    w = training()
    w.index.apply_pod("DELETED", pod("busy", 8, "big"))  # the big node is free again
    for i, n in enumerate(("mig", "t4", "t4")):  # the small nodes' GPUs are taken
        w.index.apply_pod("ADDED", pod(f"small-{i}", 1, n, user="zed", pool="training-pool"))
    alice = waiting(w, "alice", 4)
    st = state(w, alice)
    d = borrow(w, st)
    assert not d.admitted and d.skipped[0].reason == PROMISED, d.message
    # with nobody waiting, the same borrower gets the big node
    d = borrow(w, AdmissionState(w.registry, w.index, w.reservations))
    assert d.admitted and d.node == "big", d.message
    # a request within lab's quota is never held back by what others wait for
    d = decide(replace(alice.request, admission_id="lab-now", gpus=2, user="carol"), st)
    assert d.admitted and not d.over_quota and d.node == "big", d.message


def test_a_request_waiting_for_a_gpu_type_holds_no_node_of_another():
    w = training()
    alice = waiting(w, "alice", 2, gpu_type="A100-80G")
    st = state(w, alice)
    d = borrow(w, st, gpus=2)
    assert d.admitted and d.node == "t4", d.message


def test_a_request_waiting_for_a_mig_instance_holds_the_instances_not_the_gpus():
    w = training()
    w.index.apply_pod("DELETED", pod("busy", 8, "big"))
    alice = waiting(w, "alice", 1, shape="mig-1g.10gb")
    st = state(w, alice)
    d = borrow(w, st, shape="mig-1g.10gb")
    assert not d.admitted and d.skipped[0].reason == PROMISED, d.message
    d = borrow(w, st, gpus=1)
    assert d.admitted and d.over_quota, d.message
    # another lab member, within quota, takes an instance: the line's order decides between
    # the two, not the hold
    d = decide(replace(alice.request, admission_id="lab-now", user="carol"), st)
    assert d.admitted and not d.over_quota and d.node == "mig", d.message


def test_a_waiting_request_over_quota_holds_nothing():
    w = training()
    w.index.apply_pod("DELETED", pod("busy", 8, "big"))
    # lab already uses its 4 GPUs: a further lab request would borrow
    w.index.apply_pod(
        "ADDED", pod("lab-4", 4, "big", user="dan", pool="training-pool", charged="group:lab")
    )
    alice = waiting(w, "alice", 4)
    st = state(w, alice)
    assert not st.promised
