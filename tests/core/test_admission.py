"""Admission decisions, as a user and an admin would check them."""

from __future__ import annotations

import pytest
from k8s_factories import EXAMPLES, TEST_POOLS, node, pod
from test_overrides import WHOLE_GPU_TERMS, WHOLE_GPUS

from jupyter_gpupool.core.admission.overrides import build_overrides
from jupyter_gpupool.core.admission.walk import AdmissionRequest, AdmissionState, Decision, decide
from jupyter_gpupool.core.pools.model import Registry
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.usage import labels as L
from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.reservations import Reservation, Reservations
from jupyter_gpupool.poolfiles import load_paths
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec


class World:
    """A registry, an index and reservations wired as the service wires them."""

    def __init__(self, registry: Registry, *nodes: dict):
        self.registry = registry
        self.reservations = Reservations()
        self.index = UsageIndex(on_admission=self.reservations.observe)
        for n in nodes:
            self.index.apply_node("ADDED", n)
        self.count = 0

    @property
    def state(self) -> AdmissionState:
        return AdmissionState(self.registry, self.index, self.reservations)

    def decide(self, user="alice", groups=(), pools=(), gpus=1, **kw) -> Decision:
        self.count += 1
        req = AdmissionRequest(
            user, tuple(groups), tuple(pools), gpus, admission_id=f"adm-{self.count}", **kw
        )
        return decide(req, self.state)

    def admit(self, *args, **kw) -> Decision:
        """Decide and reserve, as the service does under its lock."""
        d = self.decide(*args, **kw)
        if d.admitted:
            self.reservations.add(d.reservation(expires_at=100.0))
        return d

    def run(self, name: str, d: Decision, created: str = "2025-01-01T00:00:00Z") -> None:
        """The pod of an admitted decision appears, bound to the reserved node."""
        req = d.request
        self.index.apply_pod(
            "ADDED",
            pod(
                name,
                req.gpus,
                d.node,
                user=req.user,
                server=req.server,
                pool=d.pool,
                charged=d.charged,
                over_quota=d.over_quota,
                admission=req.admission_id,
                created=created,
            ),
        )


def demo() -> World:
    return World(
        load_paths([TEST_POOLS]),
        node("gpu-node-1", "training-pool", 8),
        node("gpu-node-2", "training-pool", 8),
        node("gpu-node-3", "inference-pool", 4, "A10-24G"),
        node("gpu-node-4", "inference-pool", 4, "A10-24G"),
        node("gpu-node-5", "dev-pool", 4, "RTX4090-24G"),
        node("cpu-node-1", "compute-pool", 0, ""),
        node("cpu-node-2", "compute-pool", 0, ""),
        node("node-6", None, 4, "T4-16G"),
    )


def open_pool(extra: str = "", nodes: int = 4, gpus: int = 4) -> World:
    """One pool without quota: only capacity matters."""
    reg = load_string(f"kind: pool\nversion: v0.1\npool: {{name: p}}\n{extra}")
    return World(reg, *(node(f"n{i}", "p", gpus) for i in range(nodes)))


# --- capacity ----------------------------------------------------------------------------------


def test_fragmentation_16_free_gpus_on_4_nodes_cannot_take_8():
    w = open_pool()
    d = w.decide(pools=["p"], gpus=8)
    assert not d.admitted
    assert d.reasons == ["p: no node has 8 free GPUs (largest free block: 4)"]
    assert w.decide(pools=["p"], gpus=4).admitted


