"""Pool and quota files: gpuctl's load unchanged, every problem is reported at once, with lines."""

from __future__ import annotations

import json

import pytest
from k8s_factories import EXAMPLES, TEST_POOLS

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.model import DEFAULT_POOL, Pool, QuotaEntry
from jupyter_gpupool.core.pools.reading import load_string, load_texts
from jupyter_gpupool.core.pools.writing import (
    pool_to_document,
    quota_to_document,
    registry_to_documents,
)
from jupyter_gpupool.poolfiles import check_paths, load_paths

# gpuctl's documentation, "Four-Pool Design", exactly as written there.
GPUCTL_TRAINING = """\
kind: pool
version: v0.1
pool:
  name: training-pool
  description: "Large model training (high-end GPUs)"
nodes:
  gpu-node-1:
    gpu-type: A100-100G
  gpu-node-2:
    gpu-type: A100-100G
"""
GPUCTL_COMPUTE = """\
kind: pool
version: v0.1
pool:
  name: compute-pool
  description: "CPU compute services (no GPU nodes)"
nodes:
  cpu-node-1:
    gpu-type: ""
  cpu-node-2:
    gpu-type: ""
"""
# gpuctl's quota documentation, exactly as written there.
GPUCTL_QUOTA = """\
kind: quota
version: v0.1

quota:
  name: team-resource-quota
  description: "Resource quotas for each team"

namespace:
  team-alice:          # Namespace name (auto-created)
    cpu: 16            # CPU core limit
    memory: 64Gi       # Memory limit
    gpu: 8             # GPU count limit
  team-bob:
    cpu: 8
    memory: 32Gi
    gpu: 4
  team-charlie:
    cpu: 4
    memory: 16Gi
    gpu: 2
"""


def problems_of(text: str, file: str = "pools.yaml") -> list[str]:
    with pytest.raises(DocumentError) as err:
        load_string(text, file)
    return [str(p) for p in err.value.problems]


def test_gpuctl_documents_load_unchanged():
    reg = load_texts([(GPUCTL_TRAINING, "training.yaml"), (GPUCTL_COMPUTE, "compute.yaml")])
    training = reg.pools["training-pool"]
    assert training.description == "Large model training (high-end GPUs)"
    assert dict(training.nodes) == {"gpu-node-1": "A100-100G", "gpu-node-2": "A100-100G"}
    assert dict(reg.pools["compute-pool"].nodes) == {"cpu-node-1": "", "cpu-node-2": ""}
    # no extensions: an open, unmanaged pool
    assert training.access is None and reg.quota("training-pool") is None


def test_gpuctl_spellings_gpuType_and_kind_resource():
    reg = load_string(
        "kind: resource\nversion: v0.1\npool: {name: p}\nnodes:\n  n1: {gpuType: T4}\n"
    )
    assert dict(reg.pools["p"].nodes) == {"n1": "T4"}


def test_gpuctl_quota_maps_namespaces_to_groups():
    reg = load_string(GPUCTL_QUOTA, "team-quota.yaml")
    assert reg.group_cap("team-alice") == 8
    assert reg.group_cap("team-charlie") == 2
    assert reg.group_caps["team-bob"].memory == "32Gi"
    assert reg.user_cap("zoe") is None  # no `default`: users are not capped


def test_gpuctl_quota_default_caps_users_outside_every_namespace_group():
    reg = load_string(
        "kind: quota\nquota: {name: q}\nnamespace:\n  team-a: {gpu: 8}\n"
        "default: {cpu: 4, memory: 8Gi, gpu: '2'}\nusers:\n  vip: {gpu: 6}\n"
    )
    assert reg.user_cap("zoe") == 2
    assert reg.user_cap("zoe", ["team-a"]) is None  # works "in the team namespace"
    assert reg.user_cap("vip") == 6


def test_the_example_directory_loads():
    reg = load_paths([EXAMPLES])
    assert list(reg.pools) == ["compute-pool", "dev-pool", "inference-pool", "training-pool"]
    assert reg.pools["training-pool"].nodes["gpu-node-1"] == "A100-80G"
    q = reg.quota("training-pool")
    assert q is not None and q.groups["ml-research"] == QuotaEntry(guaranteed=8, limit=16)
    inference = reg.quota("inference-pool")
    assert inference is not None and inference.groups["ml-ops"].guaranteed == 4
    assert reg.default_pool_order(["ml-ops"]) == ("inference-pool", "dev-pool")
    assert reg.default_pool_order([]) == ("dev-pool", "compute-pool")
    assert reg.default_pool_order(["ml-research", "ml-ops"])[0] == "training-pool"


