"""kubernetes_asyncio, the client the product uses, against the simulated API server."""

import asyncio

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException
from waiting import async_wait_for


@pytest.fixture
async def core(sim_cluster):
    cfg = client.Configuration()
    await config.load_kube_config(config_file=sim_cluster.kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        yield client.CoreV1Api(api)


def pod_body(name, labels=None, gpus=0, **spec):
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
            **spec,
        },
    }


async def test_list_nodes_and_read_one(core):
    nodes = await core.list_node()
    assert len(nodes.items) == 10
    node = await core.read_node("gpu-node-1")
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["runwhere.ai/pool"] == "training-pool"


async def test_create_read_replace_delete_configmap(core):
    created = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    created.data["b"] = "2"
    replaced = await core.replace_namespaced_config_map("cm", "default", created)
    assert replaced.data == {"a": "1", "b": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    # a stale resourceVersion is a 409 Conflict, as with optimistic concurrency in Kubernetes
    created.data["c"] = "3"
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_config_map("cm", "default", created)
    assert err.value.status == 409
    await core.delete_namespaced_config_map("cm", "default")
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("cm", "default")
    assert err.value.status == 404
    assert (
        '"configmaps \\"cm\\" not found"' in err.value.body
        or 'configmaps \\"cm\\" not found' in err.value.body
    )


async def test_generate_name_duplicates_and_invalid_objects(core):
    a = await core.create_namespaced_pod(
        "default", {"metadata": {"generateName": "jupyter-"}, "spec": pod_body("x")["spec"]}
    )
    assert a.metadata.name.startswith("jupyter-") and len(a.metadata.name) == len("jupyter-") + 5
    await core.create_namespaced_pod("default", pod_body("dup"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_body("dup"))
    assert err.value.status == 409 and "AlreadyExists" in err.value.body
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod(
            "default", {"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}}
        )
    assert err.value.status == 422
    assert "spec.containers: Required value" in err.value.body
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("nope", pod_body("p"))
    assert err.value.status == 404 and 'namespaces \\"nope\\" not found' in err.value.body
    bad_gpu = pod_body("frac")
    bad_gpu["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "0.5"}}
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", bad_gpu)
    assert err.value.status == 422 and "must be an integer" in err.value.body


async def test_every_patch_kind(core):
    await core.create_namespaced_pod("default", pod_body("p", {"app": "nb", "tier": "x"}))
    # strategic merge (the client's default for dicts): containers merge by name
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        {
            "metadata": {"labels": {"tier": None, "pool": "dev"}},
            "spec": {"containers": [{"name": "main", "image": "busybox:2"}]},
        },
    )
    assert patched.metadata.labels == {"app": "nb", "pool": "dev"}
    assert [c.image for c in patched.spec.containers] == ["busybox:2"]
    # JSON merge patch
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"annotations": {"a": "1"}}},
        _content_type="application/merge-patch+json",
    )
    assert patched.metadata.annotations == {"a": "1"}
    # JSON patch (a list of operations)
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        [{"op": "add", "path": "/metadata/labels/extra", "value": "yes"}],
        _content_type="application/json-patch+json",
    )
    assert patched.metadata.labels["extra"] == "yes"
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p",
            "default",
            [{"op": "test", "path": "/metadata/labels/app", "value": "other"}],
            _content_type="application/json-patch+json",
        )
    assert err.value.status == 422
    # changing an immutable pod field is refused
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod("p", "default", {"spec": {"restartPolicy": "Never"}})
    assert err.value.status == 422 and "Forbidden" in err.value.body


