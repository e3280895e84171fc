"""The demo's record of node labels (STATE/node-labels.json), on a simulated cluster in-process:
written on each label change, against the cluster file, and put back into a new cluster."""

import json

import pytest

from jupyter_gpupool.demo.nodelabels import NodeLabelKeeper, label_changes
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec


def labels(cluster, node):
    return cluster.store.get("nodes", None, node)["metadata"]["labels"]


def test_label_changes_are_what_turns_one_set_into_the_other():
    base = {"a": "1", "b": "2", "c": "3"}
    now = {"a": "1", "b": "20", "d": "4"}
    assert label_changes(base, now) == {"b": "20", "c": None, "d": "4"}
    assert label_changes(base, base) == {}


def test_changes_are_written_as_they_happen_and_restored_into_a_new_cluster(tmp_path):
    path = tmp_path / "node-labels.json"
    first = SimCluster(example_cluster_spec())
    keeper = NodeLabelKeeper(first, path)
    assert keeper.restore() == []  # no file yet: the cluster file alone
    keeper.start()
    first.label_node("gpu-node-2", "runwhere.ai/pool", "inference-pool")
    first.label_node("gpu-node-5", "runwhere.ai/pool", None)
    first.cordon("gpu-node-1")  # not a label: not kept
    assert json.loads(path.read_text()) == {
        "gpu-node-2": {"runwhere.ai/pool": "inference-pool"},
        "gpu-node-5": {"runwhere.ai/pool": None},
    }
    # a label put back as the cluster file has it is no change any more
    first.label_node("gpu-node-5", "runwhere.ai/pool", "dev-pool")
    assert json.loads(path.read_text()) == {"gpu-node-2": {"runwhere.ai/pool": "inference-pool"}}
    keeper.stop()
    first.label_node("gpu-node-3", "x", "y")  # after stop: not recorded
    assert "gpu-node-3" not in json.loads(path.read_text())

    second = SimCluster(example_cluster_spec())
    assert NodeLabelKeeper(second, path).restore() == ["gpu-node-2"]
    assert labels(second, "gpu-node-2")["runwhere.ai/pool"] == "inference-pool"
    assert labels(second, "gpu-node-5") == labels(first, "gpu-node-5")
    assert labels(second, "gpu-node-3") == labels(SimCluster(example_cluster_spec()), "gpu-node-3")


def test_a_node_the_cluster_file_no_longer_has_is_left_out(tmp_path):
    path = tmp_path / "node-labels.json"
    path.write_text(json.dumps({"gone-node": {"a": "b"}, "node-6": {"runwhere.ai/pool": "p"}}))
    cluster = SimCluster(example_cluster_spec())
    assert NodeLabelKeeper(cluster, path).restore() == ["node-6"]
    assert labels(cluster, "node-6")["runwhere.ai/pool"] == "p"


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '{"node-6": {"k": 1}}'])
def test_a_file_the_demo_did_not_write_stops_the_start_and_is_kept(tmp_path, text):
    path = tmp_path / "node-labels.json"
    path.write_text(text)
    with pytest.raises(RuntimeError, match="is not the demo's node labels; move it away"):
        NodeLabelKeeper(SimCluster(example_cluster_spec()), path).restore()
    assert path.read_text() == text
