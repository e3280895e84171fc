"""Parsing ``%gpupool`` lines: argparse that raises :class:`UsageError`, never ``SystemExit``.

A parse error says what is wrong and the subcommand's usage line; ``-h`` gives the help text
as a :class:`HelpRequested` for the magic to show. Pure: no output, no I/O.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from IPython.core.error import UsageError

from ...core.words.shape_choice import ENTRY_SEPARATOR, EntryError, entry_json, split_entry

COMMANDS = ("status", "pools", "launch", "queue", "release", "help")
USAGE = "%gpupool {status,pools,launch,queue,release,help} ..."


class HelpRequested(Exception):
    """``-h``/``--help`` or ``help``: ``text`` is what to show."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


@dataclass(frozen=True)
class Command:
    """A parsed line: the subcommand and its arguments."""

    name: str
    server: str | None = None
    pools: tuple[str, ...] = ()
    #: ``launch --pools training-pool:mig-3g.40gb,...``: the shape asked for in each of
    #: ``pools`` (``None``: whole GPUs); empty when no pool names one
    shapes: tuple[str | None, ...] = ()
    gpus: int | None = None
    gpu_type: str | None = None
    wait: bool = False
    #: ``launch --queue``: wait in line when no pool can take it now
    queue: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def user_options(self, default_gpus: int = 1) -> dict[str, Any]:
        """The ``user_options`` a launch sends (GPUPoolSpawner's keys)."""
        shapes = self.shapes or (None,) * len(self.pools)
        options: dict[str, Any] = {
            "pools": [entry_json(p, s) for p, s in zip(self.pools, shapes, strict=True)],
            "gpus": default_gpus if self.gpus is None else self.gpus,
        }
        if self.gpu_type:
            options["gpu_type"] = self.gpu_type
        if self.queue:
            options["queue"] = True
        return options


class MagicArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` for magics: errors are :class:`UsageError` with the usage line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\nusage: {self.format_usage().removeprefix('usage: ').strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status:
            raise UsageError((message or "").strip() or self.format_usage().strip())
        raise HelpRequested(message or self.format_help())

    def print_help(self, file: Any = None) -> None:
        raise HelpRequested(self.format_help())

    def print_usage(self, file: Any = None) -> None:
        raise HelpRequested(self.format_usage())


def _pool_list(value: str) -> list[tuple[str, str | None]]:
    """``training-pool:mig-3g.40gb,inference-pool`` → ``(pool, shape)`` pairs."""
    try:
        return [split_entry(p) for p in value.split(",")]
    except EntryError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a comma separated list of pool names, each POOL or "
            f"POOL{ENTRY_SEPARATOR}SHAPE (e.g. training-pool{ENTRY_SEPARATOR}mig-3g.40gb)"
        ) from None


def _gpu_count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of GPUs") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"the GPU count must not be negative, not {n}")
    return n


def build_parser() -> MagicArgumentParser:
    parser = MagicArgumentParser(
        prog="%gpupool",
        description="GPU pools from a notebook: where this server runs, the pools you may use, "
        "and more servers in them.",
        add_help=True,
    )
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    sub.add_parser(
        "status",
        help="this server's pool, node, GPUs and quota state",
        description="This server's pool, node, GPU type and count, visible devices, whether it "
        "runs over quota (and may be reclaimed), and `nvidia-smi -L` where there is one.",
    )
    sub.add_parser(
        "pools",
        help="the pools you may use, with free GPUs and your quota",
        description="The pools you may use, with their free GPUs and your quota in each.",
    )
    launch = sub.add_parser(
        "launch",
        help="start a named server in the first of some pools that can take it",
        description="Start a named server through JupyterHub with these pools (in priority "
        "order) and GPUs, showing the hub's progress. A pool may name the shape to get there, "
        "POOL:SHAPE (a MIG instance, a shared GPU: one per server, with --gpus 1; %gpupool "
        "pools lists each pool's shapes); a pool without one gives whole GPUs. NAME defaults "
        "to the first pool and the GPU count, e.g. training-pool-2gpu. With --queue a start no pool can take now waits "
        "in line for GPUs instead of failing (%gpupool queue shows its place; %gpupool release "
        "NAME leaves the line).",
    )
    launch.add_argument("name", nargs="?", metavar="NAME", help="the server's name")
    launch.add_argument(
        "--pools",
        type=_pool_list,
        default=[],
        metavar="A,B",
        help="pools in priority order, each POOL or POOL:SHAPE (default: your default order)",
    )
    launch.add_argument(
        "--gpus", type=_gpu_count, default=None, metavar="N", help="GPUs (0: CPU only; default 1)"
    )
    launch.add_argument("--gpu-type", default=None, metavar="T", help="only nodes with this GPU")
    launch.add_argument(
        "--queue",
        action="store_true",
        help="wait in line if no pool can take it now (instead of failing at once)",
    )
    launch.add_argument(
        "--wait", action="store_true", help="wait until the server is ready (or failed)"
    )
    sub.add_parser(
        "queue",
        help="your servers waiting in line for GPUs, with their places",
        description="Your servers waiting in line for GPUs (started with launch --queue or the "
        "spawn form's 'wait in line'): their place in line (1 = next), GPUs, pools, whether "
        "they would run within quota, and how long they have waited.",
    )
    release = sub.add_parser(
        "release",
        help="stop one of your servers",
        description="Stop one of your named servers (default: the last one launched here).",
    )
    release.add_argument("name", nargs="?", metavar="NAME", help="the server's name")
    helps = sub.add_parser("help", help="this help, or a command's", add_help=False)
    helps.add_argument("topic", nargs="?", choices=COMMANDS, metavar="COMMAND")
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, MagicArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the %gpupool parser has no subcommands")


def parse_line(line: str, parser: MagicArgumentParser | None = None) -> Command:
    """The command of a ``%gpupool`` line; :class:`UsageError` or :class:`HelpRequested`."""
    parser = parser or build_parser()
    try:
        argv: Sequence[str] = shlex.split(line)
    except ValueError as e:
        raise UsageError(f"{e}\nusage: {USAGE}") from None
    if not argv:
        raise UsageError(f"say what to do\nusage: {USAGE}")
    if argv[0] not in COMMANDS and not argv[0].startswith("-"):
        raise UsageError(f"unknown command {argv[0]!r}\nusage: {USAGE}")
    if argv[0].startswith("-"):
        parser.parse_args(argv)  # -h: the help; anything else: an error
    # each subcommand's own parser, so that an error shows that subcommand's usage line
    sub = _subparsers(parser)[argv[0]]
    args = sub.parse_args(argv[1:])
    args.command = argv[0]
    if args.command == "help":
        if args.topic and args.topic != "help":
            _subparsers(parser)[args.topic].parse_args(["--help"])
        raise HelpRequested(parser.format_help())
    entries = list(getattr(args, "pools", ()) or ())
    shapes = tuple(shape for _, shape in entries)
    return Command(
        name=args.command,
        server=getattr(args, "name", None),
        pools=tuple(pool for pool, _ in entries),
        shapes=shapes if any(shapes) else (),
        gpus=getattr(args, "gpus", None),
        gpu_type=getattr(args, "gpu_type", None),
        wait=bool(getattr(args, "wait", False)),
        queue=bool(getattr(args, "queue", False)),
    )
