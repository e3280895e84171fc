"""Pod overrides compared whole, as KubeSpawner's ``tests/test_objects.py`` compares whole pods.

Each expected value is written out in Kubernetes' own terms (label keys, the GPU resource name,
node affinity as the API spells it), so a change anywhere in the dict shows up as a diff here,
not only in the keys some other test happens to look at. The label values that stand for names
a label cannot hold (``group:ml``) are the name with invalid characters as ``-`` plus the first 8
hex digits of the name's SHA-256 (``hashlib.sha256(b"group:ml")``).
"""

from __future__ import annotations

from jupyter_gpupool.core.admission.decision import AdmissionRequest
from jupyter_gpupool.core.admission.overrides import build_overrides
from jupyter_gpupool.core.kube.nodeaffinity import required_affinity_matches
from jupyter_gpupool.core.pools.model import DEFAULT_POOL, Pool
from jupyter_gpupool.core.pools.reading import load_string

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
#: Not single-strategy MIG devices, not a HAMi node (its chart's label gpu=on)
_NOT_MIG_OR_HAMI = [
    {"key": "nvidia.com/mig.strategy", "operator": "NotIn", "values": ["single"]},
    {"key": "gpu", "operator": "NotIn", "values": ["on"]},
]
#: What a pod asking whole GPUs requires of its node, ORed: GFD's nvidia.com/gpu.replicas absent
#: or below 2 (not time-sliced or MPS replicas), and the rest
WHOLE_GPU_TERMS = [
    {"matchExpressions": [{"key": "nvidia.com/gpu.replicas", "operator": "DoesNotExist"}, *_NOT_MIG_OR_HAMI]},
    {"matchExpressions": [{"key": "nvidia.com/gpu.replicas", "operator": "Lt", "values": ["2"]}, *_NOT_MIG_OR_HAMI]},
]  # fmt: skip
WHOLE_GPUS = {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": WHOLE_GPU_TERMS}
}

TRAINING = """\
kind: pool
version: v0.1
pool: {name: training}
defaults: {cpu: "1", memory: 4Gi, cpu-per-gpu: "4", memory-per-gpu: 32Gi}
"""


def test_plain_pool_with_defaults_and_a_reserved_node():
    reg = load_string(TRAINING)
    got = build_overrides(
        registry=reg,
        pool=reg.pools["training"],
        platform=None,
        request=AdmissionRequest(
            "alice", groups=("ml", "staff"), gpus=2, server="big", admission_id="a1b2"
        ),
        charged="group:ml",
        over_quota=False,
        node_hostname="gpu-node-1",
    )
    assert got == {
        "resources": {
            # 1 + 2 x 4 cores, 4Gi + 2 x 32Gi
            "requests": {"cpu": "9", "memory": "68Gi", "nvidia.com/gpu": "2"},
            "limits": {"nvidia.com/gpu": "2"},
        },
        "nodeSelector": {"runwhere.ai/pool": "training"},
        "labels": {
            "gpupool.jupyter.org/pool": "training",
            "runwhere.ai/pool": "training",
            "gpupool.jupyter.org/user": "alice",
            "gpupool.jupyter.org/server": "big",
            "gpupool.jupyter.org/gpus": "2",
            "gpupool.jupyter.org/over-quota": "false",
            "gpupool.jupyter.org/charged": "group-ml-b34ab375",
            "gpupool.jupyter.org/admission": "a1b2",
        },
        "annotations": {
            "gpupool.jupyter.org/pool": "training",
            "gpupool.jupyter.org/user": "alice",
            "gpupool.jupyter.org/server": "big",
            "gpupool.jupyter.org/groups": "ml,staff",
            "gpupool.jupyter.org/charged": "group:ml",
        },
        "tolerations": [GPU_TOLERATION],
        "affinity": {
            "nodeAffinity": {
                **WHOLE_GPUS,
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
                ],
            }
        },
    }


