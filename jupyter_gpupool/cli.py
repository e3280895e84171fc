"""The ``gpupool`` command: gpuctl's verbs plus ``demo`` and ``sim``.

Each verb lives in its own module under :mod:`jupyter_gpupool.commands`, which provides
``register(subparsers)``; the parser it adds sets ``func(args) -> int`` as its default.

The connection options and ``--json`` may also come before the verb, as kubectl's and gpuctl's
global options do (``gpupool --url URL get pools``); given after it too, the verb's own win.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .commands.connection import CONNECTION_OPTIONS, add_connection_options
from .demo import DEFAULT_STATE_DIR

# Modules under jupyter_gpupool.commands, in the order their verbs appear in --help.
COMMAND_MODULES = ["get", "describe", "create", "delete", "label", "validate", "demo", "sim"]


#: Where the top-level parser keeps the options given before the verb; a verb's parser would
#: otherwise overwrite them with its own defaults (argparse sets a subparser's defaults last).
GLOBAL = "global_"


class _Parser(argparse.ArgumentParser):
    """Usage errors exit with 1, a user error (2 means the service could not be reached)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpupool",
        description="GPU node pools for JupyterHub on Kubernetes (gpuctl-compatible verbs).",
    )
    add_connection_options(parser, dest_prefix=GLOBAL)
    parser.add_argument(
        "--json",
        dest=GLOBAL + "json",
        action="store_true",
        help="print get's and describe's answer as JSON (gpuctl's spelling of -o json)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"jupyter_gpupool.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"jupyter_gpupool.commands.{name}":
                continue  # verb not built yet
            raise
        module.register(subparsers)
    return parser


def apply_global_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Give the verb the options that came before it, unless it was given its own."""
    verb = f"gpupool {args.command}" if args.command else "gpupool"
    for name in CONNECTION_OPTIONS:
        value = getattr(args, GLOBAL + name)
        option = "--" + name.replace("_", "-")
        if value is None:
            continue
        if args.command == "demo" and name == "state_dir":
            # demo's own --state-dir has a default (./gpupool-demo), so "not given" looks like it
            if args.state_dir == Path(DEFAULT_STATE_DIR):
                args.state_dir = Path(value)
        elif not hasattr(args, name):
            parser.error(f"{verb} does not take {option}")
        elif getattr(args, name) is None:
            setattr(args, name, value)
    if getattr(args, GLOBAL + "json"):
        if not hasattr(args, "output"):
            parser.error(f"{verb} does not take --json (it is -o json, for get and describe)")
        if args.output == "table":  # the default: an -o given after the verb wins
            args.output = "json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    apply_global_options(parser, args)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 1
    return int(func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
