"""Re-cutting MIG layouts to demand (core/admission/recut.py) and the pool file's ``recut``
(core/pools/recut_policy.py). Each expectation is counted by hand from the GPU operator's
default configs: an 8 x A100-SXM4-80GB node is 8 whole GPUs as all-disabled, 56 x 1g.10gb as
all-1g.10gb, 16 x 1g.10gb + 8 x 2g.20gb + 8 x 3g.40gb as all-balanced."""

import pytest

from jupyter_gpupool.core.admission.recut import NodeCut, RecutPolicy, plan
from jupyter_gpupool.core.documents.mig_parted import DEFAULT_CONFIGS
from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.core.pools.writing import pool_to_document

A100 = "NVIDIA-A100-SXM4-80GB"
POLICY = RecutPolicy(
    nodes=("n1", "n2", "n3"),
    configs=("all-disabled", "all-1g.10gb", "all-balanced"),
    home="all-disabled",
    unused="30m",
    interval="10m",
)
NOW = 100_000.0


def node(name, config="all-disabled", state="success", pods=0, **kw):
    return NodeCut(name, A100, 8, config, state, pods, **kw)


def test_waiting_for_a_shape_re_cuts_one_idle_node_to_the_config_with_the_most_of_it():
    cuts = plan(POLICY, DEFAULT_CONFIGS, [node("n1"), node("n2")], {"mig-1g.10gb": 6}, NOW)
    assert [(c.node, c.config, c.shape, c.waiting) for c in cuts] == [
        ("n1", "all-1g.10gb", "mig-1g.10gb", 6)
    ]
    assert cuts[0].reason == "for 6 waiting requests of 1g.10gb"


def test_never_more_nodes_than_the_waiting_requests_need():
    # 60 waiting: one node brings 56, so two nodes; the third is left alone
    nodes = [node("n1"), node("n2"), node("n3")]
    cuts = plan(POLICY, DEFAULT_CONFIGS, nodes, {"mig-1g.10gb": 60}, NOW)
    assert sorted(c.node for c in cuts) == ["n1", "n2"]


def test_never_a_node_with_a_gpu_pod_a_busy_one_a_failed_one_or_one_changed_lately():
    nodes = [
        node("n1", pods=1),
        node("n2", state="pending"),
        node("n3", state="failed"),
    ]
    assert plan(POLICY, DEFAULT_CONFIGS, nodes, {"mig-1g.10gb": 3}, NOW) == []
    lately = node("n1", last_change=NOW - 599)
    assert plan(POLICY, DEFAULT_CONFIGS, [lately], {"mig-1g.10gb": 3}, NOW) == []
    enough = node("n1", last_change=NOW - 600)
    assert [c.node for c in plan(POLICY, DEFAULT_CONFIGS, [enough], {"mig-1g.10gb": 3}, NOW)] == [
        "n1"
    ]


def test_only_the_nodes_the_policy_names():
    other = node("elsewhere")
    assert plan(POLICY, DEFAULT_CONFIGS, [other], {"mig-1g.10gb": 3}, NOW) == []


def test_a_re_cut_under_way_counts_for_what_it_brings():
    under_way = node("n1", config="all-1g.10gb", state="pending")
    cuts = plan(POLICY, DEFAULT_CONFIGS, [under_way, node("n2")], {"mig-1g.10gb": 50}, NOW)
    assert cuts == []
    cuts = plan(POLICY, DEFAULT_CONFIGS, [under_way, node("n2")], {"mig-1g.10gb": 57}, NOW)
    assert [c.node for c in cuts] == ["n2"]


def test_a_shape_only_one_config_offers_picks_that_config():
    cuts = plan(POLICY, DEFAULT_CONFIGS, [node("n1")], {"mig-3g.40gb": 2}, NOW)
    assert [(c.node, c.config) for c in cuts] == [("n1", "all-balanced")]
    # no allowed config offers 7g.80gb: nothing to do
    assert plan(POLICY, DEFAULT_CONFIGS, [node("n1")], {"mig-7g.80gb": 1}, NOW) == []


def test_the_node_whose_offer_is_wanted_least_is_cut_first():
    # requests wait for whole GPUs too: the balanced node goes to 1g before a whole one
    whole, balanced = node("n1"), node("n2", config="all-balanced")
    cuts = plan(POLICY, DEFAULT_CONFIGS, [whole, balanced], {"mig-1g.10gb": 20, "whole": 2}, NOW)
    assert ("n2", "all-1g.10gb") in [(c.node, c.config) for c in cuts]
    assert ("n1", "all-1g.10gb") not in [(c.node, c.config) for c in cuts]


def test_waiting_for_whole_gpus_brings_a_cut_node_home():
    cut = node("n1", config="all-1g.10gb", unused_since=NOW - 60)
    cuts = plan(POLICY, DEFAULT_CONFIGS, [cut], {"whole": 2}, NOW)
    assert [(c.node, c.config, c.back) for c in cuts] == [("n1", "all-disabled", True)]