def test_example_gpuctl_files_are_byte_for_byte_gpuctl_format():
    """Our pool examples only use gpuctl's keys: gpuctl itself could apply them."""
    for name in ("training-pool", "inference-pool", "dev-pool", "compute-pool"):
        text = (EXAMPLES / f"{name}.yaml").read_text()
        assert text.startswith(f"kind: pool\nversion: v0.1\npool:\n  name: {name}\n")
        doc = pool_to_document(load_string(text).pools[name])
        assert set(doc) == {"kind", "version", "pool", "nodes"}


def test_misspelt_key_is_reported_with_its_line_and_a_suggestion():
    text = (
        "kind: pool\nversion: v0.1\npool:\n  name: p\nnodes:\n  gpu-node-1:\n    gpu_type: A100\n"
    )
    assert problems_of(text, "training-pool.yaml") == [
        "training-pool.yaml:7: nodes.gpu-node-1.gpu_type: unknown key 'gpu_type'; "
        "did you mean 'gpu-type'?"
    ]


def test_every_problem_is_reported_at_once_in_reading_order():
    text = """\
kind: pool
version: v0.1
pool:
  name: Training Pool
nodes:
  gpu-node-1: {gpu-type: A100}
quota:
  borrowing: maybe
  groups:
    ml-research: {guaranteed: 9, limit: 8}
    students: {guaranteed: -1}
    others: {guaranteed: 1.5, limit: true}
limits:
  max-gpus: "8"
platforms:
  a100: {gpu-type: A100}
default-platform: h100
placment: spread
"""
    assert problems_of(text) == [
        "pools.yaml:4: pool.name: 'Training Pool' is not a valid Kubernetes label value (at "
        "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
        "pools.yaml:8: quota.borrowing: must be true or false, not 'maybe'",
        "pools.yaml:10: quota.groups.ml-research.guaranteed: guaranteed (9) is above limit (8)",
        "pools.yaml:11: quota.groups.students.guaranteed: must not be negative, not -1",
        "pools.yaml:12: quota.groups.others.guaranteed: must be a whole number, not 1.5",
        "pools.yaml:12: quota.groups.others.limit: must be a whole number, not true",
        "pools.yaml:14: limits.max-gpus: must be a whole number, not '8'",
        "pools.yaml:17: default-platform: unknown platform 'h100' (this pool's platforms: a100)",
        "pools.yaml:18: placment: unknown key 'placment'; did you mean 'placement'?",
    ]


def test_duplicate_pool_names_across_files_are_rejected():
    with pytest.raises(DocumentError) as err:
        load_texts([(GPUCTL_TRAINING, "a.yaml"), (GPUCTL_TRAINING, "b.yaml")])
    assert [str(p) for p in err.value.problems] == [
        "b.yaml:4: pool.name: duplicate pool name 'training-pool'; already defined at a.yaml:4",
    ]


def test_a_node_belongs_to_one_pool():
    other = GPUCTL_TRAINING.replace("name: training-pool", "name: other-pool")
    with pytest.raises(DocumentError) as err:
        load_texts([(GPUCTL_TRAINING, "a.yaml"), (other, "b.yaml")])
    assert [str(p) for p in err.value.problems] == [
        "b.yaml:7: nodes.gpu-node-1: node 'gpu-node-1' is already in pool 'training-pool' "
        "(a.yaml:7); a node belongs to one pool",
        "b.yaml:9: nodes.gpu-node-2: node 'gpu-node-2' is already in pool 'training-pool' "
        "(a.yaml:9); a node belongs to one pool",
    ]