def test_reservations_count_as_used_until_the_pod_is_bound():
    w = open_pool(nodes=2)
    first = w.admit(pools=["p"], gpus=4)
    second = w.admit(pools=["p"], gpus=4)
    assert first.admitted and second.admitted and first.node != second.node
    third = w.decide(pools=["p"], gpus=1)
    assert third.reasons == ["p: no node has 1 free GPU (largest free block: 0)"]
    # the pod appears pending: the node stays held; bound: the index counts it instead
    req = first.request
    w.index.apply_pod(
        "ADDED", pod("a", 4, None, user="alice", pool="p", admission=req.admission_id)
    )
    assert w.reservations.pool_nodes("p")[first.node] == 4
    w.run("a", first)
    assert first.request.admission_id not in w.reservations
    assert not w.decide(pools=["p"], gpus=1).admitted
    # the second spawn never produced a pod: its reservation expires
    assert [r.admission_id for r in w.reservations.expire(now=100.0)] == ["adm-2"]
    assert w.decide(pools=["p"], gpus=4).admitted


def test_binpack_fills_the_fullest_node_and_spread_the_emptiest():
    w = open_pool(nodes=3)
    w.index.apply_pod("ADDED", pod("x", 3, "n1"))
    w.index.apply_pod("ADDED", pod("y", 1, "n2"))
    assert w.decide(pools=["p"], gpus=1).node == "n1"
    assert w.decide(pools=["p"], gpus=2).node == "n2"
    assert w.decide(pools=["p"], gpus=1).nodes_fit == 3
    spread = open_pool("placement: spread\n", nodes=3)
    spread.index.apply_pod("ADDED", pod("x", 3, "n0"))
    spread.index.apply_pod("ADDED", pod("y", 1, "n1"))
    assert spread.decide(pools=["p"], gpus=1).node == "n2"


def test_unready_cordoned_and_pressured_nodes_take_nothing():
    reg = load_string("kind: pool\npool: {name: p}\n")
    w = World(
        reg,
        node("a", "p", 8, ready=False),
        node("b", "p", 8, cordoned=True),
        node("c", "p", 8, conditions={"MemoryPressure": True}),
    )
    assert w.decide(pools=["p"], gpus=1).reasons == [
        "p: none of its 3 nodes can take servers right now (not ready, under pressure or cordoned)"
    ]
    w.index.apply_node("MODIFIED", node("b", "p", 8))
    assert w.decide(pools=["p"], gpus=1).node == "b"


