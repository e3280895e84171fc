"""A real KubeSpawner 7 starts, runs and stops a GPU server on the simulated cluster."""

import pytest
from jupyterhub.objects import Hub, Server
from kubespawner import KubeSpawner

from jupyter_gpupool.sim.testing import reset_kubespawner, use_kubeconfig


class FakeUser:
    """The parts of jupyterhub.user.User a spawner reads."""

    def __init__(self, name):
        self.name = name
        self.id = 7
        self.escaped_name = name
        self.url = f"/user/{name}/"
        self.groups = []
        self.spawners = {}


@pytest.fixture
async def spawner_factory(sim_cluster):
    use_kubeconfig(sim_cluster.kubeconfig)
    made = []

    def make(**config):
        user = FakeUser("alice")
        settings = {
            "namespace": "default",
            "image": "quay.io/jupyter/base-notebook",
            "cmd": ["jupyterhub-singleuser"],
            "start_timeout": 30,
            "http_timeout": 30,
            **config,
        }
        spawner = KubeSpawner(
            hub=Hub(),
            user=user,
            api_token="secret-token",
            oauth_client_id="jupyterhub-user-alice",
            **settings,
        )
        spawner.server = Server(base_url="/user/alice/")
        made.append(spawner)
        return spawner

    yield make
    await reset_kubespawner()


async def test_start_running_stop_with_gpu_limits_and_node_selector(spawner_factory, sim_cluster):
    spawner = spawner_factory(
        node_selector={"runwhere.ai/pool": "training-pool"},
        extra_resource_limits={"nvidia.com/gpu": "2"},
        extra_labels={"gpupool.jupyter.org/pool": "training-pool"},
    )
    url = await spawner.start()
    pod = sim_cluster.pod("default", spawner.pod_name)
    assert pod is not None and pod["status"]["phase"] == "Running"
    assert pod["spec"]["nodeName"] in ("gpu-node-1", "gpu-node-2")
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert pod["spec"]["nodeSelector"] == {"runwhere.ai/pool": "training-pool"}
    assert pod["metadata"]["labels"]["gpupool.jupyter.org/pool"] == "training-pool"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["JUPYTERHUB_API_TOKEN"] == "secret-token"
    assert url == f"http://{pod['status']['podIP']}:8888"
    spawner.server.ip, spawner.server.port = pod["status"]["podIP"], 8888  # as the hub records it
    assert await spawner.poll() is None  # running

    # progress() reads the event reflector: the scheduler's event is there
    messages = []
    async for event in spawner.progress():
        messages.append(event["message"])
        if len(messages) > 5:
            break
    assert any("Successfully assigned default/jupyter-alice to gpu-node-" in m for m in messages)

    await spawner.stop()
    assert sim_cluster.pod("default", spawner.pod_name) is None
    assert await spawner.poll() is not None  # stopped


async def test_start_times_out_when_no_node_has_the_gpus(spawner_factory, sim_cluster):
    spawner = spawner_factory(
        node_selector={"runwhere.ai/pool": "inference-pool"},
        extra_resource_limits={"nvidia.com/gpu": "8"},
        start_timeout=3,
    )
    with pytest.raises(TimeoutError):
        await spawner.start()
    events = sim_cluster.events_for("default", spawner.pod_name)
    assert any(
        e["reason"] == "FailedScheduling"
        and e["message"]
        == "0/10 nodes are available: 7 node(s) didn't match Pod's node affinity/selector, "
        "8 Insufficient nvidia.com/gpu. preemption: "
        "0/10 nodes are available: 3 No preemption victims found for incoming pod, "
        "7 Preemption is not helpful for scheduling."
        for e in events
    )
    # the hub stops a spawner whose start failed: the pending pod goes away at once
    await spawner.stop()
    assert sim_cluster.pod("default", spawner.pod_name) is None
