"""The core's Kubernetes rules (label syntax, tolerations) against the tables in kube_cases.py,
whose answers come from the Kubernetes docs and a real kube-apiserver."""

from __future__ import annotations

import pytest
from kube_cases import GPU_TAINT, LABEL_KEYS, LABEL_VALUES, TOLERATION_CHECKS, TOLERATION_MATCHES

from jupyter_gpupool.core.kube.names import is_label_key, is_label_value
from jupyter_gpupool.core.kube.tolerations import (
    tolerates,
    tolerates_taint,
    toleration_problems,
    tolerations_problems,
)
from jupyter_gpupool.core.usage import labels


@pytest.mark.parametrize(("key", "valid"), LABEL_KEYS)
def test_label_keys(key, valid):
    assert is_label_key(key) is valid
    assert labels.is_label_key(key) is valid  # the name the service and the CLI import


@pytest.mark.parametrize(("value", "valid"), LABEL_VALUES)
def test_label_values(value, valid):
    assert is_label_value(value) is valid
    assert labels.is_label_value(value) is valid


@pytest.mark.parametrize(("toleration", "causes"), TOLERATION_CHECKS)
def test_toleration_validation_refuses_what_the_api_server_refuses(toleration, causes):
    got = toleration_problems(toleration, "spec.tolerations[0]")
    assert [f for f, _ in got] == [f"spec.tolerations[0].{f}" for f, _ in causes]
    for (_, message), (_, start) in zip(got, causes, strict=True):
        assert message.startswith(start)


def test_every_toleration_of_a_list_is_checked_with_its_index():
    got = tolerations_problems([{"operator": "Exists"}, {"key": "k", "operator": "Gt"}])
    assert [f for f, _ in got] == ["spec.tolerations[1].operator"]
    assert tolerations_problems(None) == []
    assert tolerations_problems("x") == [("spec.tolerations", "Invalid value: must be a list")]


@pytest.mark.parametrize(("toleration", "expected"), TOLERATION_MATCHES)
def test_toleration_matching(toleration, expected):
    assert tolerates_taint([toleration], GPU_TAINT) is expected
    assert tolerates([toleration], "nvidia.com/gpu", "present", "NoSchedule") is expected


@pytest.mark.parametrize("operator", ["Gt", "Lt", "exists", "In"])
def test_an_operator_the_api_server_refuses_tolerates_nothing(operator):
    """Both copies of this rule used to disagree: the core took any operator but Exists as Equal."""
    t = {"key": "nvidia.com/gpu", "operator": operator, "value": "present"}
    assert not tolerates([t], "nvidia.com/gpu", "present", "NoSchedule")
    assert toleration_problems(t, "t")  # and validation says why


def test_any_toleration_of_several_suffices():
    tols = [{"key": "other", "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert tolerates_taint(tols, GPU_TAINT)
    assert not tolerates_taint(tols[:1], GPU_TAINT)
    assert not tolerates_taint(None, GPU_TAINT)