def test_taints_must_be_tolerated_by_the_pool_template():
    taint = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    reg = load_string("kind: pool\npool: {name: p}\n")
    w = World(reg, node("a", "p", 8, taints=taint))
    assert w.decide(pools=["p"], gpus=1).reasons == [
        "p: its nodes' taints are not tolerated by this pool's template"
    ]
    ok = World(
        load_string(
            "kind: pool\npool: {name: p}\ntemplate:\n  tolerations: "
            "[{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]\n"
        ),
        node("a", "p", 8, taints=[*taint, {"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
    )
    assert ok.decide(pools=["p"], gpus=1).admitted


# --- walking the pools ---------------------------------------------------------------------------


def test_walks_the_list_and_says_why_each_pool_was_skipped():
    w = demo()
    w.index.apply_pod("ADDED", pod("t1", 6, "gpu-node-1", user="x", charged="group:ml-research"))
    w.index.apply_pod("ADDED", pod("t2", 6, "gpu-node-2", user="y", charged="group:ml-research"))
    d = w.decide("carol", ["ml-research"], ["nowhere", "training-pool", "inference-pool"], 4)
    assert d.admitted and d.pool == "inference-pool"
    assert d.reasons == [
        "nowhere: there is no such pool",
        "training-pool: no node has 4 free GPUs (largest free block: 2)",
    ]
    assert d.message.splitlines()[-1] == "inference-pool: admitted (4 A10-24G GPUs, within quota)"
    assert (d.charged, d.over_quota, d.nodes_fit) == ("group:ml-research", False, 2)


def test_no_borrowing_reason_names_the_group_and_its_guarantee():
    w = demo()
    for i, n in enumerate(("gpu-node-3", "gpu-node-4")):
        w.index.apply_pod("ADDED", pod(f"i{i}", 3, n, user="x", charged="group:ml-research"))
    d = w.decide("alice", ["ml-research"], ["inference-pool"], 2)
    assert d.reasons == [
        "inference-pool: your group ml-research uses 6 of its 6 guaranteed GPUs "
        "and the pool allows no borrowing"
    ]
    d = w.decide("zoe", [], ["inference-pool"], 1)
    assert d.reasons == [
        "inference-pool: you have no guaranteed GPUs in this pool and it allows no borrowing"
    ]


def test_access_limits_and_gpu_type_reasons():
    reg = load_string(
        """
kind: pool
pool: {name: private}
access: {groups: [staff]}
---
kind: pool
pool: {name: small}
limits: {max-gpus: 2, allowed-gpus: [1, 2]}
---
kind: pool
pool: {name: typed}
platforms:
  a100: {gpu-type: A100-80G}
"""
    )
    w = World(reg, node("a", "private", 8), node("b", "small", 8), node("c", "typed", 8))
    assert w.decide("bob", ["students"], ["private"], 1).reasons == [
        "private: you don't have access to this pool"
    ]
    assert w.decide("bob", ["staff"], ["private"], 1).admitted
    assert w.decide("bob", [], ["small"], 4).reasons == [
        "small: servers here may use at most 2 GPUs (you asked for 4)"
    ]
    assert w.decide("bob", [], ["small"], 0).reasons == [
        "small: servers here may use 1 or 2 GPUs (you asked for 0)"
    ]
    assert w.decide("bob", [], ["typed"], 1, gpu_type="H100").reasons == [
        "typed: this pool has no GPU type H100 (A100-80G)"
    ]
    d = w.decide("bob", [], ["typed"], 1, gpu_type="A100-80G")
    assert (d.platform, d.gpu_type) == ("a100", "A100-80G")


def test_users_who_pick_nothing_get_their_groups_default_pools():
    w = demo()
    d = w.decide("sam", ["students"], [], 1)
    assert d.pool == "dev-pool"
    d = w.decide("zoe", [], [], 0)
    assert d.pool == "dev-pool" and d.charged == "user:zoe"


def test_pools_only_labelled_on_nodes_are_bare_gpuctl_pools():
    w = World(load_string("kind: pool\npool: {name: p}\n"), node("x", "unfiled", 4))
    d = w.decide(pools=["unfiled"], gpus=2)
    assert d.admitted and d.overrides["nodeSelector"] == {"runwhere.ai/pool": "unfiled"}


# --- quota and charging --------------------------------------------------------------------------


QUOTA = """
kind: pool
version: v0.1
pool: {name: p}
quota:
  borrowing: true
  user-default: {guaranteed: 0, limit: 6}
  groups:
    a: {guaranteed: 2, limit: 4}
    b: {guaranteed: 4}
  users:
    alice: {guaranteed: 1, limit: 8}
"""


def quota_world(text: str = QUOTA, nodes: int = 4) -> World:
    return World(load_string(text), *(node(f"n{i}", "p", 8) for i in range(nodes)))


def test_charged_to_the_first_group_with_guarantee_left_then_user_then_borrowing():
    w = quota_world()
    groups = ["b", "a"]  # as JupyterHub lists them; the quota file's order decides
    d1 = w.admit("u1", groups, ["p"], 2)
    assert (d1.charged, d1.over_quota) == ("group:a", False)
    d2 = w.admit("u2", groups, ["p"], 2)
    assert (d2.charged, d2.over_quota) == ("group:b", False)
    d3 = w.admit("u3", groups, ["p"], 1)
    assert (d3.charged, d3.over_quota) == ("group:b", False)
    d4 = w.admit("u4", groups, ["p"], 2)  # b has 1 left: not enough, so borrow
    assert (d4.charged, d4.over_quota) == ("group:a", True)  # a's limit 4 has room
    d5 = w.admit("u5", groups, ["p"], 1)
    assert (d5.charged, d5.over_quota) == ("group:b", False)
    d6 = w.admit("alice", [], ["p"], 1)
    assert (d6.charged, d6.over_quota) == ("user:alice", False)  # her own guarantee
    d7 = w.admit("alice", [], ["p"], 1)
    assert (d7.charged, d7.over_quota) == ("user:alice", True)
    d8 = w.admit("u8", groups, ["p"], 2)  # a at its limit, b has no limit: borrow as b
    assert (d8.charged, d8.over_quota) == ("group:b", True)
    assert d4.overrides["labels"]["gpupool.jupyter.org/over-quota"] == "true"
    assert d4.overrides["annotations"]["gpupool.jupyter.org/charged"] == "group:a"
    assert w.index.usage_by_subject("p") == {}  # no pods yet: all of it is reservations
    assert w.reservations.subject_reserved("p", "group:a") == 4


def test_limits_include_borrowing_and_cap_each_user():
    w = quota_world()
    w.admit("x", ["a"], ["p"], 2)
    w.admit("y", ["a"], ["p"], 2)  # over quota, a at its limit of 4
    d = w.decide("z", ["a"], ["p"], 1)
    assert d.reasons == [
        "p: your group a uses 4 of its limit of 4 GPUs in this pool, borrowing included"
    ]
    w.admit("bob", [], ["p"], 6)
    assert w.decide("bob", [], ["p"], 1).reasons == [
        "p: you use 6 of your limit of 6 GPUs in this pool"
    ]
    assert w.decide("carl", [], ["p"], 7).reasons == [
        "p: you use 0 of your limit of 6 GPUs in this pool (you asked for 7)"
    ]
    assert w.decide("alice", [], ["p"], 9).reasons == [
        "p: you use 0 of your limit of 8 GPUs in this pool (you asked for 9)"
    ]


def test_cluster_wide_gpuctl_caps():
    text = (
        QUOTA
        + "---\nkind: quota\nversion: v0.1\nquota: {name: q}\n"
        + "namespace: {team: {gpu: 3}}\ndefault: {gpu: 2}\n"
    )
    w = quota_world(text)
    w.admit("tim", ["team"], ["p"], 3)
    assert w.decide("tom", ["team"], ["p"], 1).reasons == [
        "p: your group team uses 3 of its limit of 3 GPUs across all pools"
    ]
    w.admit("zoe", [], ["p"], 2)
    assert w.decide("zoe", [], ["p"], 1).reasons == [
        "p: you use 2 of your limit of 2 GPUs across all pools"
    ]


def test_unmanaged_pools_charge_the_user_within_quota():
    w = open_pool()
    d = w.decide("alice", ["whatever"], ["p"], 2)
    assert (d.charged, d.over_quota) == ("user:alice", False)


def test_gpu_less_servers_are_never_charged():
    w = quota_world("kind: pool\npool: {name: p}\nquota: {borrowing: false}\n")
    d = w.decide("alice", [], ["p"], 0)
    assert d.admitted and (d.charged, d.over_quota) == ("user:alice", False)
    assert d.overrides["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    assert "limits" not in d.overrides.get("resources", {})


# --- reclaim -------------------------------------------------------------------------------------


def test_reclaim_names_the_newest_borrowers_as_few_as_needed_on_one_node():
    w = quota_world(QUOTA, nodes=2)
    # n0: 8 GPUs used by borrowers of various ages; n1: full with in-quota and borrowers
    borrowers = [
        ("old4", 4, "n0", "2025-01-01T00:00:00Z"),
        ("mid2", 2, "n0", "2025-01-02T00:00:00Z"),
        ("new2", 2, "n0", "2025-01-03T00:00:00Z"),
        ("n1-new", 1, "n1", "2025-01-04T00:00:00Z"),
    ]
    for name, g, n, created in borrowers:
        w.index.apply_pod(
            "ADDED",
            pod(name, g, n, user="zoe", charged="user:zoe", over_quota=True, created=created),
        )
    w.index.apply_pod("ADDED", pod("keeper", 7, "n1", user="bea", charged="group:b"))
    d = w.decide("ann", ["a"], ["p"], 2)  # a has 2 guaranteed, nothing free anywhere
    assert not d.admitted and d.reclaim is not None
    assert d.reasons == ["p: no node has 2 free GPUs (largest free block: 0)"]
    assert (d.reclaim.node, [v.name for v in d.reclaim.victims]) == ("n0", ["new2"])
    assert d.reclaim.gpus_freed == 2
    assert "reclaiming 2 GPUs on n0 (zoe/new2)" in d.message


def test_reclaim_prefers_fewest_victims_then_newest():
    w = quota_world(QUOTA.replace("b: {guaranteed: 4}", "b: {guaranteed: 8}"), nodes=2)
    for name, g, n, created in [
        ("n0-a", 2, "n0", "2025-01-05T00:00:00Z"),
        ("n0-b", 2, "n0", "2025-01-04T00:00:00Z"),
        ("n0-c", 4, "n0", "2025-01-01T00:00:00Z"),
        ("n1-a", 4, "n1", "2025-01-02T00:00:00Z"),
        ("n1-b", 4, "n1", "2025-01-03T00:00:00Z"),
    ]:
        w.index.apply_pod("ADDED", pod(name, g, n, user="zoe", over_quota=True, created=created))
    d = w.decide("bea", ["b"], ["p"], 4)
    # n0 needs two (n0-a, n0-b, newest first); n1 needs one (n1-b): fewer wins
    assert [v.name for v in d.reclaim.victims] == ["n1-b"]
    d = w.decide("bea", ["b"], ["p"], 6)  # n0 would need all three, n1 two
    assert d.reclaim.node == "n1" and [v.name for v in d.reclaim.victims] == ["n1-b", "n1-a"]


def test_no_reclaim_for_borrowers_or_when_in_quota_servers_hold_the_gpus():
    w = quota_world(QUOTA, nodes=1)
    w.index.apply_pod("ADDED", pod("mine", 8, "n0", user="bea", charged="group:b"))
    d = w.decide("ann", ["a"], ["p"], 1)
    assert not d.admitted and d.reclaim is None
    w2 = quota_world(QUOTA, nodes=1)
    w2.index.apply_pod("ADDED", pod("borrower", 8, "n0", user="zoe", over_quota=True))
    d = w2.decide("zoe", [], ["p"], 1)  # zoe would borrow too: no reclaim for her
    assert d.reclaim is None
    d = w2.decide("ann", ["a"], ["p"], 1, reclaim=False)
    assert d.reclaim is None


# --- pod overrides -------------------------------------------------------------------------------


def test_overrides_merge_defaults_pool_and_platform_templates_then_ours():
    reg = load_string(
        """
kind: pool
version: v0.1
pool: {name: mixed}
defaults: {cpu: 1, memory: 4Gi, cpu-per-gpu: "0.5", memory-per-gpu: 32Gi}
platforms:
  l40s:
    gpu-type: L40S
    defaults: {memory-per-gpu: 48Gi}
    template:
      nodeSelector: {example.org/fabric: pcie}
      env: [{name: MODE, value: l40s}]
template:
  image: quay.io/jupyter/pytorch-notebook
  env: [{name: MODE, value: pool}, {name: HF_HOME, value: /scratch}]
  labels: {team: ml}
  tolerations: [{key: dedicated, operator: Exists}]
  resources: {limits: {memory: 256Gi}}
"""
    )
    w = World(reg, node("x", "mixed", 8, None, product="NVIDIA-L40S"))
    w.index.apply_node("MODIFIED", node("x", "mixed", 8, "L40S"))
    d = w.decide("alice@example.org", ["ml"], ["mixed"], 3, gpu_type="L40S", server="big")
    assert d.admitted and d.platform == "l40s"
    assert d.overrides == {
        "resources": {
            "requests": {"cpu": "2500m", "memory": "148Gi", "nvidia.com/gpu": "3"},
            "limits": {"memory": "256Gi", "nvidia.com/gpu": "3"},
        },
        "image": "quay.io/jupyter/pytorch-notebook",
        "env": [{"name": "MODE", "value": "l40s"}, {"name": "HF_HOME", "value": "/scratch"}],
        "labels": {
            "team": "ml",
            "gpupool.jupyter.org/pool": "mixed",
            "runwhere.ai/pool": "mixed",
            "gpupool.jupyter.org/user": d.overrides["labels"]["gpupool.jupyter.org/user"],
            "gpupool.jupyter.org/server": "big",
            "gpupool.jupyter.org/gpus": "3",
            "gpupool.jupyter.org/over-quota": "false",
            "gpupool.jupyter.org/charged": d.overrides["labels"]["gpupool.jupyter.org/charged"],
            "gpupool.jupyter.org/admission": "adm-1",
            "gpupool.jupyter.org/platform": "l40s",
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "nodeSelector": {
            "example.org/fabric": "pcie",
            "runwhere.ai/pool": "mixed",
            "runwhere.ai/gpu-type": "L40S",
        },
        "annotations": {
            "gpupool.jupyter.org/pool": "mixed",
            "gpupool.jupyter.org/user": "alice@example.org",
            "gpupool.jupyter.org/server": "big",
            "gpupool.jupyter.org/groups": "ml",
            "gpupool.jupyter.org/charged": "user:alice@example.org",
        },
        "affinity": {
            "nodeAffinity": {
                **WHOLE_GPUS,
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]}
                            ]
                        },
                    }
                ],
            }
        },
    }
    assert d.overrides["labels"]["gpupool.jupyter.org/user"].startswith("alice-example.org-")


