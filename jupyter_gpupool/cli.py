"""The ``gpupool`` command: gpuctl's verbs plus ``demo`` and ``sim``.

Each verb lives in its own module under :mod:`jupyter_gpupool.commands`, which provides
``register(subparsers)``; the parser it adds sets ``func(args) -> int`` as its default.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

# Modules under jupyter_gpupool.commands, in the order their verbs appear in --help.
COMMAND_MODULES = ["get", "describe", "create", "delete", "label", "validate", "demo", "sim"]


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 1
    return int(func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
