"""The usage index: what pools, nodes, users and groups use, from watch events."""

from __future__ import annotations

from k8s_factories import node, pod

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.core.usage.records import pod_gpus
from jupyter_gpupool.core.usage.rows import NodeUsage, PoolUsage


def demo_index() -> UsageIndex:
    idx = UsageIndex()
    for n in ("gpu-node-1", "gpu-node-2"):
        idx.apply_node("ADDED", node(n, "training-pool", 8))
    idx.apply_node("ADDED", node("gpu-node-3", "inference-pool", 4, "A10-24G"))
    idx.apply_node("ADDED", node("cpu-node-1", "compute-pool", 0, ""))
    idx.apply_node("ADDED", node("node-6", None, 4, None, product="Tesla-T4"))
    return idx


def test_pools_like_gpuctl_get_pools():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("a", 4, "gpu-node-1", user="alice", charged="group:ml"))
    idx.apply_pod("ADDED", pod("b", 2, "gpu-node-1", user="bob"))
    idx.apply_pod("ADDED", pod("c", 4, "gpu-node-2"))  # not a notebook: still uses GPUs
    assert idx.pool_usage("training-pool") == PoolUsage(
        name="training-pool",
        status="active",
        gpu_total=16,
        gpu_used=10,
        gpu_free=6,
        gpu_free_schedulable=6,
        largest_free_block=4,
        node_count=2,
        schedulable_nodes=2,
        gpu_types=("A100-80G",),
        servers=2,
        pending_servers=0,
    )
    assert [p.name for p in idx.pools()] == [
        "compute-pool",
        "default",
        "inference-pool",
        "training-pool",
    ]
    default = idx.pool_usage("default")
    assert default.gpu_total == 4 and default.gpu_types == ("Tesla-T4",)  # GFD fallback
    assert idx.pool_usage("nowhere").status == "empty"


def test_usage_per_user_and_subject():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("a", 4, "gpu-node-1", user="alice", charged="group:ml"))
    idx.apply_pod("ADDED", pod("a2", 1, "gpu-node-3", user="alice"))
    idx.apply_pod("ADDED", pod("b", 2, None, user="bob", pool="training-pool"))  # pending
    assert idx.usage_by_subject("training-pool") == {"group:ml": 4, "user:bob": 2}
    assert idx.usage_by_user("training-pool") == {"alice": 4, "bob": 2}
    assert idx.usage_by_user() == {"alice": 5, "bob": 2}
    assert idx.subject_used_total("user:alice") == 1
    assert idx.user_used("training-pool", "alice") == 4
    # the pending server counts for quota, not for any node
    assert idx.pool_usage("training-pool").gpu_used == 4
    servers = idx.servers("training-pool")
    assert [(s.name, s.state, s.node) for s in servers] == [
        ("a", "running", "gpu-node-1"),
        ("b", "pending", None),
    ]
    assert idx.pool_usage("training-pool").pending_servers == 1


def test_finished_pods_free_their_gpus_and_deleting_ones_do_not_yet():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("a", 8, "gpu-node-1", user="alice"))
    assert idx.node_free("gpu-node-1") == 0
    idx.apply_pod("MODIFIED", pod("a", 8, "gpu-node-1", user="alice", deleting=True))
    assert idx.node_free("gpu-node-1") == 0
    assert idx.servers("training-pool")[0].state == "terminating"
    idx.apply_pod("MODIFIED", pod("a", 8, "gpu-node-1", user="alice", phase="Succeeded"))
    assert idx.node_free("gpu-node-1") == 8
    assert idx.usage_by_user() == {} and idx.servers() == []
    idx.apply_pod("DELETED", pod("a", 8, "gpu-node-1", user="alice", phase="Succeeded"))
    idx.apply_pod("ADDED", pod("f", 8, "gpu-node-1", phase="Failed"))
    assert idx.node_free("gpu-node-1") == 8 and len(idx) == 0


def test_pod_binding_moves_usage_onto_the_node():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("a", 4, None, user="alice", pool="training-pool"))
    assert idx.node_free("gpu-node-2") == 8
    idx.apply_pod("MODIFIED", pod("a", 4, "gpu-node-2", user="alice", phase="Pending"))
    assert idx.node_free("gpu-node-2") == 4
    assert idx.servers("training-pool")[0].state == "starting"
    idx.apply_pod("MODIFIED", pod("a", 4, "gpu-node-2", user="alice"))
    assert idx.servers("training-pool")[0].state == "running"
    assert idx.user_used("training-pool", "alice") == 4


