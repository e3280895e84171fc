"""Registry backends: pool files (default) and a ConfigMap, at start, on change and on reload."""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys

import pytest
import yaml

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.service.errors import ApiError
from jupyter_gpupool.service.registry import documents as layout

POOL = """kind: pool
version: v0.1
pool: {name: t4-pool, description: "T4s"}
nodes:
  node-6: {gpu-type: T4-16G}
"""
QUOTA = """kind: quota
version: v0.1
quota: {name: caps}
default: {gpu: 3}
pools:
  t4-pool:
    user-default: {guaranteed: 0, limit: 2}
"""


async def test_a_bad_file_stops_the_service_with_every_problem(sim_cluster, pools_dir):
    (pools_dir / "broken.yaml").write_text(
        "kind: pool\nversion: v0.1\npool:\n  name: Bad Name\nnodes:\n  n1: {gpu_type: x}\n"
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "jupyter_gpupool.service",
            "--port=0",
            f"--pools={pools_dir}",
            f"--kubeconfig={sim_cluster.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"{pools_dir}/broken.yaml:4: pool.name: 'Bad Name' is not a valid" in result.stderr
    assert f"{pools_dir}/broken.yaml:6: nodes.n1.gpu_type: unknown key 'gpu_type'" in result.stderr
    assert "Traceback" not in result.stderr


async def test_other_bad_settings_stop_it_too(sim_cluster, tmp_path):
    a_file = tmp_path / "pools.yaml"
    a_file.write_text(POOL)
    for args, message in [
        ([f"--pools={a_file}"], "is not a directory"),
        ([], "no pools directory"),
        (["--pool-label=not a label", "--pools=x"], "not a valid Kubernetes label key"),
        (["--registry=etcd"], "registry"),
    ]:
        result = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "jupyter_gpupool.service",
                "--port=0",
                f"--kubeconfig={sim_cluster.kubeconfig}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0, args
        assert message in result.stderr, (args, result.stderr[-500:])


async def test_files_are_written_whole_one_document_per_file(service, pools_dir):
    admin = service.admin()
    second = POOL.replace("t4-pool", "t4-b").replace("  node-6: {gpu-type: T4-16G}\n", "  {}\n")
    await admin.apply_pools(POOL + "---\n" + second)
    assert sorted(p.name for p in pools_dir.iterdir()) == [
        "compute-pool.yaml",
        "dev-pool.yaml",
        "inference-pool.yaml",
        "quotas.yaml",
        "t4-b.yaml",
        "t4-pool.yaml",
        "training-pool.yaml",
    ]  # and no temporary file left behind
    doc = yaml.safe_load((pools_dir / "t4-pool.yaml").read_text())
    assert doc == {
        "kind": "pool",
        "version": "v0.1",
        "pool": {"name": "t4-pool", "description": "T4s"},
        "nodes": {"node-6": {"gpu-type": "T4-16G"}},
    }


@pytest.fixture
def empty_pools(pools_dir):
    for f in pools_dir.iterdir():
        f.unlink()
    return pools_dir


async def test_the_configmap_registry_survives_restarts(start_service, sim_cluster, empty_pools):
    traits = dict(registry="configmap", configmap_namespace="default", configmap_name="pools")
    first = await start_service(**traits)
    assert sim_cluster.store.find("configmaps", "default", "pools") is None
    admin = first.admin()
    await admin.apply_pools(POOL)
    await admin.put_quotas(QUOTA)
    cm = copy.deepcopy(sim_cluster.store.get("configmaps", "default", "pools"))
    assert sorted(cm["data"]) == ["caps.yaml", "t4-pool.yaml"]
    assert yaml.safe_load(cm["data"]["t4-pool.yaml"])["pool"]["name"] == "t4-pool"
    await first.stop()

    second = await start_service(reload_interval=0.1, **traits)
    assert list(second.ctx.state.registry.pools) == ["t4-pool"]
    assert second.ctx.state.registry.quota("t4-pool").user_default.limit == 2
    # someone edits the ConfigMap: picked up live
    cm = copy.deepcopy(sim_cluster.store.get("configmaps", "default", "pools"))
    cm["data"]["caps.yaml"] = QUOTA.replace("limit: 2", "limit: 1")
    sim_cluster.store.replace("configmaps", "default", "pools", cm)
    await sim_cluster.wait_for(
        lambda: second.ctx.state.registry.quota("t4-pool").user_default.limit == 1, 5
    )
    # a change by someone else between our read and our write is refused rather than lost
    store = second.ctx.pools.store
    current = await store.read()
    cm = copy.deepcopy(sim_cluster.store.get("configmaps", "default", "pools"))
    cm["data"]["other.yaml"] = POOL.replace("t4-pool", "x-pool").replace("node-6", "gpu-node-5")
    sim_cluster.store.replace("configmaps", "default", "pools", cm)
    edit = layout.replace_quotas(current, QUOTA.replace("gpu: 3", "gpu: 5"), store.key_for)
    with pytest.raises(ApiError) as e:
        await store.write(edit)
    assert e.value.status == 409 and "changed by someone else" in e.value.message
    assert "other.yaml" in sim_cluster.store.get("configmaps", "default", "pools")["data"]
    await second.stop()

    # a ConfigMap that does not load stops the next start, with the problems
    cm = copy.deepcopy(sim_cluster.store.get("configmaps", "default", "pools"))
    cm["data"]["bad.yaml"] = "kind: pool\npool: {name: 'no good'}\n"
    sim_cluster.store.replace("configmaps", "default", "pools", cm)
    with pytest.raises(DocumentError) as e:
        await start_service(**traits)
    assert "bad.yaml:2: pool.name" in str(e.value)


async def test_changes_while_the_store_does_not_load_are_refused(service, pools_dir):
    (pools_dir / "zz.yaml").write_text("kind: nonsense\n")
    with pytest.raises(GPUPoolError) as e:
        await service.admin().put_quotas(QUOTA.replace("t4-pool", "dev-pool"))
    assert e.value.status == 409 and "zz.yaml:1: kind: unknown kind 'nonsense'" in e.value.message


async def test_a_huge_file_in_the_pools_directory_is_refused_before_it_is_read(tmp_path):
    from jupyter_gpupool.core.documents.yaml_reader import MAX_TEXT_BYTES
    from jupyter_gpupool.service.registry.store import FileStore

    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:  # sparse: no disk used, but far over the limit
        f.truncate(MAX_TEXT_BYTES * 50)
    with pytest.raises(DocumentError) as e:
        await FileStore(tmp_path).read()
    [problem] = e.value.problems
    assert str(problem) == (
        f"{huge}:1: (file): {MAX_TEXT_BYTES * 50} bytes is too large; at most {MAX_TEXT_BYTES}"
    )
