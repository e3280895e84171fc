"""The one GPU-count rule the service's request bodies and the spawner's options both apply."""

from __future__ import annotations

import pytest

from jupyter_gpupool.core.words.launch_options import GPUCountError, gpu_count


@pytest.mark.parametrize("value", [0, 1, 8, 64])
def test_whole_counts_up_to_the_maximum_pass(value):
    assert gpu_count(value, 64) == value


@pytest.mark.parametrize(
    ("value", "kw", "message"),
    [
        (True, {}, "gpus must be a whole number of GPUs, not true"),
        (1.5, {}, "gpus must be a whole number of GPUs, not 1.5"),
        (2.0, {}, "gpus must be a whole number of GPUs, not 2.0"),
        ("2", {}, 'gpus must be a whole number of GPUs, not "2"'),
        (None, {}, "gpus must be a whole number of GPUs, not null"),
        (-1, {}, "gpus must not be negative, not -1"),
        (65, {}, "gpus is 65; one server may have at most 64 GPUs"),
        (65, {"request": True}, "gpus is 65; one server may ask for at most 64 GPUs"),
        (2, {"field": "n", "request": True}, "n is 2; one server may ask for at most 1 GPU"),
        ("x", {"shown": repr}, "gpus must be a whole number of GPUs, not 'x'"),
    ],
)
def test_what_is_not_a_gpu_count(value, kw, message):
    kw.setdefault("request", False)
    maximum = 1 if kw.get("field") == "n" else 64
    with pytest.raises(GPUCountError) as e:
        gpu_count(value, maximum, **kw)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)


def test_whole_floats_only_when_asked():
    assert gpu_count(2.0, 64, whole_floats=True) == 2
    assert type(gpu_count(2.0, 64, whole_floats=True)) is int
    with pytest.raises(GPUCountError, match="must not be negative, not -1"):
        gpu_count(-1.0, 64, whole_floats=True)
    with pytest.raises(GPUCountError, match="whole number"):
        gpu_count(2.5, 64, whole_floats=True)