def test_gpu_type_pinned_with_the_label_the_nodes_carry():
    w = World(
        load_string("kind: pool\npool: {name: p}\n"), node("g", "p", 4, None, product="Tesla-T4")
    )
    d = w.decide(pools=["p"], gpus=1, gpu_type="Tesla-T4")
    assert d.overrides["nodeSelector"] == {
        "runwhere.ai/pool": "p",
        "nvidia.com/gpu.product": "Tesla-T4",
    }
    assert w.decide(pools=["p"], gpus=1, gpu_type="A100").reasons == [
        "p: no node here has GPU type A100 ready for servers"
    ]


def test_default_pool_is_selected_by_the_absence_of_the_pool_label():
    w = demo()
    d = w.decide("zoe", [], ["default"], 1)
    assert d.node == "node-6" and "nodeSelector" in d.overrides
    assert d.overrides["nodeSelector"] == {}
    assert d.overrides["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ] == {
        # nodes without the pool label, each term of a whole GPU's node with it
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "runwhere.ai/pool", "operator": "DoesNotExist"}, *t]}
            for t in (term["matchExpressions"] for term in WHOLE_GPU_TERMS)
        ]
    }


def test_selector_pools_select_by_their_labels():
    reg = load_string("kind: pool\npool: {name: ib}\nselector: {fabric: ib}\n")
    d = build_overrides(
        registry=reg,
        pool=reg.pools["ib"],
        platform=None,
        request=AdmissionRequest("u", gpus=1),
        charged="user:u",
        over_quota=False,
    )
    assert d["nodeSelector"] == {"fabric": "ib"}