def test_unused_instances_go_home_after_the_policys_time_and_not_before():
    cut = node("n1", config="all-1g.10gb", unused_since=NOW - 1799)
    assert plan(POLICY, DEFAULT_CONFIGS, [cut], {}, NOW) == []
    cut = node("n1", config="all-1g.10gb", unused_since=NOW - 1800)
    (back,) = plan(POLICY, DEFAULT_CONFIGS, [cut], {}, NOW)
    assert (back.config, back.back) == ("all-disabled", True)
    assert back.reason == "back to all-disabled: its instances stood unused 30m"
    # in use (a pod on it): never
    busy = node("n1", config="all-1g.10gb", pods=1, unused_since=None)
    assert plan(POLICY, DEFAULT_CONFIGS, [busy], {}, NOW) == []
    # still wanted (requests its instances could take wait, say for quota): not yet
    assert plan(POLICY, DEFAULT_CONFIGS, [cut], {"mig-1g.10gb": 1}, NOW) == []


def test_instances_a_re_cut_brought_stand_unused_only_since_the_re_cut():
    # idle for an hour, then cut to 1g for a request that was served elsewhere or gave up:
    # 20 minutes after the change its instances have stood unused 20 minutes, not 60
    cut = node("n1", config="all-1g.10gb", unused_since=NOW - 3600, last_change=NOW - 1200)
    assert plan(POLICY, DEFAULT_CONFIGS, [cut], {}, NOW) == []
    cut = node("n1", config="all-1g.10gb", unused_since=NOW - 3600, last_change=NOW - 1800)
    (back,) = plan(POLICY, DEFAULT_CONFIGS, [cut], {}, NOW)
    assert back.reason == "back to all-disabled: its instances stood unused 30m"


POOL = """
kind: pool
pool: {name: training-pool}
nodes:
  gpu-node-1: {gpu-type: A100-80G}
  gpu-node-2: {gpu-type: A100-80G}
recut:
  nodes: [gpu-node-2]
  configs: [all-disabled, all-1g.10gb]
"""


def test_a_pool_files_recut_reads_with_its_defaults_and_writes_back():
    pool = load_string(POOL).pool("training-pool")
    assert pool.recut == RecutPolicy(
        ("gpu-node-2",), ("all-disabled", "all-1g.10gb"), "all-disabled"
    )
    assert pool.recut.unused_seconds == 1800 and pool.recut.interval_seconds == 600
    assert pool_to_document(pool)["recut"] == {
        "nodes": ["gpu-node-2"],
        "configs": ["all-disabled", "all-1g.10gb"],
    }


@pytest.mark.parametrize(
    "change, path, words",
    [
        ("nodes: [gpu-node-2]", "recut.nodes[0]", "'gpu-node-9' is not one of this pool's nodes"),
        ("configs: [all-disabled", "recut.home", "must be one of configs"),
    ],
)
def test_a_recut_that_cannot_be_is_refused_at_its_line(change, path, words):
    bad = {
        "recut.nodes[0]": POOL.replace("nodes: [gpu-node-2]", "nodes: [gpu-node-9]"),
        "recut.home": POOL + "  home: all-balanced\n",
    }[path]
    with pytest.raises(DocumentError) as e:
        load_string(bad)
    (problem,) = e.value.problems
    assert problem.path == path and words in problem.message


# --- what the launch options list: shapes only a re-cut would offer (issue 41) ----------------


def _pool_index(extra: str = ""):
    from k8s_factories import node as k8s_node

    from jupyter_gpupool.core.usage.index import UsageIndex
    from jupyter_gpupool.core.usage.labels import GFD_COUNT_LABEL

    registry = load_string(
        "kind: pool\npool: {name: p}\nnodes:\n  big: {gpu-type: A100-80G}\n"
        "recut:\n  nodes: [big]\n  configs: [all-disabled, all-7g.80gb, all-balanced]\n" + extra
    )
    big = k8s_node("big", "p", 8, product=A100)
    big["metadata"]["labels"][GFD_COUNT_LABEL] = "8"
    index = UsageIndex()
    index.apply_node("ADDED", big)
    return registry.pool("p"), index


def test_the_shapes_a_re_cut_would_make_are_listed_with_none_free_and_when():
    from jupyter_gpupool.core.words.recut_rows import recut_shape_rows

    pool, index = _pool_index()
    rows = {r["id"]: r for r in recut_shape_rows(pool, index, 90.0, NOW)}
    # all-7g.80gb: 8 x 7g.80gb; all-balanced: 1g.10gb, 2g.20gb, 3g.40gb; all-disabled: whole
    # GPUs, which big offers now (and whole GPUs are not a shape a re-cut is listed for)
    assert sorted(rows) == ["mig-1g.10gb", "mig-2g.20gb", "mig-3g.40gb", "mig-7g.80gb"]
    seven = rows["mig-7g.80gb"]
    assert (seven["free"], seven["total"], seven["recut"], seven["ready_in_s"]) == (0, 0, True, 90)
    assert seven["equivalent"] == "1" and rows["mig-3g.40gb"]["equivalent"] == "3/7"
    assert seven["text"] == "MIG 7g.80gb: 0 free now, more in about 2 min"
    assert seven["resource"] == "nvidia.com/mig-7g.80gb" and seven["recut_nodes"] == ["big"]


def test_a_pool_file_naming_its_shapes_lists_only_those_a_re_cut_would_make():
    from jupyter_gpupool.core.words.recut_rows import recut_shape_rows

    pool, index = _pool_index(
        "shapes:\n  - {id: whole}\n  - {id: mig-7g.80gb, name: A whole A100}\n"
    )
    rows = recut_shape_rows(pool, index, 120.0, NOW)
    assert [(r["id"], r["text"]) for r in rows] == [
        ("mig-7g.80gb", "A whole A100 \u00b7 MIG 7g.80gb: 0 free now, more in about 2 min")
    ]
