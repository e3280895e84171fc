"""The environment contract between GPUPoolSpawner and the notebook side (pure)."""

from __future__ import annotations

from jupyter_gpupool.core.pools.placement import (
    SERVER_TOKEN_SCOPES,
    Placement,
    placement_env,
    service_url_from,
)
from jupyter_gpupool.service.web.auth import USE_SCOPE

ADMISSION = {
    "id": "adm7",
    "pool": "training-pool",
    "platform": "a100",
    "gpu_type": "A100-80G",
    "gpus": 2,
    "over_quota": True,
}


def test_placement_env_for_an_admission():
    assert placement_env(ADMISSION, "http://svc/services/gpupool/") == [
        {"name": "GPUPOOL_POOL", "value": "training-pool"},
        {"name": "GPUPOOL_PLATFORM", "value": "a100"},
        {"name": "GPUPOOL_GPUS", "value": "2"},
        {"name": "GPUPOOL_GPU_TYPE", "value": "A100-80G"},
        {"name": "GPUPOOL_OVER_QUOTA", "value": "true"},
        {"name": "GPUPOOL_ADMISSION", "value": "adm7"},
        {"name": "GPUPOOL_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "GPUPOOL_SERVICE_URL", "value": "http://svc/services/gpupool/"},
    ]


def test_a_cpu_only_server_has_no_gpu_type_and_no_url_is_left_out():
    env = placement_env({"pool": "compute-pool", "gpus": 0, "gpu_type": "T4"}, "")
    values = {e["name"]: e.get("value") for e in env}
    assert values["GPUPOOL_GPUS"] == "0" and values["GPUPOOL_GPU_TYPE"] == ""
    assert values["GPUPOOL_OVER_QUOTA"] == "false"
    assert "GPUPOOL_SERVICE_URL" not in values


def test_written_and_read_back():
    environ = {
        e["name"]: e.get("value", "gpu-node-1")
        for e in placement_env(ADMISSION, "http://svc/services/gpupool")
    }
    environ.update(
        JUPYTERHUB_API_URL="http://hub:8081/hub/api",
        JUPYTERHUB_API_TOKEN="t",
        JUPYTERHUB_USER="alice",
        JUPYTERHUB_SERVER_NAME="big",
        CUDA_VISIBLE_DEVICES="0,1",
    )
    assert Placement.from_environ(environ) == Placement(
        pool="training-pool",
        platform="a100",
        gpus=2,
        gpu_type="A100-80G",
        over_quota=True,
        node="gpu-node-1",
        admission="adm7",
        service_url="http://svc/services/gpupool/",
        hub_api_url="http://hub:8081/hub/api",
        token="t",
        user="alice",
        server="big",
        cuda_visible_devices="0,1",
        nvidia_visible_devices=None,
    )


def test_an_empty_environment_is_no_pool():
    p = Placement.from_environ({"GPUPOOL_GPUS": "lots"})
    assert (p.pool, p.gpus, p.in_pool, p.service_url) == (None, 0, False, None)
    assert p.label() == "not in a GPU pool"


def test_labels_for_the_status_bar():
    assert Placement(pool="training-pool", gpus=2, gpu_type="A100-80G").label() == (
        "2 \u00d7 A100-80G · training-pool"
    )
    assert Placement(pool="compute-pool").label() == "CPU · compute-pool"
    assert Placement(pool="dev-pool", gpus=1).label() == "1 \u00d7 GPU · dev-pool"


def test_the_service_url_falls_back_to_the_hubs_public_url():
    assert service_url_from({"JUPYTERHUB_PUBLIC_URL": "https://hub.example.org/"}) == (
        "https://hub.example.org/services/gpupool/"
    )
    assert service_url_from({}) is None


def test_the_server_token_may_use_pools_and_the_users_servers():
    assert USE_SCOPE in SERVER_TOKEN_SCOPES
    # the service lets in only tokens with access to it (tests/pages/test_lab_browser.py walks it)
    assert "access:services!service=gpupool" in SERVER_TOKEN_SCOPES
    # JupyterHub's default `server` role, kept
    assert {"users:activity!user", "access:servers!server"} <= set(SERVER_TOKEN_SCOPES)


SHAPED = {
    **ADMISSION,
    "gpus": 1,
    "over_quota": False,
    "shape": "mig-1g.10gb",
    "shape_text": "MIG 1g.10gb of an A100-80G",
    "resource": "nvidia.com/mig-1g.10gb",
    "gpu_equivalents": "1/7",
}


def test_a_shape_is_written_and_read_back():
    env = placement_env(SHAPED, "")
    values = {e["name"]: e.get("value", "node-1") for e in env}
    assert (
        values["GPUPOOL_SHAPE"],
        values["GPUPOOL_SHAPE_TEXT"],
        values["GPUPOOL_GPU_EQUIVALENTS"],
    ) == ("mig-1g.10gb", "MIG 1g.10gb of an A100-80G", "1/7")
    p = Placement.from_environ(values)
    assert (p.shape, p.shape_text, p.gpu_equivalents) == (
        "mig-1g.10gb",
        "MIG 1g.10gb of an A100-80G",
        "1/7",
    )
    assert p.label() == "MIG 1g.10gb of an A100-80G · training-pool"


def test_whole_gpus_and_answers_without_shapes_read_as_before():
    whole = {
        **ADMISSION,
        "shape": "whole",
        "shape_text": "2 \u00d7 A100-80G",
        "gpu_equivalents": "2",
    }
    p = Placement.from_environ({e["name"]: e.get("value", "") for e in placement_env(whole, "")})
    assert (p.shape, p.gpu_equivalents) == ("whole", "2")
    assert p.label() == "2 \u00d7 A100-80G · training-pool"
    # a service that knows no shapes: no such variables (the list as before, above)
    names = [e["name"] for e in placement_env(ADMISSION, "")]
    assert not [n for n in names if "SHAPE" in n or "EQUIVALENTS" in n]
    # a CPU-only server has no shape, whatever the answer says
    cpu = {"pool": "compute-pool", "gpus": 0, "shape": None, "gpu_equivalents": "0"}
    values = {e["name"]: e.get("value") for e in placement_env(cpu, "")}
    assert (values["GPUPOOL_SHAPE"], values["GPUPOOL_SHAPE_TEXT"]) == ("", "")
    assert Placement.from_environ({"GPUPOOL_POOL": "compute-pool"}).label() == "CPU · compute-pool"
