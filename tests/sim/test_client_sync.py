"""The sync `kubernetes` client (what scripts and many admins' tools use) against the simulator.

The simulator serves from this test's event loop, so each blocking client call runs in a thread.
"""

import asyncio

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException


@pytest.fixture
def sync_core(sim_cluster):
    api = kubernetes.config.new_client_from_config(config_file=sim_cluster.kubeconfig)
    yield kubernetes.client.CoreV1Api(api)
    api.close()


def run(fn, *args, **kwargs):
    return asyncio.to_thread(fn, *args, **kwargs)


async def test_crud_and_every_patch_kind(sync_core):
    core = sync_core
    body = {
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]}]},
    }
    await run(core.create_namespaced_pod, "default", body)
    pod = await run(core.read_namespaced_pod, "p", "default")
    assert pod.metadata.labels == {"a": "1"}
    # strategic merge: env merges by name inside the container merged by name
    smp = {
        "spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]},
        "metadata": {"labels": {"b": "2"}},
    }
    with pytest.raises(ApiException) as err:  # env is immutable in a pod: refused, like Kubernetes
        await run(core.patch_namespaced_pod, "p", "default", smp)
    assert err.value.status == 422
    await run(core.patch_namespaced_pod, "p", "default", {"metadata": {"labels": {"b": "2"}}})
    cm = {"metadata": {"name": "cm"}, "data": {"x": "1", "y": "2"}}
    await run(core.create_namespaced_config_map, "default", cm)
    merged = await run(
        core.patch_namespaced_config_map, "cm", "default", {"data": {"x": None, "z": "3"}}
    )
    assert merged.data == {"y": "2", "z": "3"}
    jp = [{"op": "replace", "path": "/data/y", "value": "20"}]
    patched = await run(core.patch_namespaced_config_map, "cm", "default", jp)  # a list: JSON patch
    assert patched.data == {"y": "20", "z": "3"}
    patched = await run(
        core.patch_namespaced_config_map,
        "cm",
        "default",
        {"data": {"z": None}},
        _content_type="application/merge-patch+json",
    )
    assert patched.data == {"y": "20"}
    pods = await run(core.list_namespaced_pod, "default", label_selector="a=1,b=2")
    assert [p.metadata.name for p in pods.items] == ["p"]
    await run(core.delete_namespaced_pod, "p", "default", grace_period_seconds=0)
    with pytest.raises(ApiException) as err:
        await run(core.read_namespaced_pod, "p", "default")
    assert err.value.status == 404


async def test_watch_with_resume_and_410(sync_core, sim_cluster):
    core = sync_core
    listed = await run(core.list_namespaced_config_map, "default")
    rv = listed.metadata.resource_version
    await run(core.create_namespaced_config_map, "default", {"metadata": {"name": "w1"}})

    def first_event(resource_version):
        w = kubernetes.watch.Watch()
        for ev in w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=resource_version,
            timeout_seconds=5,
        ):
            w.stop()
            return ev["type"], ev["object"].metadata.name
        return None

    assert await run(first_event, rv) == ("ADDED", "w1")
    sim_cluster.faults.expire_history()
    with pytest.raises(ApiException) as err:
        await run(first_event, rv)
    assert err.value.status == 410


async def test_status_subresource_and_node_patch(sync_core):
    core = sync_core
    node = await run(core.patch_node, "gpu-node-3", {"spec": {"unschedulable": True}})
    assert node.spec.unschedulable is True
    node = await run(
        core.patch_node_status,
        "gpu-node-3",
        {"status": {"conditions": [{"type": "DiskPressure", "status": "True"}]}},
    )
    assert {c.type: c.status for c in node.status.conditions}["DiskPressure"] == "True"
    assert node.spec.unschedulable is True
