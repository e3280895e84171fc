"""Request bodies: every bad input is a 400 whose message names the field."""

import pytest

from jupyter_gpupool.service.bodies import (
    AdmissionBody,
    parse_admission,
    parse_json,
    parse_label_patch,
)
from jupyter_gpupool.service.errors import ApiError


def admission(value):
    return parse_admission(value, max_gpus=64)


def test_a_full_admission_request():
    body = admission(
        {
            "user": "alice",
            "pools": ["training-pool", "inference-pool", "training-pool"],
            "gpus": 2,
            "gpu_type": None,
            "server": "",
            "groups": ["ml"],
            "reclaim": False,
        }
    )
    assert body == AdmissionBody(
        user="alice",
        groups=("ml",),
        pools=("training-pool", "inference-pool"),
        gpus=2,
        gpu_type=None,
        server="",
        reclaim=False,
    )
    assert admission({}) == AdmissionBody(None, None, (), 0, None, "", True)


@pytest.mark.parametrize(
    "value, message",
    [
        ([], "must be a JSON object"),
        ({"gpu": 1}, "unknown key 'gpu'; did you mean 'gpus'?"),
        ({"gpus": -1}, "gpus must not be negative"),
        ({"gpus": 1.5}, "gpus must be a whole number of GPUs, not 1.5"),
        ({"gpus": 2.0}, "gpus must be a whole number of GPUs"),
        ({"gpus": "2"}, "gpus must be a whole number of GPUs"),
        ({"gpus": True}, "gpus must be a whole number of GPUs, not true"),
        ({"gpus": 10**20}, "one server may ask for at most 64 GPUs"),
        ({"pools": "training"}, "pools must be a list of pool names"),
        ({"pools": [1]}, "pools[0] must be a pool name or"),
        ({"pools": [""]}, "pools[0] must not be empty"),
        ({"pools": ["p"] * 65}, "at most 64"),
        ({"user": ""}, "user must not be empty"),
        ({"user": "x" * 300}, "longer than 255"),
        ({"groups": "ml"}, "groups must be a list"),
        ({"reclaim": "yes"}, "reclaim must be true or false"),
        ({"server": None}, "server must be a string"),
    ],
)
def test_bad_admission_requests(value, message):
    with pytest.raises(ApiError) as e:
        admission(value)
    assert e.value.status == 400
    assert message in e.value.message


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"", "needs a JSON body"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 100000, "nested too deeply"),
    ],
)
def test_bad_json(raw, message):
    with pytest.raises(ApiError) as e:
        parse_json(raw)
    assert e.value.status == 400 and message in e.value.message


def test_label_patches():
    patch = parse_label_patch({"labels": {"runwhere.ai/pool": "dev-pool", "old": None}})
    assert patch.labels == {"runwhere.ai/pool": "dev-pool", "old": None}
    assert not patch.overwrite
    for value, message in [
        ({}, 'needs "labels"'),
        ({"labels": {}}, "non-empty object"),
        ({"labels": {"bad key!": "x"}}, "not a valid Kubernetes label key"),
        ({"labels": {"k": "bad value!"}}, "not a valid Kubernetes label value"),
        ({"labels": {"k": 3}}, 'must be a string or null, not 3 (quote it: "3")'),
        ({"labels": {"k": "v"}, "overwrite": "yes"}, "overwrite must be true or false"),
        ({"labels": {"k": "v"}, "force": True}, "unknown key 'force'"),
    ]:
        with pytest.raises(ApiError) as e:
            parse_label_patch(value)
        assert message in e.value.message, value