def test_reservation_of_a_rejected_decision_is_an_error():
    w = open_pool()
    with pytest.raises(ValueError):
        w.decide(pools=["p"], gpus=99).reservation(1.0)
    with pytest.raises(ValueError):
        w.decide(pools=["p"], gpus=-1)
    with pytest.raises(ValueError, match="not a valid label value"):
        decide(AdmissionRequest("u", pools=("p",), admission_id="a:b"), w.state)


def test_reservations_structure():
    r = Reservations()
    res = Reservation("a1", "p", "n0", 2, "alice", "group:g", False, expires_at=10.0)
    r.add(res)
    with pytest.raises(ValueError):
        r.add(res)
    assert (r.subject_reserved("p", "group:g"), r.user_reserved_total("alice")) == (2, 2)
    r.observe("a1", "pending")
    assert (r.subject_reserved("p", "group:g"), r.pool_nodes("p")) == (0, {"n0": 2})
    assert r.expire(9.9) == [] and r.expire(10.0) == [res]
    assert len(r) == 0 and r.pool_nodes("p") == {}
    r.add(res)
    assert r.release("a1") == res and r.release("a1") is None
    assert r.expire(50.0) == []  # the released one left a stale heap entry: skipped


def test_cpu_only_pools_take_cpu_servers_only():
    w = demo()
    d = w.decide("zoe", [], ["compute-pool"], 0)
    assert d.admitted and d.node == "cpu-node-1" and d.gpu_type is None
    assert d.message == "compute-pool: admitted (0 GPUs, within quota)"
    assert w.decide("zoe", [], ["compute-pool"], 1).reasons == [
        "compute-pool: this pool has no GPUs"
    ]