def test_pool_template_is_merged_and_cannot_override_accounting():
    reg = load_string(
        """\
kind: pool
pool: {name: inference}
template:
  nodeSelector: {disk: ssd, runwhere.ai/pool: elsewhere}
  labels: {team: vision, gpupool.jupyter.org/over-quota: "false"}
  annotations: {owner: vision-team}
  env: [{name: HF_HOME, value: /data/hf}]
  image: registry.example/vision:1
  resources: {limits: {memory: 64Gi}}
"""
    )
    got = build_overrides(
        registry=reg,
        pool=reg.pools["inference"],
        platform=None,
        request=AdmissionRequest("bob", gpus=1),
        charged="user:bob",
        over_quota=True,
    )
    assert got == {
        "affinity": {"nodeAffinity": WHOLE_GPUS},
        "nodeSelector": {"disk": "ssd", "runwhere.ai/pool": "inference"},
        "labels": {
            "team": "vision",
            "gpupool.jupyter.org/over-quota": "true",
            "gpupool.jupyter.org/pool": "inference",
            "runwhere.ai/pool": "inference",
            "gpupool.jupyter.org/user": "bob",
            "gpupool.jupyter.org/server": "",
            "gpupool.jupyter.org/gpus": "1",
            "gpupool.jupyter.org/charged": "user-bob-3cf10529",
        },
        "annotations": {
            "owner": "vision-team",
            "gpupool.jupyter.org/pool": "inference",
            "gpupool.jupyter.org/user": "bob",
            "gpupool.jupyter.org/server": "",
            "gpupool.jupyter.org/groups": "",
            "gpupool.jupyter.org/charged": "user:bob",
        },
        "env": [{"name": "HF_HOME", "value": "/data/hf"}],
        "image": "registry.example/vision:1",
        "resources": {
            "limits": {"memory": "64Gi", "nvidia.com/gpu": "1"},
            "requests": {"nvidia.com/gpu": "1"},
        },
        "tolerations": [GPU_TOLERATION],
    }


def test_platform_defaults_template_and_gpu_type_pin():
    reg = load_string(
        """\
kind: pool
pool: {name: mixed}
defaults: {cpu: "2", memory-per-gpu: 16Gi}
template:
  env: [{name: HF_HOME, value: /data/hf}, {name: TEAM, value: ml}]
platforms:
  a100:
    gpu-type: A100-80G
    defaults: {memory-per-gpu: 64Gi}
    template:
      image: cuda:a100
      env: [{name: HF_HOME, value: /fast/hf}]
"""
    )
    pool = reg.pools["mixed"]
    got = build_overrides(
        registry=reg,
        pool=pool,
        platform=pool.platforms["a100"],
        request=AdmissionRequest("carol", gpus=4, server="llm"),
        charged="user:carol",
        over_quota=False,
        type_pin=("runwhere.ai/gpu-type", "A100-80G"),
    )
    assert got == {
        "affinity": {"nodeAffinity": WHOLE_GPUS},
        "resources": {
            # the pool's 2 cores; the platform's 64Gi per GPU replaces the pool's 16Gi
            "requests": {"cpu": "2", "memory": "256Gi", "nvidia.com/gpu": "4"},
            "limits": {"nvidia.com/gpu": "4"},
        },
        # named env items: the platform's HF_HOME replaces the pool's in place
        "env": [{"name": "HF_HOME", "value": "/fast/hf"}, {"name": "TEAM", "value": "ml"}],
        "image": "cuda:a100",
        "nodeSelector": {"runwhere.ai/pool": "mixed", "runwhere.ai/gpu-type": "A100-80G"},
        "labels": {
            "gpupool.jupyter.org/pool": "mixed",
            "runwhere.ai/pool": "mixed",
            "gpupool.jupyter.org/user": "carol",
            "gpupool.jupyter.org/server": "llm",
            "gpupool.jupyter.org/gpus": "4",
            "gpupool.jupyter.org/over-quota": "false",
            "gpupool.jupyter.org/charged": "user-carol-814fd26c",
            "gpupool.jupyter.org/platform": "a100",
        },
        "annotations": {
            "gpupool.jupyter.org/pool": "mixed",
            "gpupool.jupyter.org/user": "carol",
            "gpupool.jupyter.org/server": "llm",
            "gpupool.jupyter.org/groups": "",
            "gpupool.jupyter.org/charged": "user:carol",
        },
        "tolerations": [GPU_TOLERATION],
    }


