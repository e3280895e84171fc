"""The demo's training-pool may re-cut gpu-node-2 (issue 41), while the examples it copies
stay in gpuctl's format: the section is added to the demo's own copy, once."""

from jupyter_gpupool.demo.run import DemoOptions, default_pools_dir, demo_pools_dir
from jupyter_gpupool.poolfiles import load_paths


def test_the_demos_copy_of_training_pool_allows_re_cutting_gpu_node_2(tmp_path):
    pools = demo_pools_dir(DemoOptions(state_dir=tmp_path))
    recut = load_paths([pools]).pool("training-pool").recut
    assert recut is not None and recut.nodes == ("gpu-node-2",)
    assert recut.configs == ("all-disabled", "all-1g.10gb", "all-balanced")
    # the example itself has no recut, and a second start adds nothing
    source = default_pools_dir()
    assert source is not None
    assert load_paths([source]).pool("training-pool").recut is None
    text = (pools / "training-pool.yaml").read_text()
    assert demo_pools_dir(DemoOptions(state_dir=tmp_path)) == pools
    assert (pools / "training-pool.yaml").read_text() == text
