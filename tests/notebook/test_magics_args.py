"""Parsing %gpupool lines: UsageError with the usage line, never SystemExit."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from jupyter_gpupool.magics.args import Command, HelpRequested, parse_line


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("status", Command("status")),
        ("pools", Command("pools")),
        (
            "launch big --pools training-pool,inference-pool --gpus 2 --gpu-type A100-80G --wait",
            Command(
                "launch",
                server="big",
                pools=("training-pool", "inference-pool"),
                gpus=2,
                gpu_type="A100-80G",
                wait=True,
            ),
        ),
        ("launch --gpus 0", Command("launch", gpus=0)),
        ("release big", Command("release", server="big")),
        ("release", Command("release")),
    ],
)
def test_lines(line, command):
    assert parse_line(line) == command


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("", "say what to do"),
        ("launhc", "unknown command 'launhc'"),
        ("launch --gpus two", "'two' is not a whole number of GPUs"),
        ("launch --gpus -1", "argument --gpus"),
        ("launch --pools a,,b", "is not a comma separated list of pool names"),
        ("launch big --colour red", "unrecognized arguments: --colour red"),
        ("release a b", "unrecognized arguments: b"),
        ("status 'unclosed", "No closing quotation"),
    ],
)
def test_errors_are_usage_errors_with_the_usage_line(line, words):
    with pytest.raises(UsageError) as e:
        parse_line(line)
    message = str(e.value)
    assert words in message
    assert "%gpupool" in message.splitlines()[-1] or "usage:" in message


def test_never_system_exit():
    for line in ("launch --help", "-h", "help", "help launch", "launch --nope", "help nope"):
        try:
            parse_line(line)
        except (UsageError, HelpRequested):
            pass


def test_help():
    with pytest.raises(HelpRequested) as e:
        parse_line("help")
    assert "status" in e.value.text and "launch" in e.value.text and "release" in e.value.text
    with pytest.raises(HelpRequested) as e:
        parse_line("help launch")
    assert "--pools A,B" in e.value.text and "--wait" in e.value.text
    with pytest.raises(HelpRequested) as e:
        parse_line("launch -h")
    assert e.value.text.startswith("usage: %gpupool launch")


def test_user_options():
    assert Command("launch", pools=("a", "b"), gpus=2, gpu_type="T4").user_options() == {
        "pools": ["a", "b"],
        "gpus": 2,
        "gpu_type": "T4",
    }
    assert Command("launch").user_options() == {"pools": [], "gpus": 1}