def test_gpu_requests_containers_init_containers_and_sidecars():
    assert pod_gpus(pod("x", 2)["spec"]) == 2
    assert pod_gpus(pod("x", 1, init_gpus=4)["spec"]) == 4
    spec = {
        "containers": [
            {"resources": {"requests": {"nvidia.com/gpu": "1"}}},
            {"resources": {"limits": {"nvidia.com/gpu": 2}}},
            {"name": "no-resources"},
        ],
        "initContainers": [
            {"restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
            {"resources": {"limits": {"nvidia.com/gpu": "3"}}},
        ],
    }
    assert pod_gpus(spec) == 4  # 1 + 2 + sidecar 1, and the init peak is 1 + 3


def test_node_status_with_reasons():
    idx = UsageIndex()
    idx.apply_node("ADDED", node("ok", "p", 8))
    idx.apply_node("ADDED", node("sick", "p", 8, ready=False, conditions={"DiskPressure": True}))
    idx.apply_node("ADDED", node("cordoned", "p", 8, cordoned=True))
    idx.apply_node("ADDED", node("noplugin", "p", 8, device_plugin=False))
    idx.apply_node(
        "ADDED", node("net", "p", 4, conditions={"NetworkUnavailable": True, "PIDPressure": True})
    )
    by_name = {n.name: n for n in idx.nodes("p")}
    assert by_name["ok"] == NodeUsage("ok", "p", "A100-80G", 8, 0, 8, "Ready", (), True, 0)
    assert by_name["sick"].status == "NotReady"
    assert by_name["sick"].reasons == ("not ready", "disk pressure")
    assert by_name["cordoned"].status == "Ready,SchedulingDisabled"
    assert by_name["cordoned"].reasons == ("cordoned (scheduling disabled)",)
    assert by_name["noplugin"].reasons == ("GPU resource missing (no device plugin)",)
    assert by_name["noplugin"].gpu_total == 0
    assert by_name["net"].reasons == ("PID pressure", "network unavailable")
    usage = idx.pool_usage("p")
    assert usage.status == "degraded"
    assert (usage.node_count, usage.schedulable_nodes) == (5, 2)
    assert (usage.gpu_total, usage.gpu_free_schedulable, usage.largest_free_block) == (28, 8, 8)


def test_largest_free_block_follows_every_change():
    idx = UsageIndex()
    for i in range(4):
        idx.apply_node("ADDED", node(f"n{i}", "p", 4))
    for i in range(4):
        idx.apply_pod("ADDED", pod(f"p{i}", 1, f"n{i}"))
    usage = idx.pool_usage("p")
    assert (usage.gpu_free, usage.largest_free_block) == (12, 3)
    idx.apply_pod("DELETED", pod("p2", 1, "n2"))
    assert idx.pool_usage("p").largest_free_block == 4
    idx.apply_node("MODIFIED", node("n2", "p", 4, cordoned=True))
    assert idx.pool_usage("p").largest_free_block == 3
    idx.apply_node("MODIFIED", node("n2", "p", 4))
    assert idx.pool_usage("p").largest_free_block == 4


def test_node_moving_between_pools_takes_its_pods_along():
    idx = demo_index()
    idx.apply_pod(
        "ADDED", pod("a", 4, "gpu-node-2", user="alice", charged="group:ml", over_quota=True)
    )
    idx.apply_node("MODIFIED", node("gpu-node-2", "inference-pool", 8))
    train, infer = idx.pool_usage("training-pool"), idx.pool_usage("inference-pool")
    assert (train.gpu_total, train.gpu_used, train.servers) == (8, 0, 0)
    assert (infer.gpu_total, infer.gpu_used, infer.servers) == (12, 4, 1)
    assert idx.usage_by_subject("inference-pool") == {"group:ml": 4}
    assert idx.usage_by_subject("training-pool") == {}
    assert [s.name for s in idx.over_quota_servers("inference-pool")] == ["a"]
    # the label removed: the node joins the default pool
    idx.apply_node("MODIFIED", node("gpu-node-2", None, 8))
    assert idx.pool_usage("default").gpu_used == 4


def test_node_removed_and_back_keeps_its_pods():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("a", 4, "gpu-node-1", user="alice"))
    idx.apply_node("DELETED", node("gpu-node-1", "training-pool", 8))
    assert idx.pool_usage("training-pool").gpu_total == 8
    assert idx.user_used("training-pool", "alice") == 0  # no node, no pool label on the pod
    idx.apply_node("ADDED", node("gpu-node-1", "training-pool", 8))
    assert idx.node_free("gpu-node-1") == 4
    assert idx.user_used("training-pool", "alice") == 4


def test_pod_seen_before_its_node():
    idx = UsageIndex()
    idx.apply_pod("ADDED", pod("a", 2, "late", user="alice", pool="p"))
    assert idx.user_used("p", "alice") == 2
    idx.apply_node("ADDED", node("late", "p", 4))
    assert idx.node_free("late") == 2 and idx.pool_usage("p").gpu_used == 2


def test_custom_pool_label_and_selectors():
    idx = UsageIndex(pool_label="example.org/pool", selectors=[("ib", {"fabric": "ib"})])
    idx.apply_node("ADDED", node("a", None, 8, extra_labels={"example.org/pool": "x"}))
    idx.apply_node("ADDED", node("b", None, 8, extra_labels={"fabric": "ib"}))
    idx.apply_node("ADDED", node("c", "ignored-runwhere-label", 8))
    assert {n.name: n.pool for n in idx.nodes()} == {"a": "x", "b": "ib", "c": "default"}
    idx.apply_pod("ADDED", pod("p", 2, "b", user="u"))
    idx.set_selectors([])
    assert idx.node("b").pool == "default"
    assert idx.user_used("default", "u") == 2