def test_a_guaranteed_request_blocked_by_borrowers_stops_the_walk_unless_told_not_to():
    w = quota_world(QUOTA, nodes=1)
    w.index.apply_pod("ADDED", pod("borrower", 8, "n0", user="zoe", over_quota=True))
    reg = load_string(QUOTA + "---\nkind: pool\npool: {name: spare}\n")
    w.registry = reg
    w.index.apply_node("ADDED", node("s0", "spare", 8))
    d = w.decide("ann", ["a"], ["p", "spare"], 2)
    assert not d.admitted and d.pool == "p" and d.reclaim is not None
    d = w.decide("ann", ["a"], ["p", "spare"], 2, reclaim=False)
    assert d.admitted and d.pool == "spare"


# --- the README's worked example ---------------------------------------------------------------


def test_the_readme_worked_example_on_the_demo_files():
    """README.md, "A worked example": the demo's own pools, quotas and training/inference nodes
    (examples/pools, examples/cluster.yaml); each row of its table, in order."""
    nodes = [
        node(n.name, n.labels[L.POOL_LABEL], n.gpu.count, n.gpu.type)
        for n in example_cluster_spec().nodes
        if n.gpu and n.labels.get(L.POOL_LABEL) in ("training-pool", "inference-pool")
    ]
    w = World(load_paths([EXAMPLES]), *nodes)
    groups = {"alice": ["ml-research"], "bob": ["ml-research"], "carol": ["ml-ops"]}
    clock = iter(range(10, 60))

    def ask(user, gpus, pools=("training-pool",)):
        d = w.admit(user, groups.get(user, []), pools, gpus)
        if d.admitted:
            w.run(f"{user}-{w.count}", d, created=f"2025-01-01T00:00:{next(clock)}Z")
        return d

    def used():
        return w.index.pool_usage("training-pool").gpu_used

    def where(d):
        return (d.pool, d.node, d.charged, d.over_quota)

    assert where(ask("dave", 4)) == ("training-pool", "gpu-node-1", "user:dave", True)
    assert used() == 4
    assert where(ask("carol", 4)) == ("training-pool", "gpu-node-1", "user:carol", True)
    assert used() == 8
    bob = ask("bob", 4)
    assert where(bob) == ("training-pool", "gpu-node-2", "group:ml-research", False)
    assert used() == 12
    assert where(ask("erin", 4)) == ("training-pool", "gpu-node-2", "user:erin", True)
    assert used() == 16

    d = ask("alice", 4)
    assert not d.admitted and d.reclaim is not None
    assert (d.reclaim.node, [(v.user, v.gpus) for v in d.reclaim.victims]) == (
        "gpu-node-2",
        [("erin", 4)],
    )
    erin = d.reclaim.victims[0]
    w.index.apply_pod("DELETED", pod(erin.name, 4, "gpu-node-2", user="erin"))
    assert where(ask("alice", 4)) == ("training-pool", "gpu-node-2", "group:ml-research", False)
    assert used() == 16

    d = ask("alice", 1, ("training-pool", "inference-pool"))
    assert d.reasons == ["training-pool: you use 4 of your limit of 4 GPUs in this pool"]
    assert (d.pool, d.over_quota) == ("inference-pool", True)