def test_template_tolerations_come_first_and_the_gpu_one_is_not_repeated():
    reg = load_string(
        """\
kind: pool
pool: {name: dedicated}
template:
  tolerations:
  - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""
    )
    got = build_overrides(
        registry=reg,
        pool=reg.pools["dedicated"],
        platform=None,
        request=AdmissionRequest("bob", gpus=1, server="s"),
        charged="user:bob",
        over_quota=False,
    )
    assert got == {
        "affinity": {"nodeAffinity": WHOLE_GPUS},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
            GPU_TOLERATION,
        ],
        "resources": {
            "requests": {"nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
        "nodeSelector": {"runwhere.ai/pool": "dedicated"},
        "labels": {
            "gpupool.jupyter.org/pool": "dedicated",
            "runwhere.ai/pool": "dedicated",
            "gpupool.jupyter.org/user": "bob",
            "gpupool.jupyter.org/server": "s",
            "gpupool.jupyter.org/gpus": "1",
            "gpupool.jupyter.org/over-quota": "false",
            "gpupool.jupyter.org/charged": "user-bob-3cf10529",
        },
        "annotations": {
            "gpupool.jupyter.org/pool": "dedicated",
            "gpupool.jupyter.org/user": "bob",
            "gpupool.jupyter.org/server": "s",
            "gpupool.jupyter.org/groups": "",
            "gpupool.jupyter.org/charged": "user:bob",
        },
    }


def test_cpu_only_server_gets_no_gpu_and_sees_no_device():
    reg = load_string(TRAINING)
    got = build_overrides(
        registry=reg,
        pool=reg.pools["training"],
        platform=None,
        request=AdmissionRequest("dave", gpus=0, server="cpu"),
        charged="user:dave",
        over_quota=False,
    )
    assert got == {
        # the per-GPU parts add nothing; no GPU request, no GPU toleration
        "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}],
        "nodeSelector": {"runwhere.ai/pool": "training"},
        "labels": {
            "gpupool.jupyter.org/pool": "training",
            "runwhere.ai/pool": "training",
            "gpupool.jupyter.org/user": "dave",
            "gpupool.jupyter.org/server": "cpu",
            "gpupool.jupyter.org/gpus": "0",
            "gpupool.jupyter.org/over-quota": "false",
            "gpupool.jupyter.org/charged": "user-dave-da514774",
        },
        "annotations": {
            "gpupool.jupyter.org/pool": "training",
            "gpupool.jupyter.org/user": "dave",
            "gpupool.jupyter.org/server": "cpu",
            "gpupool.jupyter.org/groups": "",
            "gpupool.jupyter.org/charged": "user:dave",
        },
    }


def test_default_pool_is_the_nodes_without_a_pool_label():
    reg = load_string(TRAINING)
    got = build_overrides(
        registry=reg,
        pool=Pool(DEFAULT_POOL),
        platform=None,
        request=AdmissionRequest("dave", gpus=0),
        charged="user:dave",
        over_quota=False,
        pool_label="example.com/pool",
    )
    assert got == {
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}],
        "nodeSelector": {},
        # "no such label" cannot be a nodeSelector: a required node affinity says it
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "example.com/pool", "operator": "DoesNotExist"}
                            ]
                        }
                    ]
                }
            }
        },
        "labels": {
            "gpupool.jupyter.org/pool": "default",
            "runwhere.ai/pool": "default",
            "gpupool.jupyter.org/user": "dave",
            "gpupool.jupyter.org/server": "",
            "gpupool.jupyter.org/gpus": "0",
            "gpupool.jupyter.org/over-quota": "false",
            "gpupool.jupyter.org/charged": "user-dave-da514774",
        },
        "annotations": {
            "gpupool.jupyter.org/pool": "default",
            "gpupool.jupyter.org/user": "dave",
            "gpupool.jupyter.org/server": "",
            "gpupool.jupyter.org/groups": "",
            "gpupool.jupyter.org/charged": "user:dave",
        },
    }


def test_a_whole_gpu_pod_fits_only_nodes_of_whole_gpus():
    """The whole-GPU terms read against nodes labelled as GFD, the device plugin and HAMi's
    chart label them (docs/shapes.md), with the rule kube-scheduler applies to node affinity."""
    reg = load_string(TRAINING)
    got = build_overrides(
        registry=reg,
        pool=reg.pools["training"],
        platform=None,
        request=AdmissionRequest("alice", gpus=1),
        charged="user:alice",
        over_quota=False,
    )
    nodes = {
        "no GFD labels": ({}, True),
        "GFD, whole GPUs": ({"nvidia.com/gpu.replicas": "1"}, True),
        "MIG mixed (replicas 0 on MIG GPUs)": (
            {"nvidia.com/gpu.replicas": "0", "nvidia.com/mig.strategy": "mixed"},
            True,
        ),
        "time-sliced in 4": ({"nvidia.com/gpu.replicas": "4"}, False),
        "MPS in 2": ({"nvidia.com/gpu.replicas": "2", "nvidia.com/mps.capable": "true"}, False),
        "MIG single": (
            {"nvidia.com/gpu.replicas": "0", "nvidia.com/mig.strategy": "single"},
            False,
        ),
        "HAMi": ({"gpu": "on"}, False),
    }
    for what, (labels, fits) in nodes.items():
        assert required_affinity_matches(got["affinity"], labels, "n") is fits, what
    # a pod without GPUs may go anywhere its pool is
    cpu = build_overrides(
        registry=reg,
        pool=reg.pools["training"],
        platform=None,
        request=AdmissionRequest("alice", gpus=0),
        charged="user:alice",
        over_quota=False,
    )
    assert "affinity" not in cpu
