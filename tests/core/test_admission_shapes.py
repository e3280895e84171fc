"""Admission by shape: a MIG instance, a time-sliced replica or whole GPUs, per entry of the
pool list, each on one node of one resource, charged its GPU-equivalents.

The nodes are the ones ``test_usage_shapes.py`` builds (GFD's labels, the device plugin's
allocatable). The pods that "run" are built from the decision's overrides, as the spawner builds
them, so what the index counts afterwards is what a real pod would make it count.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import yaml
from k8s_factories import node
from test_usage_shapes import mig_node, shared_node

from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, Decision, decide
from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.pools.writing import pool_to_document
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservations
from jupyter_gpupool.core.words.shape_rows import pool_shapes

POOLS = """
kind: pool
version: v0.1
pool: {name: mig-pool}
---
kind: pool
version: v0.1
pool: {name: shared-pool}
---
kind: pool
version: v0.1
pool: {name: whole-pool}
"""


class World:
    def __init__(self, text: str, *nodes: dict):
        self.registry = load_string(text)
        self.reservations = Reservations()
        self.index = UsageIndex(on_admission=self.reservations.observe)
        for n in nodes:
            self.index.apply_node("ADDED", n)
        self.count = 0

    def decide(self, entries, gpus=1, user="alice", groups=()) -> Decision:
        self.count += 1
        pools = tuple(e if isinstance(e, str) else e[0] for e in entries)
        shapes = tuple(None if isinstance(e, str) else e[1] for e in entries)
        req = AdmissionRequest(
            user, tuple(groups), pools, gpus, admission_id=f"adm-{self.count}", shapes=shapes
        )
        return decide(req, AdmissionState(self.registry, self.index, self.reservations))

    def admit(self, entries, **kw) -> Decision:
        d = self.decide(entries, **kw)
        if d.admitted:
            self.reservations.add(d.reservation(expires_at=100.0))
        return d

    def run(self, d: Decision) -> dict:
        """The pod the spawner would make of the decision's overrides appears on its node."""
        o = d.overrides
        pod = {
            "metadata": {
                "name": f"jupyter-{d.request.admission_id}",
                "namespace": "jhub",
                "uid": d.request.admission_id,
                "labels": dict(o["labels"]),
                "annotations": dict(o["annotations"]),
                "creationTimestamp": "2025-01-01T00:00:00Z",
            },
            "spec": {
                "nodeName": d.node,
                "containers": [{"name": "notebook", "resources": dict(o["resources"])}],
            },
            "status": {"phase": "Running"},
        }
        self.index.apply_pod("ADDED", pod)
        return pod

    def borrowed(self, shape: str, n: int) -> list[dict]:
        """``n`` instances of ``shape`` borrowed (over quota) and running, by bob0, bob1...,
        each a minute younger than the one before."""
        pods = []
        for i in range(n):
            d = self.admit([("mig-pool", shape)], user=f"bob{i}")
            assert d.admitted and d.over_quota, d.message
            pod = self.run(d)
            pod["metadata"]["creationTimestamp"] = f"2025-01-01T00:0{i}:00Z"
            self.index.apply_pod("MODIFIED", pod)
            pods.append(pod)
        return pods


def world(text: str = POOLS) -> World:
    return World(
        text,
        mig_node("m1", "mig-pool", {"3g.40gb": 1, "1g.10gb": 4}, whole=1),
        shared_node("s1", "shared-pool", gpus=2, replicas=4),
        shared_node("r1", "shared-pool", gpus=1, replicas=2, renamed=True),
        node("w1", "whole-pool", 2),
    )


def limits(d: Decision) -> dict[str, str]:
    return dict(d.overrides["resources"]["limits"])


def test_a_mig_instance_is_admitted_on_its_resource_and_named_on_the_pod():
    w = world()
    d = w.admit([("mig-pool", "mig-3g.40gb")])
    assert d.admitted and d.node == "m1", d.message
    assert limits(d) == {"nvidia.com/mig-3g.40gb": "1"}
    assert d.overrides["labels"][L.POD_SHAPE] == "mig-3g.40gb"
    assert d.overrides["annotations"][L.POD_EQUIVALENTS] == "3/7"
    assert (d.resource, d.equivalents) == ("nvidia.com/mig-3g.40gb", Fraction(3, 7))
    # the one 3g is held by the reservation: the next is refused, whole GPUs still admit
    again = w.decide([("mig-pool", "mig-3g.40gb")])
    assert not again.admitted
    assert again.reasons == ["mig-pool: no node has a mig-3g.40gb free (largest free: 0)"]
    whole = w.decide(["mig-pool"])
    assert whole.admitted and limits(whole) == {"nvidia.com/gpu": "1"}
    assert L.POD_SHAPE not in whole.overrides["labels"]
    # the pod runs: the index counts the device, and the reservation is gone
    w.run(d)
    assert len(w.reservations) == 0
    assert not w.decide([("mig-pool", "mig-3g.40gb")]).admitted