async def test_status_subresource_is_separate(core, sim_cluster):
    sim_cluster.store.graceful_pods = False
    await core.create_namespaced_pod("default", pod_body("s", schedulerName="someone-else"))
    # writes to the main resource never change status
    p = await core.patch_namespaced_pod("s", "default", {"status": {"phase": "Running"}})
    assert p.status.phase == "Pending"
    # writes to /status change only status
    p = await core.patch_namespaced_pod_status(
        "s", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}}
    )
    assert p.status.phase == "Running"
    assert not p.metadata.labels
    node = await core.patch_node_status(
        "gpu-node-1", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert ready.status == "False"
    assert len(node.status.conditions) == 5  # merged by type, not replaced


async def test_label_and_field_selectors(core):
    for name, labels in (
        ("a", {"app": "nb", "pool": "dev"}),
        ("b", {"app": "nb"}),
        ("c", {"app": "web"}),
    ):
        await core.create_namespaced_pod("default", pod_body(name, labels))
    names = lambda lst: sorted(i.metadata.name for i in lst.items)  # noqa: E731
    assert names(await core.list_namespaced_pod("default", label_selector="app=nb")) == ["a", "b"]
    assert names(
        await core.list_namespaced_pod("default", label_selector="app in (nb,web),!pool")
    ) == ["b", "c"]
    assert names(await core.list_namespaced_pod("default", field_selector="metadata.name!=a")) == [
        "b",
        "c",
    ]
    assert names(await core.list_pod_for_all_namespaces(label_selector="pool=dev")) == ["a"]
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default", label_selector="app in (nb")
    assert err.value.status == 400
    # deletecollection with a selector
    await core.delete_collection_namespaced_pod(
        "default", label_selector="app=nb", grace_period_seconds=0
    )
    assert names(await core.list_namespaced_pod("default")) == ["c"]


async def test_pagination_with_limit_and_continue(core):
    for i in range(5):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"cm{i}"}})
    seen, token = [], None
    while True:
        page = await core.list_namespaced_config_map("default", limit=2, _continue=token)
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"cm{i}" for i in range(5)]


async def collect(w, stream, n, timeout=5):
    out = []

    async def run():
        async for ev in stream:
            out.append((ev["type"], ev["object"].metadata.name))
            if len(out) >= n:
                w.stop()
                return

    await asyncio.wait_for(run(), timeout)
    return out


async def watch_opened(cluster, resource):
    """Wait until the simulated API server holds an open watch on ``resource``: changes made
    from then on reach it as changes, after its initial list (a sleep would only make that
    likely)."""
    await async_wait_for(
        lambda: any(w.resource == resource and not w.closed for w in cluster.store.watchers),
        what=f"a watch on {resource} to reach the simulated API server",
    )


async def test_fresh_watch_sends_added_for_existing_then_changes(core, sim_cluster):
    await core.create_namespaced_config_map("default", {"metadata": {"name": "old"}})
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_config_map, "default", timeout_seconds=10)

    async def change():
        await watch_opened(sim_cluster, "configmaps")
        await core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})
        await core.patch_namespaced_config_map("new", "default", {"data": {"x": "1"}})
        await core.delete_namespaced_config_map("old", "default")

    task = asyncio.create_task(change())
    events = await collect(w, stream, 4)
    await task
    assert events == [("ADDED", "old"), ("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "old")]


async def test_watch_resumes_from_resource_version(core):
    listed = await core.list_namespaced_config_map("default")
    rv = listed.metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "after1"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "after2"}})
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5
    )
    assert await collect(w, stream, 2) == [("ADDED", "after1"), ("ADDED", "after2")]


async def test_watch_from_expired_resource_version_gets_410(core, sim_cluster):
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    sim_cluster.faults.expire_history()
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        async for _ in w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=5,
        ):
            pass
    assert err.value.status == 410


async def test_history_window_expires_old_versions(sim_cluster):
    store = sim_cluster.store
    store.history = type(store.history)(maxlen=3)
    start = store.rv
    for i in range(5):
        store.create("configmaps", "default", {"metadata": {"name": f"h{i}"}})
    from jupyter_gpupool.sim.objects.errors import ApiError

    with pytest.raises(ApiError) as err:
        store.watch("configmaps", "default", str(start))
    assert err.value.code == 410
    w = store.watch("configmaps", "default", str(store.rv - 2))
    assert [w.queue.get_nowait()[1]["metadata"]["name"] for _ in range(2)] == ["h3", "h4"]


async def test_watch_timeout_seconds_ends_the_stream(core):
    w = watch.Watch()
    loop = asyncio.get_running_loop()
    start = loop.time()
    async for _ in w.stream(core.list_namespaced_secret, "kube-system", timeout_seconds=1):
        pass
    assert 0.9 <= loop.time() - start < 5


