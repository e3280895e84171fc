"""Cluster files: the example loads, and every mistake is reported with its line and field."""

from pathlib import Path

import pytest

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.usage.shapes import node_offer
from jupyter_gpupool.sim import SimCluster, load_cluster_file, parse_cluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster.yaml"


def test_example_cluster_is_gpuctls_four_pools_plus_one_unpooled_node():
    spec = load_cluster_file(EXAMPLE)
    nodes = {n.name: n for n in spec.nodes}
    assert len(nodes) == 10
    pools = {name: n.labels.get("runwhere.ai/pool") for name, n in nodes.items()}
    assert pools == {
        "gpu-node-1": "training-pool",
        "gpu-node-2": "training-pool",
        "gpu-node-3": "inference-pool",
        "gpu-node-4": "inference-pool",
        "gpu-node-5": "dev-pool",
        "gpu-node-mig-1": "training-pool",
        "gpu-node-shared-1": "inference-pool",
        "cpu-node-1": "compute-pool",
        "cpu-node-2": "compute-pool",
        "node-6": None,
    }
    a100 = nodes["gpu-node-1"].all_labels()
    assert a100["runwhere.ai/gpu-type"] == "A100-80G"
    assert a100["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert a100["nvidia.com/gpu.count"] == "8"
    assert a100["nvidia.com/gpu.memory"] == "81920"
    assert nodes["gpu-node-1"].capacity()["nvidia.com/gpu"] == "8"
    assert nodes["gpu-node-3"].capacity()["nvidia.com/gpu"] == "4"
    assert "nvidia.com/gpu" not in nodes["cpu-node-1"].capacity()
    assert nodes["node-6"].all_labels()["runwhere.ai/gpu-type"] == "T4-16G"
    # the slices a newcomer sees on the spawn form: mig-parted's all-balanced cut of one
    # A100-80GB, and an A10 time-sliced in 4
    for name, shapes in (
        ("gpu-node-mig-1", {"mig-3g.40gb": 1, "mig-2g.20gb": 1, "mig-1g.10gb": 2}),
        ("gpu-node-shared-1", {"shared-4": 4}),
    ):
        offer = node_offer(nodes[name].all_labels(), nodes[name].capacity())
        assert {o.shape.id: o.count for o in offer.shapes} == shapes, name


def test_every_problem_is_reported_with_file_line_and_field():
    text = """\
nodes:
  - name: gpu-node-1
    gpus: 8
    gpu: {count: -2}
  - name: Bad_Name
    cpu: lots
    taints:
      - {key: a, effect: Sometimes}
    conditions: {Ready: maybe, Hungry: true}
  - name: gpu-node-1
"""
    with pytest.raises(DocumentError) as err:
        parse_cluster(text, "c.yaml")
    lines = str(err.value).splitlines()
    assert "c.yaml:3: nodes[0].gpus: unknown key 'gpus'; did you mean 'gpu'?" in lines
    assert "c.yaml:4: nodes[0].gpu.count: must be a whole number >= 0, not -2" in lines
    assert any(
        line.startswith("c.yaml:5: nodes[1].name: 'Bad_Name' is not a valid node name")
        for line in lines
    )
    assert any(
        line.startswith("c.yaml:6: nodes[1].cpu: 'lots' is not a resource quantity")
        for line in lines
    )
    assert any(
        line.startswith("c.yaml:8: nodes[1].taints[0].effect: effect must be one of")
        for line in lines
    )
    assert "c.yaml:9: nodes[1].conditions.Ready: must be true or false" in lines
    assert any(
        line.startswith("c.yaml:9: nodes[1].conditions.Hungry: unknown key 'Hungry'")
        for line in lines
    )
    assert any(
        line.startswith("c.yaml:10: nodes[2].name: duplicate node name 'gpu-node-1'")
        for line in lines
    )


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(DocumentError) as err:
        parse_cluster("nodes:\n  - name: a\n    labels: {x: [\n", "broken.yaml")
    (problem,) = err.value.problems
    assert problem.file == "broken.yaml"
    assert problem.line >= 3
    assert "invalid YAML" in problem.message


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DocumentError, match="cannot read"):
        load_cluster_file(tmp_path / "nope.yaml")


def test_node_objects_carry_status_conditions_taints_and_capacity():
    spec = parse_cluster(
        """\
nodes:
  - name: sick
    cpu: "8"
    memory: 64Gi
    gpu: {count: 2, product: Tesla-T4, device-plugin: false}
    taints: [{key: dedicated, value: ml, effect: NoSchedule}]
    conditions: {Ready: false, DiskPressure: true}
    unschedulable: true
"""
    )
    cluster = SimCluster(spec)
    node = cluster.store.get("nodes", None, "sick")
    conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conds == {
        "Ready": "False",
        "MemoryPressure": "False",
        "DiskPressure": "True",
        "PIDPressure": "False",
        "NetworkUnavailable": "False",
    }
    assert node["spec"]["unschedulable"] is True
    # the node's own taint, then the node lifecycle controller's for its conditions and cordon
    assert [(t["key"], t.get("value"), t["effect"]) for t in node["spec"]["taints"]] == [
        ("dedicated", "ml", "NoSchedule"),
        ("node.kubernetes.io/not-ready", None, "NoSchedule"),
        ("node.kubernetes.io/disk-pressure", None, "NoSchedule"),
        ("node.kubernetes.io/unschedulable", None, "NoSchedule"),
    ]
    # GPU Feature Discovery labels are there, but without a device plugin no GPU is allocatable.
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "Tesla-T4"
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert node["status"]["allocatable"]["cpu"] == "8"