def test_each_1g_instance_is_taken_once():
    w = world()
    nodes = [w.admit([("mig-pool", "mig-1g.10gb")]) for _ in range(5)]
    assert [d.admitted for d in nodes] == [True] * 4 + [False]
    for d in nodes[:2]:
        w.run(d)
    assert not w.decide([("mig-pool", "mig-1g.10gb")]).admitted


def test_whole_gpu_requests_never_take_a_time_sliced_replica():
    w = world()
    d = w.decide(["shared-pool"])
    assert not d.admitted
    shared = w.admit([("shared-pool", "shared-4")])
    assert shared.admitted and shared.node == "s1", shared.message
    assert limits(shared) == {"nvidia.com/gpu": "1"}
    assert shared.equivalents == Fraction(1, 4)
    renamed = w.admit([("shared-pool", "shared-2")])
    assert renamed.admitted and renamed.node == "r1", renamed.message
    assert limits(renamed) == {"nvidia.com/gpu.shared": "1"}
    # 8 replicas on s1: 1 held, 7 more, then none
    more = [w.admit([("shared-pool", "shared-4")]) for _ in range(8)]
    assert [m.admitted for m in more] == [True] * 7 + [False]


def test_a_shaped_server_gets_one_unit():
    w = world()
    d = w.decide([("mig-pool", "mig-1g.10gb")], gpus=2)
    assert not d.admitted
    assert d.reasons == ["mig-pool: a server gets one mig-1g.10gb (you asked for 2)"]


def test_a_pool_without_the_shape_says_what_it_offers():
    w = world()
    d = w.decide([("mig-pool", "mig-7g.80gb"), ("whole-pool", "shared-4")])
    assert d.reasons == [
        "mig-pool: this pool has no mig-7g.80gb (it offers mig-1g.10gb or mig-3g.40gb)",
        "whole-pool: this pool has no shared-4 (it offers whole GPUs only)",
    ]


def test_a_list_mixes_shapes_and_falls_back_in_order():
    w = world()
    first = w.admit([("mig-pool", "mig-3g.40gb"), "whole-pool"])
    assert first.pool == "mig-pool" and first.shape is not None
    second = w.admit([("mig-pool", "mig-3g.40gb"), "whole-pool"])
    assert second.admitted and second.pool == "whole-pool" and second.shape is None
    assert second.reasons == ["mig-pool: no node has a mig-3g.40gb free (largest free: 0)"]


LIMITED = POOLS.replace(
    "pool: {name: mig-pool}",
    "pool: {name: mig-pool}\nquota:\n  borrowing: false\n  user-default: {guaranteed: 1, limit: 1}",
)


def test_quotas_count_gpu_equivalents_reserved_then_running():
    w = world(LIMITED)
    # 3g (3/7) + 4 x 1g (4/7) = exactly 1 GPU: all within a 1-GPU limit
    big = w.admit([("mig-pool", "mig-3g.40gb")])
    smalls = [w.admit([("mig-pool", "mig-1g.10gb")]) for _ in range(4)]
    assert big.admitted and all(s.admitted for s in smalls), [s.message for s in smalls]
    assert all(not s.over_quota for s in [big, *smalls])
    assert w.reservations.user_reserved("mig-pool", "alice") == 1
    # a whole GPU (the node has one free) is over the limit now
    whole = w.decide(["mig-pool"])
    assert not whole.admitted
    assert whole.reasons == ["mig-pool: you use 1 of your limit of 1 GPU in this pool"]
    for d in [big, *smalls]:
        w.run(d)
    # what the index counts now comes from the pods' annotations, not from the reservations
    assert len(w.reservations) == 0
    assert w.index.user_used("mig-pool", "alice") == 1
    assert w.index.subject_used("mig-pool", "user:alice") == 1
    assert not w.decide(["mig-pool"]).admitted
    # bob has his own limit: one 1g instance shows as 1/7 used
    w2 = world(LIMITED)
    d = w2.admit([("mig-pool", "mig-1g.10gb")], user="bob")
    w2.run(d)
    assert w2.index.user_used("mig-pool", "bob") == Fraction(1, 7)
    refused = w2.decide(["mig-pool"], gpus=1, user="bob")
    assert refused.reasons == [
        "mig-pool: you use 0.14 of your limit of 1 GPU in this pool (you asked for 1)"
    ]


