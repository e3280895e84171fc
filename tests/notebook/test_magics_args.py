"""Parsing %gpupool lines: UsageError with the usage line, never SystemExit."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_gpupool.notebook.magics.args import Command, HelpRequested, parse_line
from jupyter_gpupool.notebook.magics.magic import GPUPoolMagics


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
        (
            "launch big --gpus 2 --queue --wait",
            Command("launch", server="big", gpus=2, wait=True, queue=True),
        ),
        ("queue", Command("queue")),
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


def raised(call) -> BaseException:
    """What ``call()`` raised, SystemExit included (pytest.raises would let that one through)."""
    try:
        call()
    except BaseException as e:  # SystemExit is what is looked for
        return e
    pytest.fail("nothing was raised")


# argparse's habit is to print and raise SystemExit, which would end a kernel's cell with a
# traceback (or, in a plain Python, the process): the magic's parser must not.
@pytest.mark.parametrize(
    ("line", "first_line", "usage"),
    [
        ("launch --nope", "unrecognized arguments: --nope", "usage: %gpupool launch [-h]"),
        ("launch --gpus", "argument --gpus: expected one argument", "usage: %gpupool launch [-h]"),
        ("status extra", "unrecognized arguments: extra", "usage: %gpupool status [-h]"),
        ("pools --all", "unrecognized arguments: --all", "usage: %gpupool pools [-h]"),
        ("-x", "unrecognized arguments: -x", "usage: %gpupool [-h] {status,pools,launch"),
        ("queue --all", "unrecognized arguments: --all", "usage: %gpupool queue [-h]"),
        ("--version", "unrecognized arguments: --version", "usage: %gpupool [-h] {status,"),
        ("help nope", "argument COMMAND: invalid choice: 'nope'", "usage: %gpupool help [COMMAND]"),
    ],
)
def test_bad_arguments_are_usage_errors_not_system_exit(line, first_line, usage):
    error = raised(lambda: parse_line(line))
    assert type(error) is UsageError, f"{line!r} raised {error!r}"
    lines = str(error).splitlines()
    assert lines[0].startswith(first_line)
    assert lines[1].startswith(usage)


@pytest.mark.parametrize(
    ("line", "usage"),
    [
        ("-h", "usage: %gpupool [-h] {status,pools,launch,queue,release,help} ..."),
        ("--help", "usage: %gpupool [-h] {status,pools,launch,queue,release,help} ..."),
        ("help", "usage: %gpupool [-h] {status,pools,launch,queue,release,help} ..."),
        ("help queue", "usage: %gpupool queue [-h]"),
        ("help launch", "usage: %gpupool launch [-h] [--pools A,B] [--gpus N]"),
        ("launch --help", "usage: %gpupool launch [-h] [--pools A,B] [--gpus N]"),
        ("release -h", "usage: %gpupool release [-h] [NAME]"),
        ("status --help", "usage: %gpupool status [-h]"),
        ("pools -h", "usage: %gpupool pools [-h]"),
    ],
)
def test_help_is_text_to_show_not_system_exit(line, usage):
    asked = raised(lambda: parse_line(line))
    assert type(asked) is HelpRequested, f"{line!r} raised {asked!r}"
    assert asked.text.startswith(usage)


def test_the_magic_shows_help_and_refuses_bad_lines_without_exiting(capsys):
    shell = InteractiveShell.instance()
    shell.register_magics(GPUPoolMagics(shell))
    # help is printed, and the cell goes on
    assert shell.run_line_magic("gpupool", "launch --help") is None
    printed = capsys.readouterr().out
    assert printed.startswith("usage: %gpupool launch [-h]") and "--wait" in printed
    # a bad line is IPython's UsageError: one red line in a notebook, no traceback, no exit
    error = raised(lambda: shell.run_line_magic("gpupool", "launch --nope"))
    assert type(error) is UsageError
    assert str(error).startswith("unrecognized arguments: --nope\nusage: %gpupool launch")
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")  # argparse printed nothing on the way


def test_help():
    with pytest.raises(HelpRequested) as e:
        parse_line("help")
    assert "status" in e.value.text and "launch" in e.value.text and "release" in e.value.text
    assert "queue" in e.value.text
    with pytest.raises(HelpRequested) as e:
        parse_line("help launch")
    assert "--pools A,B" in e.value.text and "--wait" in e.value.text
    # --queue, in words a user understands
    words = " ".join(e.value.text.split())  # argparse wraps at the terminal's width
    assert "--queue wait in line if no pool can take it now" in words
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
    # --queue: wait in line if no pool can take it now (GPUPoolSpawner's "queue" option)
    assert Command("launch", gpus=2, queue=True).user_options() == {
        "pools": [],
        "gpus": 2,
        "queue": True,
    }