async def test_watch_selectors_turn_label_changes_into_added_and_deleted(core, sim_cluster):
    await core.create_namespaced_pod("default", pod_body("p", {"pool": "dev"}))
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_pod, "default", label_selector="pool=train", timeout_seconds=10
    )

    async def change():
        await watch_opened(sim_cluster, "pods")
        await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"pool": "train"}}})
        await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"pool": "dev"}}})

    task = asyncio.create_task(change())
    events = await collect(w, stream, 2)
    await task
    assert events == [("ADDED", "p"), ("DELETED", "p")]


async def test_owner_references_are_garbage_collected(core):
    owner = await core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    await core.create_namespaced_secret(
        "default", {"metadata": {"name": "dep", "ownerReferences": [ref]}, "stringData": {"k": "v"}}
    )
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "orphan-me", "ownerReferences": [ref]}}
    )
    secret = await core.read_namespaced_secret("dep", "default")
    assert secret.data == {"k": "dg=="}  # stringData is stored base64-encoded in data
    await core.delete_namespaced_config_map("owner", "default")
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_secret("dep", "default")
    assert err.value.status == 404
    with pytest.raises(ApiException):
        await core.read_namespaced_config_map("orphan-me", "default")


async def test_orphan_propagation_keeps_dependents(core):
    owner = await core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "kept", "ownerReferences": [ref]}}
    )
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    kept = await core.read_namespaced_config_map("kept", "default")
    assert not kept.metadata.owner_references


async def test_pod_runs_and_graceful_delete(core, sim_cluster):
    await core.create_namespaced_pod(
        "default", pod_body("gpu", gpus=2, node_selector={"runwhere.ai/pool": "training-pool"})
    )
    await sim_cluster.wait_for(
        lambda: sim_cluster.pod("default", "gpu")["status"]["phase"] == "Running"
    )
    pod = await core.read_namespaced_pod("gpu", "default")
    assert pod.spec.node_name in ("gpu-node-1", "gpu-node-2")
    assert pod.status.pod_ip and pod.status.container_statuses[0].ready
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    deleted = await core.delete_namespaced_pod("gpu", "default")
    assert deleted.metadata.deletion_timestamp is not None
    await sim_cluster.wait_for(lambda: sim_cluster.pod("default", "gpu") is None)


async def test_namespaces_pvcs_services_and_deleting_a_namespace(core):
    await core.create_namespace({"metadata": {"name": "user-ns"}})
    pvc = await core.create_namespaced_persistent_volume_claim(
        "user-ns",
        {
            "metadata": {"name": "claim-alice"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
    )
    assert pvc.status.phase == "Bound"
    svc = await core.create_namespaced_service(
        "user-ns", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert svc.spec.cluster_ip
    await core.delete_namespace("user-ns")
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_persistent_volume_claim("claim-alice", "user-ns")
    assert err.value.status == 404


async def test_injected_faults_answer_500(core, sim_cluster):
    sim_cluster.faults.configure(error_rate=1.0, paths=["/configmaps"])
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map("default")
    assert err.value.status == 500
    assert len((await core.list_node()).items) == 10  # other paths unaffected
    sim_cluster.faults.configure(error_rate=0.5, seed=7)
    results = []
    for _ in range(40):
        try:
            await core.list_namespace()
            results.append(True)
        except ApiException:
            results.append(False)
    assert 5 < results.count(False) < 35
    sim_cluster.faults.configure(error_rate=0)


async def test_cut_watches_ends_streams_and_resume_sees_nothing_lost(core, sim_cluster):
    listed = await core.list_namespaced_config_map("default")
    w = watch.Watch()
    got = []

    async def run():
        async for ev in w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=30,
        ):
            got.append(ev["object"].metadata.name)

    task = asyncio.create_task(run())
    await sim_cluster.wait_for(lambda: sim_cluster.store.watchers)
    assert sim_cluster.faults.cut_watches() == 1
    await asyncio.wait_for(task, 5)  # the stream ended
    await core.create_namespaced_config_map("default", {"metadata": {"name": "during"}})
    w2 = watch.Watch()
    stream = w2.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    assert await collect(w2, stream, 1) == [("ADDED", "during")]
