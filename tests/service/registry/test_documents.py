"""Pool and quota changes as new document texts (pure: no files, no cluster)."""

import pytest
import yaml

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.service.errors import ApiError
from jupyter_gpupool.service.registry.documents import (
    REQUEST,
    delete_pool,
    empty_layout,
    load_layout,
    replace_quotas,
    upsert_pools,
)


def key_for(stem):
    return f"pools/{stem}.yaml"


def pool_doc(name, nodes=(), **extra):
    doc = {
        "kind": "pool",
        "version": "v0.1",
        "pool": {"name": name},
        "nodes": {n: {"gpu-type": "A100"} for n in nodes},
    }
    doc.update(extra)
    return yaml.safe_dump(doc, sort_keys=False)


QUOTA = """kind: quota
version: v0.1
quota: {name: team-quotas}
namespace:
  ml: {gpu: 8}
pools:
  training:
    groups:
      ml: {guaranteed: 4, limit: 8}
"""


def test_a_new_pool_gets_a_file_of_its_own():
    edit = upsert_pools(empty_layout(), pool_doc("training", ["n1"]), key_for)
    assert edit.created == ("training",) and edit.replaced == ()
    assert list(edit.writes) == ["pools/training.yaml"]
    assert edit.deletes == ()
    doc = yaml.safe_load(edit.writes["pools/training.yaml"])
    assert doc == {
        "kind": "pool",
        "version": "v0.1",
        "pool": {"name": "training"},
        "nodes": {"n1": {"gpu-type": "A100"}},
    }
    assert list(edit.after.registry.pools) == ["training"]


def test_replacing_a_pool_alone_in_its_file_keeps_the_file_name():
    layout = load_layout({"pools/big-gpus.yaml": pool_doc("training", ["n1"])})
    edit = upsert_pools(layout, pool_doc("training", ["n1", "n2"]), key_for)
    assert edit.replaced == ("training",) and edit.created == ()
    assert list(edit.writes) == ["pools/big-gpus.yaml"]
    assert set(edit.after.registry.pools["training"].nodes) == {"n1", "n2"}


def test_replacing_a_pool_in_a_shared_file_moves_it_out():
    shared = pool_doc("training", ["n1"]) + "---\n" + pool_doc("dev", ["n2"])
    layout = load_layout({"pools/all.yaml": shared})
    edit = upsert_pools(layout, pool_doc("training", ["n1", "n3"]), key_for)
    assert set(edit.writes) == {"pools/all.yaml", "pools/training.yaml"}
    rest = list(yaml.safe_load_all(edit.writes["pools/all.yaml"]))
    assert [d["pool"]["name"] for d in rest] == ["dev"]
    assert set(edit.after.registry.pools) == {"training", "dev"}


def test_a_file_name_already_taken_gets_a_suffix():
    layout = load_layout(
        {
            "pools/training.yaml": QUOTA.replace("training:", "dev:"),
            "pools/dev.yaml": pool_doc("dev"),
        }
    )
    edit = upsert_pools(layout, pool_doc("training"), key_for)
    assert "pools/training-2.yaml" in edit.writes


def test_problems_in_the_body_point_at_its_own_lines():
    layout = load_layout({"pools/inference.yaml": pool_doc("inference", ["n1"])})
    with pytest.raises(DocumentError) as e:
        upsert_pools(layout, pool_doc("training", ["n1"]), key_for)
    [problem] = e.value.problems
    assert problem.file == REQUEST
    assert "already in pool 'inference'" in problem.message
    body = "kind: pool\nversion: v0.1\npool: {name: x}\nnodes:\n  n1: {gpu_type: A100}\n"
    with pytest.raises(DocumentError) as e:
        upsert_pools(layout, body, key_for)
    assert "<request>:5: nodes.n1" in str(e.value)
    assert "did you mean 'gpu-type'?" in str(e.value)


def test_quota_documents_are_refused_where_pools_go_and_the_other_way_round():
    with pytest.raises(ApiError) as e:
        upsert_pools(empty_layout(), pool_doc("a") + "---\n" + QUOTA, key_for)
    assert e.value.status == 400 and "PUT api/v1/quotas" in e.value.message
    with pytest.raises(ApiError) as e:
        replace_quotas(empty_layout(), pool_doc("a"), key_for)
    assert e.value.status == 400 and "POST api/v1/pools" in e.value.message
    with pytest.raises(ApiError):
        upsert_pools(empty_layout(), "# nothing\n", key_for)


def test_deleting_a_pool_removes_its_file_unless_a_quota_still_needs_it():
    layout = load_layout(
        {"pools/training.yaml": pool_doc("training"), "pools/dev.yaml": pool_doc("dev")}
    )
    edit = delete_pool(layout, "dev", key_for)
    assert edit.deletes == ("pools/dev.yaml",) and edit.writes == {}
    assert edit.removed == ("dev",)
    layout = load_layout({**layout.texts, "pools/quotas.yaml": QUOTA})
    with pytest.raises(DocumentError) as e:
        delete_pool(layout, "training", key_for)
    assert "unknown pool 'training'" in str(e.value)


def test_replacing_quotas_replaces_every_quota_document_and_keeps_pool_sections():
    pool_with_quota = pool_doc("dev", quota={"groups": {"ml": {"guaranteed": 1}}})
    layout = load_layout(
        {
            "pools/training.yaml": pool_doc("training"),
            "pools/dev.yaml": pool_with_quota,
            "pools/quotas.yaml": QUOTA,
            "pools/old.yaml": QUOTA.replace("team-quotas", "old")
            .replace("training:", "x:")
            .replace("  x:\n    groups:\n      ml: {guaranteed: 4, limit: 8}\n", "  {}\n")
            .replace("namespace:\n  ml: {gpu: 8}\n", "")
            .replace("pools:\n  {}\n", ""),
        }
    )
    new = QUOTA.replace("limit: 8", "limit: 12")
    edit = replace_quotas(layout, new, key_for)
    # team-quotas was alone in quotas.yaml, so it stays there; old.yaml goes away
    assert set(edit.writes) == {"pools/quotas.yaml"}
    assert edit.deletes == ("pools/old.yaml",)
    reg = edit.after.registry
    assert reg.quota("training").groups["ml"].limit == 12
    assert reg.quota("dev").groups["ml"].guaranteed == 1
    assert [q.name for q in reg.quota_documents] == ["team-quotas"]


def test_document_names_never_become_paths():
    body = QUOTA.replace("team-quotas", "../../etc/passwd")
    edit = replace_quotas(load_layout({"pools/t.yaml": pool_doc("training")}), body, key_for)
    [written] = edit.writes
    assert written.startswith("pools/") and "/.." not in written and written.count("/") == 1