def test_reset_after_relist_diffs_against_what_was_known():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("gone", 2, "gpu-node-1", user="alice"))
    idx.apply_pod("ADDED", pod("kept", 2, "gpu-node-2", user="bob"))
    idx.reset(
        nodes=[node("gpu-node-1", "training-pool", 8), node("gpu-node-2", "training-pool", 8)],
        pods=[pod("kept", 2, "gpu-node-2", user="bob"), pod("new", 1, "gpu-node-1")],
    )
    assert [n.name for n in idx.nodes()] == ["gpu-node-1", "gpu-node-2"]
    assert idx.usage_by_user() == {"bob": 2}
    assert idx.node_free("gpu-node-1") == 7
    assert idx.pool_names() == ["training-pool"]


def test_admission_listener_hears_pending_bound_and_gone():
    heard: list[tuple[str, str]] = []
    idx = UsageIndex(on_admission=lambda aid, state: heard.append((aid, state)))
    idx.apply_node("ADDED", node("n", "p", 8))
    idx.apply_pod("ADDED", pod("a", 1, None, user="u", admission="adm-1", pool="p"))
    idx.apply_pod("MODIFIED", pod("a", 1, "n", user="u", admission="adm-1", phase="Pending"))
    assert idx.admission_state("adm-1") == "bound"
    idx.apply_pod("DELETED", pod("a", 1, "n", user="u", admission="adm-1"))
    assert heard == [("adm-1", "pending"), ("adm-1", "bound"), ("adm-1", "gone")]
    assert idx.admission_state("adm-1") is None


def test_kubespawner_pods_without_our_labels_count_as_their_users_servers():
    idx = demo_index()
    p = pod("jupyter-carol", 1, "gpu-node-1")
    p["metadata"]["annotations"] = {"hub.jupyter.org/username": "carol@example.org"}
    idx.apply_pod("ADDED", p)
    [server] = idx.servers()
    assert (server.user, server.charged, server.pool) == (
        "carol@example.org",
        "user:carol@example.org",
        "training-pool",
    )


def test_a_recreated_pod_with_the_same_name_is_recounted():
    idx = demo_index()
    idx.apply_pod("ADDED", pod("a", 2, "gpu-node-1", user="alice", uid="1"))
    idx.apply_pod("MODIFIED", pod("a", 4, "gpu-node-1", user="alice", uid="2"))
    assert idx.node_free("gpu-node-1") == 4
    # the same uid never changes its containers: repeated events cost nothing and change nothing
    idx.apply_pod("MODIFIED", pod("a", 4, "gpu-node-1", user="alice", uid="2"))
    assert idx.node_free("gpu-node-1") == 4


def test_pods_without_gpus_count_on_their_node_until_they_go():
    """Most pods of a large cluster have no GPUs and are no servers: the index keeps only where
    they run, and a node's number of pods counts them as it counts the others."""
    idx = demo_index()
    idx.apply_pod("ADDED", pod("web", 0))  # pending: on no node yet
    idx.apply_pod("ADDED", pod("dns", 0, "gpu-node-1"))
    idx.apply_pod("ADDED", pod("train", 2, "gpu-node-1"))
    assert idx.node("gpu-node-1").pods == 2 and len(idx) == 3
    idx.apply_pod("MODIFIED", pod("web", 0, "gpu-node-1"))  # bound
    assert idx.node("gpu-node-1").pods == 3
    idx.apply_pod("MODIFIED", pod("web", 0, "gpu-node-1", phase="Succeeded"))  # finished
    assert idx.node("gpu-node-1").pods == 2 and len(idx) == 2
    # the same pod, now a server of alice's: it counts for her like any other
    idx.apply_pod("MODIFIED", pod("dns", 0, "gpu-node-1", user="alice"))
    assert [s.name for s in idx.servers(user="alice")] == ["dns"]
    assert idx.node("gpu-node-1").pods == 2 and len(idx) == 2
    idx.apply_pod("ADDED", pod("log", 0, "gpu-node-2"))
    idx.apply_pod("DELETED", pod("log", 0, "gpu-node-2"))
    assert idx.node("gpu-node-2").pods == 0 and len(idx) == 2
    # a relist that no longer has a pod without GPUs drops it from its node too
    idx.apply_pod("ADDED", pod("cron", 0, "gpu-node-2"))
    relist = idx.relist("pods")
    relist.add([pod("train", 2, "gpu-node-1")])
    relist.add([pod("dns", 0, "gpu-node-1", user="alice")])
    relist.finish()
    assert (idx.node("gpu-node-1").pods, idx.node("gpu-node-2").pods, len(idx)) == (2, 0, 2)
    assert idx.node_free("gpu-node-1") == 6