def test_several_documents_per_file_and_a_bad_one_spoils_all():
    text = GPUCTL_TRAINING + "---\n" + "kind: pool\npool: {name: dev}\nnodes: {n9: {gpu-type: 7}}\n"
    assert problems_of(text, "all.yaml") == [
        'all.yaml:14: nodes.n9.gpu-type: must be a string, not 7 (quote it: "7")'
    ]
    ok = load_string(GPUCTL_TRAINING + "---\n" + GPUCTL_COMPUTE)
    assert set(ok.pools) == {"training-pool", "compute-pool"}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            "pool: {name: x}\n",
            "pools.yaml:1: (document): missing required key 'kind' (pool, quota or booking)",
        ),
        (
            "kind: pools\npool: {name: x}\n",
            "pools.yaml:1: kind: unknown kind 'pools'; expected pool, quota or booking",
        ),
        (
            "kind: pool\nversion: v0.2\npool: {name: x}\n",
            "pools.yaml:2: version: must be one of v0.1, not 'v0.2'",
        ),
        ("kind: pool\n", "pools.yaml:1: (document): missing required key 'pool'"),
        (
            "- kind: pool\n",
            "pools.yaml:1: (document): a pool file document must be a mapping with 'kind: pool', 'quota' or 'booking'",
        ),
        (
            "kind: pool\npool: {name: x}\nnodes: [a, b]\n",
            "pools.yaml:3: nodes: must be a mapping (key: value lines), not a list",
        ),
        (
            "kind: pool\npool: {name: x}\nnodes:\n  Node_1: {gpu-type: A}\n",
            "pools.yaml:4: nodes.Node_1: 'Node_1' is not a valid node name (lowercase letters, digits, '-' and '.')",
        ),
        (
            "kind: pool\npool: {name: x}\nnodes:\n  n: {gpu-type: A, gpuType: A}\n",
            "pools.yaml:4: nodes.n.gpuType: give either 'gpu-type' or 'gpuType', not both",
        ),
        (
            "kind: pool\npool: {name: x}\nlimits: {allowed-gpus: [1, 2, 2]}\n",
            "pools.yaml:3: limits.allowed-gpus[2]: 2 is listed twice",
        ),
        (
            "kind: pool\npool: {name: x}\nselector: {'bad key!': v}\n",
            "pools.yaml:3: selector.bad key!: 'bad key!' is not a valid Kubernetes label key (NAME or PREFIX/NAME)",
        ),
        (
            "kind: pool\npool: {name: x}\ndefaults: {memory-per-gpu: lots}\n",
            "pools.yaml:3: defaults.memory-per-gpu: 'lots' is not a resource quantity such as 8, 500m or 64Gi",
        ),
        (
            "kind: pool\npool: {name: x}\nquota: {user-default: {guaranteed: true}}\n",
            "pools.yaml:3: quota.user-default.guaranteed: must be a whole number, not true",
        ),
        (
            "kind: quota\nquota: {name: q}\nnamespace: {team: {gpu: -2}}\n",
            "pools.yaml:3: namespace.team.gpu: must not be negative, not -2",
        ),
        (
            "kind: quota\nquota: {name: q}\npools: {nowhere: {borrowing: false}}\n",
            "pools.yaml:3: pools.nowhere: unknown pool 'nowhere' (pools: default)",
        ),
        (
            "kind: quota\nquota: {name: q}\ndefault-pools: {fallback: [default, gone]}\n",
            "pools.yaml:3: default-pools.fallback[1]: unknown pool 'gone' (pools: default)",
        ),
        (
            "kind: pool\npool: {name: x}\nplatforms: {a: {description: no type}}\n",
            "pools.yaml:3: platforms.a: missing required key 'gpu-type'",
        ),
        (
            "kind: pool\npool: {name: x}\ntemplate: {tolerations: [{operator: Maybe}]}\n",
            "pools.yaml:3: template.tolerations[0].operator: must be one of Exists, Equal, not 'Maybe'",
        ),
        (
            "kind: pool\npool: {name: x}\nkind: pool\n",
            "pools.yaml:3: kind: the key 'kind' is given twice in this mapping (first at line 1); "
            "give each key once",
        ),
    ],
)
def test_single_problem_messages(doc, expected):
    if expected is None:
        load_string(doc)
        return
    assert problems_of(doc) == [expected]


def test_yaml_syntax_error_names_the_line():
    # libyaml's words ("did not find expected"), or PyYAML's own ("expected ..., but got")
    [problem] = problems_of("kind: pool\npool: {name: x\n")
    assert problem.startswith("pools.yaml:3: (yaml): invalid YAML: while parsing a flow mapping ")
    assert "expected ',' or '}'" in problem


def test_quota_conflicts_between_documents():
    pool = "kind: pool\npool: {name: gpu}\nquota: {groups: {a: {guaranteed: 1}}}\n"
    quota = (
        "kind: quota\nquota: {name: q}\nnamespace: {a: {gpu: 1}}\n"
        "pools: {gpu: {borrowing: false}}\n"
    )
    quota2 = "kind: quota\nquota: {name: q2}\nnamespace: {a: {gpu: 2}}\n"
    with pytest.raises(DocumentError) as err:
        load_texts([(pool, "pool.yaml"), (quota, "q.yaml"), (quota2, "q2.yaml")])
    assert [str(p) for p in err.value.problems] == [
        "q.yaml:4: pools.gpu: the quota of pool 'gpu' is already set at pool.yaml:3",
        "q2.yaml:3: namespace.a: the quota of group 'a' is already set at q.yaml:3",
    ]


