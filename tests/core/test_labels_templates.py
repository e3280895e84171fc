"""Label values for arbitrary names, and the pod template merge."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpupool.core.kube.quantities import format_cpu, format_memory, parse_quantity
from jupyter_gpupool.core.kube.tolerations import tolerates
from jupyter_gpupool.core.pools.templates import merge_lists, merge_templates
from jupyter_gpupool.core.usage.labels import is_label_key, is_label_value, safe_label_value


@pytest.mark.parametrize("name", ["alice", "ml-research", "", "a.b_c-d", "x" * 63])
def test_valid_label_values_are_kept(name):
    assert safe_label_value(name) == name


def test_emails_and_group_subjects_get_a_readable_hashed_label():
    label = safe_label_value("alice@example.org")
    assert label.startswith("alice-example.org-") and len(label) == len("alice-example.org-") + 8
    assert safe_label_value("group:ml-research").startswith("group-ml-research-")
    # names that escape alike still differ
    assert safe_label_value("a@b") != safe_label_value("a#b")
    assert safe_label_value("ü") == safe_label_value("ü")  # deterministic


@given(st.text(max_size=300))
def test_safe_label_value_is_always_valid(name):
    label = safe_label_value(name)
    assert is_label_value(label)
    assert len(label) <= 63


def test_label_keys():
    assert is_label_key("runwhere.ai/pool") and is_label_key("app")
    assert not is_label_key("Bad.Prefix/x") and not is_label_key("a/b/c") and not is_label_key("")


def test_merge_templates_deep_dicts_named_lists_and_later_wins():
    pool = {
        "nodeSelector": {"runwhere.ai/pool": "training-pool", "zone": "a"},
        "env": [{"name": "A", "value": "pool"}, {"name": "B", "value": "pool"}],
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "resources": {"limits": {"memory": "64Gi"}},
        "image": "pool-image",
    }
    platform = {
        "nodeSelector": {"zone": "b", "fabric": "ib"},
        "env": [
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "C", "value": "platform"},
        ],
        "tolerations": [
            {"key": "dedicated", "operator": "Exists"},
            {"key": "gpu", "operator": "Exists"},
        ],
        "resources": {"limits": {"cpu": "8"}},
        "image": None,
    }
    merged = merge_templates(pool, platform)
    assert merged == {
        "nodeSelector": {"runwhere.ai/pool": "training-pool", "zone": "b", "fabric": "ib"},
        "env": [
            {"name": "A", "value": "pool"},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "C", "value": "platform"},
        ],
        "tolerations": [
            {"key": "dedicated", "operator": "Exists"},
            {"key": "gpu", "operator": "Exists"},
        ],
        "resources": {"limits": {"memory": "64Gi", "cpu": "8"}},
    }
    # inputs untouched, output not aliased
    assert pool["nodeSelector"] == {"runwhere.ai/pool": "training-pool", "zone": "a"}
    merged["resources"]["limits"]["cpu"] = "1"
    assert platform["resources"]["limits"]["cpu"] == "8"


def test_merge_of_nothing_and_of_scalar_over_dict():
    assert merge_templates() == {}
    assert merge_templates(None, {}, {"a": 1}) == {"a": 1}
    assert merge_templates({"a": {"b": 1}}, {"a": 2}) == {"a": 2}
    assert merge_lists([1, 2], [2, 3]) == [1, 2, 3]


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, True),
        ({"key": "nvidia.com/gpu", "value": "other"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "operator": "Exists"}, False),
    ],
)
def test_tolerates(toleration, expected):
    assert tolerates([toleration], "nvidia.com/gpu", "present", "NoSchedule") is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (8, "8"),
        ("500m", "0.5"),
        ("1.5", "1.5"),
        ("64Gi", str(64 * 2**30)),
        ("1e3", "1000"),
        ("2E", str(2 * 10**18)),
    ],
)
def test_quantities(value, expected):
    assert parse_quantity(value) == Decimal(expected)


@pytest.mark.parametrize("value", [True, "lots", "1.5x", None, [1]])
def test_not_quantities(value):
    with pytest.raises(ValueError):
        parse_quantity(value)


def test_quantity_formats():
    assert format_cpu(Decimal("2.5")) == "2500m" and format_cpu(Decimal(17)) == "17"
    assert format_memory(Decimal(68 * 2**30)) == "68Gi"
    assert format_memory(Decimal(1536 * 2**20)) == "1536Mi"
    assert format_memory(Decimal(1000)) == "1000"


def test_an_owned_last_layer_is_merged_as_the_others_and_taken_without_a_copy():
    """An admission's own terms (``owned``) merge as a last layer does (later wins, dicts
    deep, lists merged) and their values are taken as they are (no copy: they are the
    caller's, built for this merge); the other layers are still never aliased."""
    template = {"labels": {"team": "a", "tier": "x"}, "tolerations": [{"key": "t"}], "image": "i"}
    ours = {
        "labels": {"tier": "ours"},
        "tolerations": [{"key": "gpu"}],
        "nodeSelector": {"pool": "p"},
        "image": None,
    }
    selector = ours["nodeSelector"]
    merged = merge_templates({"resources": {"requests": {"cpu": "1"}}}, template, owned=ours)
    assert merged == {
        "resources": {"requests": {"cpu": "1"}},
        "labels": {"team": "a", "tier": "ours"},
        "tolerations": [{"key": "t"}, {"key": "gpu"}],
        "nodeSelector": {"pool": "p"},
    }
    assert merged["nodeSelector"] is selector, "the owned layer's value was copied"
    assert merged["labels"] is not template["labels"]
    assert merged == merge_templates({"resources": {"requests": {"cpu": "1"}}}, template, ours)
