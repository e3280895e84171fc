"""Admission overrides -> KubeSpawner trait values (pure; whole dicts compared)."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpupool.core.admission.overrides import whole_gpu_terms
from jupyter_gpupool.core.admission.walk import AdmissionRequest, build_overrides
from jupyter_gpupool.core.pools.model import DEFAULT_POOL, Defaults, Pool, Registry
from jupyter_gpupool.spawner.podtraits import (
    POOL_TRAITS,
    admission_labels,
    admission_overrides,
    escape_template,
    pool_trait_values,
)

#: What a hub admin configured (KubeSpawner's defaults for the rest).
CONFIGURED = {
    "node_selector": {"disk": "ssd"},
    "tolerations": {
        "b": {"key": "b", "operator": "Exists"},
        "a": {"key": "a", "operator": "Exists"},
    },
    "node_affinity_required": [],
    "node_affinity_preferred": [],
    "extra_labels": {"team": "{username}"},
    "extra_annotations": {},
    "environment": {"HUB": "1"},
    "image": "quay.io/jupyter/base-notebook",
    "cpu_guarantee": None,
    "cpu_limit": 4.0,
    "mem_guarantee": None,
    "mem_limit": None,
    "extra_resource_guarantees": {},
    "extra_resource_limits": {},
}

TRAINING_ADMISSION = {
    "id": "a1b2c3",
    "pool": "training-pool",
    "user": "alice",
    "server": "",
    "gpus": 2,
    "over_quota": True,
    "overrides": {
        "resources": {
            "requests": {"cpu": "1500m", "memory": "16Gi", "nvidia.com/gpu": "2"},
            "limits": {"nvidia.com/gpu": "2", "memory": "64Gi"},
        },
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-latest",
        "nodeSelector": {"runwhere.ai/pool": "training-pool", "runwhere.ai/gpu-type": "A100-80G"},
        "tolerations": [
            {"key": "a", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "labels": {
            "gpupool.jupyter.org/pool": "training-pool",
            "runwhere.ai/pool": "training-pool",
            "gpupool.jupyter.org/user": "alice",
            "gpupool.jupyter.org/server": "",
            "gpupool.jupyter.org/gpus": "2",
            "gpupool.jupyter.org/over-quota": "true",
            "gpupool.jupyter.org/charged": "group-ml-research-4c1f0a2e",
            "gpupool.jupyter.org/admission": "a1b2c3",
        },
        "annotations": {"gpupool.jupyter.org/user": "alice", "gpupool.jupyter.org/groups": "ml"},
        "env": [{"name": "HF_HOME", "value": "/scratch/{hf}"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": ["gpu-node-1"],
                                }
                            ]
                        },
                    }
                ]
            }
        },
    },
}


def test_an_admission_onto_configured_traits():
    assert pool_trait_values(CONFIGURED, TRAINING_ADMISSION["overrides"]) == {
        "node_selector": {
            "disk": "ssd",
            "runwhere.ai/pool": "training-pool",
            "runwhere.ai/gpu-type": "A100-80G",
        },
        "tolerations": [
            {"key": "a", "operator": "Exists"},
            {"key": "b", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "node_affinity_required": [],
        "node_affinity_preferred": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/hostname",
                            "operator": "In",
                            "values": ["gpu-node-1"],
                        }
                    ]
                },
            }
        ],
        "extra_labels": {
            "team": "{username}",  # configured templates are KubeSpawner's to expand
            "gpupool.jupyter.org/pool": "training-pool",
            "runwhere.ai/pool": "training-pool",
            "gpupool.jupyter.org/user": "alice",
            "gpupool.jupyter.org/server": "",
            "gpupool.jupyter.org/gpus": "2",
            "gpupool.jupyter.org/over-quota": "true",
            "gpupool.jupyter.org/charged": "group-ml-research-4c1f0a2e",
            "gpupool.jupyter.org/admission": "a1b2c3",
        },
        "extra_annotations": {
            "gpupool.jupyter.org/user": "alice",
            "gpupool.jupyter.org/groups": "ml",
        },
        "environment": {"HUB": "1", "HF_HOME": "/scratch/{{hf}}"},
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-latest",
        "cpu_guarantee": 1.5,
        "cpu_limit": 4.0,
        "mem_guarantee": 16 * 2**30,
        "mem_limit": 64 * 2**30,
        "extra_resource_guarantees": {"nvidia.com/gpu": "2"},
        "extra_resource_limits": {"nvidia.com/gpu": "2"},
    }


def test_the_inputs_are_not_changed():
    configured = copy.deepcopy(CONFIGURED)
    admission = copy.deepcopy(TRAINING_ADMISSION)
    out = pool_trait_values(configured, admission["overrides"])
    out["node_selector"]["x"] = "y"
    out["tolerations"].append({})
    assert configured == CONFIGURED and admission == TRAINING_ADMISSION


def test_nothing_leaks_from_one_pool_to_the_next():
    """A CPU-only server after a GPU attempt gets the configured values plus its own only."""
    registry = Registry(pools={"compute-pool": Pool("compute-pool")})
    cpu_overrides = build_overrides(
        registry=registry,
        pool=registry.pools["compute-pool"],
        platform=None,
        request=AdmissionRequest(user="alice", gpus=0, admission_id="z9"),
        charged="user:alice",
        over_quota=False,
    )
    first = pool_trait_values(CONFIGURED, TRAINING_ADMISSION["overrides"])
    # the spawner always starts an attempt from the configured values, never from `first`
    second = pool_trait_values(CONFIGURED, cpu_overrides)
    assert second == pool_trait_values(copy.deepcopy(CONFIGURED), cpu_overrides)
    assert second["extra_resource_limits"] == {} and second["extra_resource_guarantees"] == {}
    assert second["node_selector"] == {"disk": "ssd", "runwhere.ai/pool": "compute-pool"}
    assert second["image"] == CONFIGURED["image"] and second["mem_limit"] is None
    assert second["environment"] == {"HUB": "1", "NVIDIA_VISIBLE_DEVICES": "none"}
    assert "runwhere.ai/gpu-type" in first["node_selector"]
    assert set(second) == set(POOL_TRAITS)


def test_configured_gpu_resources_never_survive():
    configured = {
        **CONFIGURED,
        "extra_resource_limits": {"nvidia.com/gpu": "3", "example.org/fpga": "1"},
        "extra_resource_guarantees": {"nvidia.com/gpu": "3"},
    }
    out = pool_trait_values(configured, {"nodeSelector": {"runwhere.ai/pool": "compute-pool"}})
    assert out["extra_resource_limits"] == {"example.org/fpga": "1"}
    assert out["extra_resource_guarantees"] == {}


def test_default_pool_affinity_is_added_to_every_configured_term():
    registry = Registry()
    overrides = build_overrides(
        registry=registry,
        pool=Pool(DEFAULT_POOL, defaults=Defaults(cpu="2", memory_per_gpu="8Gi")),
        platform=None,
        request=AdmissionRequest(user="bob", gpus=1),
        charged="user:bob",
        over_quota=False,
    )
    zone = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    host = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    configured = {**CONFIGURED, "node_affinity_required": {"1": zone, "2": host}}
    out = pool_trait_values(configured, overrides)
    no_pool = {"key": "runwhere.ai/pool", "operator": "DoesNotExist"}
    # a whole GPU's node, in either of two ways (tests/core/test_overrides.py spells them out)
    whole = whole_gpu_terms()
    assert out["node_affinity_required"] == [
        *({"matchExpressions": [zone["matchExpressions"][0], no_pool, *w]} for w in whole),
        *({"matchFields": host["matchFields"], "matchExpressions": [no_pool, *w]} for w in whole),
    ]
    assert (out["cpu_guarantee"], out["mem_guarantee"]) == (2.0, 8 * 2**30)
    # nothing configured: the pool's own terms
    alone = pool_trait_values(CONFIGURED, overrides)["node_affinity_required"]
    assert alone == [{"matchExpressions": [no_pool, *w]} for w in whole]


def test_env_value_from_is_kept_as_an_env_spec():
    field_ref = {"fieldRef": {"fieldPath": "spec.nodeName"}}
    out = pool_trait_values(CONFIGURED, {"env": [{"name": "NODE", "valueFrom": field_ref}]})
    assert out["environment"] == {"HUB": "1", "NODE": {"name": "NODE", "valueFrom": field_ref}}


@given(st.text(max_size=30))
def test_escaped_values_come_back_unchanged_from_kubespawner_expansion(text):
    # KubeSpawner expands with str.format(**names)
    assert escape_template(text).format(username="x", servername="y") == text
    assert escape_template({"a": [text]}) == {"a": [escape_template(text)]}


def test_labels_from_the_admission_answer():
    answer = {"id": "q1", "pool": "dev-pool", "user": "a@b", "server": "gpu", "gpus": 1}
    assert admission_labels(answer) == {
        "gpupool.jupyter.org/pool": "dev-pool",
        "runwhere.ai/pool": "dev-pool",
        "gpupool.jupyter.org/user": "a-b-7508d8b5",
        "gpupool.jupyter.org/server": "gpu",
        "gpupool.jupyter.org/gpus": "1",
        "gpupool.jupyter.org/over-quota": "false",
        "gpupool.jupyter.org/admission": "q1",
    }
    # the service's labels win, ours fill in what it left out
    merged = admission_overrides(
        {**answer, "overrides": {"labels": {"gpupool.jupyter.org/gpus": "1", "x": "y"}}}
    )
    assert merged["labels"]["x"] == "y" and merged["labels"]["runwhere.ai/pool"] == "dev-pool"