def test_extensions_parse_into_the_model():
    reg = load_string(
        """
kind: pool
version: v0.1
pool: {name: mixed, description: "A100 and L40S"}
nodes:
  n1: {gpu-type: A100-80G}
  n2: {gpu-type: L40S}
selector: {example.org/rack: r7}
access: {users: [alice], groups: [ml-research]}
quota:
  borrowing: false
  user-default: {limit: 2}
  groups: {ml-research: {guaranteed: 4, limit: 6}}
defaults: {cpu: 1, memory: 4Gi, cpu-per-gpu: 8, memory-per-gpu: 32Gi}
limits: {max-gpus: 4, allowed-gpus: [1, 2, 4]}
platforms:
  a100:
    gpu-type: A100-80G
    template: {nodeSelector: {example.org/fabric: ib}}
  l40s:
    gpuType: L40S
    defaults: {memory-per-gpu: 48Gi}
default-platform: a100
template:
  image: quay.io/jupyter/pytorch-notebook
  env: [{name: HF_HOME, value: /scratch/hf}]
  tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
placement: spread
"""
    )
    pool = reg.pools["mixed"]
    assert pool.selector == {"example.org/rack": "r7"}
    assert reg.selectors() == [("mixed", {"example.org/rack": "r7"})]
    assert pool.allows("alice", []) and pool.allows("bob", ["ml-research"])
    assert not pool.allows("bob", ["students"])
    assert pool.limits.allowed_gpus == (1, 2, 4) and pool.limits.max_gpus == 4
    assert pool.platforms["l40s"].gpu_type == "L40S"
    assert pool.platform_for("L40S") is pool.platforms["l40s"]
    assert pool.default_platform == "a100" and pool.placement == "spread"
    assert reg.quota("mixed") == pool.quota
    assert pool.quota is not None and pool.quota.user_entry("zoe") == QuotaEntry(0, 2)
    assert reg.pod_template("mixed", "a100")["nodeSelector"] == {"example.org/fabric": "ib"}
    assert reg.pod_template("mixed", "a100")["image"] == "quay.io/jupyter/pytorch-notebook"
    # round trip: the echoed document loads back into an equal pool
    again = load_string(json.dumps(pool_to_document(pool)), "<echo>")
    assert again.pools["mixed"] == pool
    assert [p.name for p in reg.visible_pools("bob", ["students"])] == []


def test_quota_document_round_trip_and_registry_echo():
    reg = load_paths([TEST_POOLS])
    docs = registry_to_documents(reg)
    assert [d["kind"] for d in docs] == ["pool"] * 4 + ["quota"]
    again = load_texts([(json.dumps(d), f"doc{i}.json") for i, d in enumerate(docs)])
    assert again.quota_documents == reg.quota_documents
    assert again.pools == reg.pools
    assert quota_to_document(reg.quota_documents[0])["namespace"]["students"]["gpu"] == 6


def test_default_pool_always_exists():
    reg = load_string(GPUCTL_COMPUTE)
    assert reg.pool(DEFAULT_POOL) == Pool(DEFAULT_POOL, description="Nodes that are in no pool")
    assert reg.pool("nope") is None
    assert reg.default_pool_order(["anyone"]) == (DEFAULT_POOL,)


def test_check_paths_reports_per_file(tmp_path):
    (tmp_path / "a.yaml").write_text(GPUCTL_TRAINING)
    (tmp_path / "b.yml").write_text(GPUCTL_TRAINING.replace("gpu-type:", "gpu_type:"))
    (tmp_path / "notes.txt").write_text("not a pool file")
    report = check_paths([tmp_path])
    assert report.files == [str(tmp_path / "a.yaml"), str(tmp_path / "b.yml")]
    assert report.problems_in(str(tmp_path / "a.yaml")) == []
    assert len(report.problems_in(str(tmp_path / "b.yml"))) == 3  # 2 keys, duplicate name
    assert report.pools_per_file[str(tmp_path / "a.yaml")] == 1


def test_negative_resource_quantities_are_rejected():
    with pytest.raises(DocumentError) as err:
        load_string("kind: pool\npool: {name: p}\ndefaults: {cpu-per-gpu: '-1'}\n", "x.yaml")
    assert str(err.value).startswith("x.yaml:3: defaults.cpu-per-gpu: ")
