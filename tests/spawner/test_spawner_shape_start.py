"""A shaped server started end to end (issue 29): the spawner sends the shape, the service's own
admission (tests/real_answers.py) admits it, and the pod the spawner makes asks for the shape's
resource, carries its id, says it in the server's environment and progress, and is bound by the
simulator's scheduler to the node that has that device.
"""

from __future__ import annotations

import pytest
from shaped_cluster import NODES, shaped_state, spec_of


@pytest.fixture
def sim_cluster_spec():
    return spec_of(NODES)


@pytest.fixture
def shaped_service(fake_service):
    fake_service.state = shaped_state()
    return fake_service


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


@pytest.mark.parametrize(
    "shape, resource, node, text, equivalents",
    [
        (
            "mig-3g.40gb",
            "nvidia.com/mig-3g.40gb",
            "mig-node",
            "MIG 3g.40gb of an A100-80G",
            "3/7",
        ),
        ("shared-4", "nvidia.com/gpu", "shared-node", "A10 shared ¼ (time-sliced)", "1/4"),
    ],
)
async def test_a_shaped_server_runs_on_its_device(
    spawner, sim_cluster, shaped_service, shape, resource, node, text, equivalents
):
    spawner.user_options = {"pools": [{"pool": "slice-pool", "shape": shape}], "gpus": 1}
    await spawner.start()
    pod = sim_cluster.pod("default", spawner.pod_name)
    assert pod["spec"]["nodeName"] == node  # the simulator's scheduler, by the resource
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits[resource] == "1"
    assert pod["metadata"]["labels"]["gpupool.jupyter.org/shape"] == shape
    assert pod["metadata"]["annotations"]["gpupool.jupyter.org/gpu-equivalents"] == equivalents
    env = env_of(pod)
    assert (env["GPUPOOL_SHAPE"], env["GPUPOOL_SHAPE_TEXT"]) == (shape, text)
    assert env["GPUPOOL_GPU_EQUIVALENTS"] == equivalents
    assert any(text in m for m in spawner._progress.messages), spawner._progress.messages
