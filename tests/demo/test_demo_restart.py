"""An admin's changes in the demo outlive a restart with the same state directory: nodes moved
between pools (by the service's API and by a Kubernetes client, as kubectl does) and a new pool.
A new state directory starts from the cluster file."""

import kubernetes

from jupyter_gpupool.demo.testing import DemoProcess

POOL = "runwhere.ai/pool"
GPU_TYPE = "runwhere.ai/gpu-type"
#: A pool file as `gpupool create -f` sends it (JSON is YAML, which the service reads).
NEW_POOL = {
    "kind": "pool",
    "version": "v0.1",
    "pool": {"name": "research-pool", "description": "made in the demo"},
    "nodes": {"node-6": {"gpu-type": "T4"}},
}


def node_labels(demo):
    """Every node's labels, read now from the simulated cluster's API (the demo's kubeconfig)."""
    client = kubernetes.config.new_client_from_config(config_file=str(demo.state / "kubeconfig"))
    try:
        nodes = kubernetes.client.CoreV1Api(client).list_node().items
    finally:
        client.close()
    return {n.metadata.name: n.metadata.labels or {} for n in nodes}


def pools(demo):
    code, body = demo.api("GET", "/services/gpupool/api/v1/pools")
    assert code == 200, body
    return {p["name"]: p for p in body["pools"]}


def change_as_an_admin(demo):
    # gpu-node-2 to inference-pool through the service (what `gpupool label node` sends)
    code, body = demo.api(
        "PATCH",
        "/services/gpupool/api/v1/nodes/gpu-node-2/labels",
        {"labels": {POOL: "inference-pool"}, "overwrite": True},
    )
    assert code == 200 and body.get("changed"), body
    # gpu-node-5 out of its pool straight on the cluster, as `kubectl label node gpu-node-5
    # runwhere.ai/pool-` does
    client = kubernetes.config.new_client_from_config(config_file=str(demo.state / "kubeconfig"))
    try:
        core = kubernetes.client.CoreV1Api(client)
        core.patch_node("gpu-node-5", {"metadata": {"labels": {POOL: None}}})
    finally:
        client.close()
    # a new pool: a pool file for the service, and labels on node-6 (in no pool until now)
    code, body = demo.api("POST", "/services/gpupool/api/v1/pools", NEW_POOL)
    assert code == 201, body


def test_an_admins_changes_outlive_a_restart_and_a_new_state_dir_starts_clean(tmp_path):
    state = tmp_path / "demo"
    with DemoProcess.start(state) as demo:
        before = node_labels(demo)
        assert before["gpu-node-2"][POOL] == "training-pool"
        assert before["gpu-node-5"][POOL] == "dev-pool"
        assert POOL not in before["node-6"]
        change_as_an_admin(demo)
        changed = node_labels(demo)

    with DemoProcess.start(state) as demo:
        after = node_labels(demo)
        for node in ("gpu-node-2", "gpu-node-5", "node-6"):
            assert after[node] == changed[node], node
        assert after["gpu-node-2"][POOL] == "inference-pool"
        assert POOL not in after["gpu-node-5"]
        assert (after["node-6"][POOL], after["node-6"][GPU_TYPE]) == ("research-pool", "T4")
        # the nodes nobody touched are as the cluster file has them
        assert after["gpu-node-1"] == before["gpu-node-1"]
        now = pools(demo)
        assert now["research-pool"]["defined"] and now["research-pool"]["node_count"] == 1
        assert now["research-pool"]["gpu_types"] == ["T4"]
        # gpu-node-3, 4, shared-1 and 2
        assert now["inference-pool"]["node_count"] == 4
        assert now["training-pool"]["node_count"] == 2  # gpu-node-1 and gpu-node-mig-1

    with DemoProcess.start(tmp_path / "fresh") as demo:
        assert node_labels(demo) == before
        fresh = pools(demo)
        assert "research-pool" not in fresh
        assert fresh["training-pool"]["node_count"] == 3
        assert fresh["inference-pool"]["node_count"] == 3