MIXED = """
kind: pool
version: v0.1
pool: {name: a10-pool}
"""


def test_a_pool_mixing_shapes_of_nvidia_gpu_pins_the_pod_to_its_shape_by_gfd_labels():
    """Whole A10s and time-sliced A10s both advertise ``nvidia.com/gpu``: without a pin the
    scheduler could put a whole-GPU pod on a replica (or a replica's pod on a whole GPU)."""
    whole = node("w1", "a10-pool", 4, "A10", product="NVIDIA-A10")
    whole["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "1"
    w = World(MIXED, whole, shared_node("s1", "a10-pool", gpus=2, replicas=4))
    d = w.decide(["a10-pool"])
    assert d.node == "w1"
    # whole GPUs: a required affinity for nodes of whole GPUs (overrides.whole_gpu_terms), in
    # every pool, so no pin is needed
    assert "nvidia.com/gpu.product" not in d.overrides["nodeSelector"]
    required = d.overrides["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert {"key": "nvidia.com/gpu.replicas", "operator": "Lt", "values": ["2"]} in [
        e for term in required["nodeSelectorTerms"] for e in term["matchExpressions"]
    ]
    shared = w.decide([("a10-pool", "shared-4")])
    assert shared.node == "s1"
    selector = shared.overrides["nodeSelector"]
    assert selector["nvidia.com/gpu.product"] == "NVIDIA-A10-SHARED"
    assert selector["nvidia.com/gpu.replicas"] == "4"
    # a pool of one shape: no pin for its replicas either
    plain = World(MIXED, shared_node("s2", "a10-pool", gpus=1, replicas=4))
    only = plain.decide([("a10-pool", "shared-4")])
    assert "nvidia.com/gpu.product" not in only.overrides["nodeSelector"]


NAMED = """
kind: pool
version: v0.1
pool: {name: mig-pool}
shapes:
  - {id: mig-1g.10gb, name: A seventh of an A100}
  - {id: mig-3g.40gb, name: Half an A100, max-per-user: 1}
"""


def test_a_pool_file_names_its_shapes_their_order_names_and_limits():
    w = World(NAMED, mig_node("m1", "mig-pool", {"3g.40gb": 2, "1g.10gb": 1}, whole=1))
    pool = w.registry.pool("mig-pool")
    rows = pool_shapes(w.index, w.reservations, "mig-pool", pool.shapes)
    # only the shapes it names (its whole A100 is not offered), in its order, with its names
    assert [(r["id"], r["name"]) for r in rows] == [
        ("mig-1g.10gb", "A seventh of an A100"),
        ("mig-3g.40gb", "Half an A100"),
    ]
    assert rows[1]["text"] == "Half an A100 \u00b7 MIG 3g.40gb: 2 free"
    refused = w.decide(["mig-pool"])
    assert refused.reasons == [
        "mig-pool: this pool offers mig-1g.10gb, mig-3g.40gb only (not whole)"
    ]
    first = w.admit([("mig-pool", "mig-3g.40gb")])
    assert first.admitted
    # one 3g per user: held (reserved), then running, alice gets no second; bob does
    second = w.decide([("mig-pool", "mig-3g.40gb")])
    assert second.reasons == [
        "mig-pool: you run 1 Half an A100 server here, this pool's limit per user"
    ]
    w.run(first)
    assert not w.decide([("mig-pool", "mig-3g.40gb")]).admitted
    assert w.decide([("mig-pool", "mig-3g.40gb")], user="bob").admitted
    assert w.decide([("mig-pool", "mig-1g.10gb")]).admitted


def test_a_shapes_cap_per_user_counts_that_shape_only():
    w = World(NAMED, mig_node("m1", "mig-pool", {"3g.40gb": 2, "1g.10gb": 2}, whole=1))
    # alice holds a 1g (admitted, its pod not seen yet): her 3g cap of 1 is untouched
    small = w.admit([("mig-pool", "mig-1g.10gb")])
    assert small.admitted
    assert w.decide([("mig-pool", "mig-3g.40gb")]).admitted
    # and with that 1g running and a second one held, still untouched
    w.run(small)
    assert w.admit([("mig-pool", "mig-1g.10gb")]).admitted
    big = w.admit([("mig-pool", "mig-3g.40gb")])
    assert big.admitted, big.message
    # her one 3g, held, is what the cap counts
    assert w.decide([("mig-pool", "mig-3g.40gb")]).reasons == [
        "mig-pool: you run 1 Half an A100 server here, this pool's limit per user"
    ]


def test_a_pool_files_shapes_are_checked_with_file_and_line():
    bad = NAMED + "  - {id: mig-3g, name: broken}\n  - {id: mig-1g.10gb}\n"
    with pytest.raises(DocumentError) as e:
        load_string(bad, "pools.yaml")
    text = str(e.value)
    assert "pools.yaml:8: shapes[2].id: 'mig-3g' is not a shape id" in text
    assert "pools.yaml:9: shapes[3].id: shape mig-1g.10gb is listed twice" in text
    # written back and read again, the rules are the same
    reg = load_string(NAMED)
    again = load_string(yaml.safe_dump(pool_to_document(reg.pool("mig-pool"))))
    assert again.pool("mig-pool").shapes == reg.pool("mig-pool").shapes


RECLAIMING = """
kind: pool
version: v0.1
pool: {name: mig-pool}
quota:
  borrowing: true
  user-default: {guaranteed: 0, limit: 4}
  groups:
    team: {guaranteed: 1, limit: 1}
"""


def test_a_guaranteed_instance_reclaims_the_newest_borrowed_one_of_its_shape():
    w = World(RECLAIMING, mig_node("m1", "mig-pool", {"1g.10gb": 3, "3g.40gb": 1}))
    borrowed = [pod["metadata"]["name"] for pod in w.borrowed("mig-1g.10gb", 3)]
    # a borrowed 3g too: not of the shape asked, never a victim for a 1g
    big = w.admit([("mig-pool", "mig-3g.40gb")], user="carol")
    w.run(big)
    d = w.decide([("mig-pool", "mig-1g.10gb")], groups=["team"])
    assert not d.admitted
    assert d.reclaim is not None and d.reclaim.node == "m1"
    assert [v.name for v in d.reclaim.victims] == [borrowed[-1]]  # the newest, and only it
    assert d.reclaim.gpus_freed == 1


PLACED = """
kind: pool
version: v0.1
pool: {name: mig-pool}
placement: PLACEMENT
"""


@pytest.mark.parametrize(("placement", "expected"), [("binpack", "m-full"), ("spread", "m-empty")])
def test_a_slice_goes_to_the_fullest_node_that_fits_or_the_emptiest_under_spread(
    placement, expected
):
    w = World(
        PLACED.replace("PLACEMENT", placement),
        mig_node("m-full", "mig-pool", {"1g.10gb": 2}),
        mig_node("m-empty", "mig-pool", {"1g.10gb": 7}),
    )
    d = w.decide([("mig-pool", "mig-1g.10gb")])
    assert d.admitted and d.node == expected


def test_a_slice_is_not_placed_on_a_node_whose_taints_the_pool_does_not_tolerate():
    taint = [{"key": "dedicated", "value": "ops", "effect": "NoSchedule"}]
    w = World(
        PLACED.replace("PLACEMENT", "spread"),
        mig_node("m-tainted", "mig-pool", {"1g.10gb": 7}, taints=taint),
        mig_node("m-open", "mig-pool", {"1g.10gb": 1}),
    )
    first = w.admit([("mig-pool", "mig-1g.10gb")])
    assert first.admitted and first.node == "m-open"
    # the open node's one instance is held now; the tainted node's seven are not for this pool
    second = w.decide([("mig-pool", "mig-1g.10gb")])
    assert not second.admitted


def test_a_reclaim_for_a_slice_counts_held_instances_and_skips_servers_already_stopping():
    w = World(RECLAIMING, mig_node("m1", "mig-pool", {"1g.10gb": 3}))
    pods = w.borrowed("mig-1g.10gb", 2)
    # the third instance is held by an admission whose pod is not seen yet: nothing is free
    held = w.admit([("mig-pool", "mig-1g.10gb")], user="erin")
    assert held.admitted and held.over_quota
    # the newest borrower is already stopping: the older one is the victim
    stopping = pods[1]
    stopping["metadata"]["deletionTimestamp"] = "2025-01-01T01:00:00Z"
    w.index.apply_pod("MODIFIED", stopping)
    d = w.decide([("mig-pool", "mig-1g.10gb")], groups=["team"])
    assert not d.admitted and d.reclaim is not None
    assert [v.name for v in d.reclaim.victims] == [pods[0]["metadata"]["name"]]
