"""The ``-f FILE|DIR`` option of ``create``, ``delete`` and ``validate``, and reading what it names.

One definition, so the three verbs spell the option, its repetition (``-f a -f b`` or
``-f a b``) and its help alike, as gpuctl's verbs do. Which files a directory stands for is
:func:`jupyter_gpupool.poolfiles.expand_paths`'s rule, the same as the service's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .connection import CommandError


def add_file_option(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "-f",
        "--file",
        dest="files",
        action="extend",
        nargs="+",
        required=required,
        metavar="FILE|DIR",
        help="pool file or directory of them (repeat -f, or give several after one -f)",
    )


def read_files(paths: list[str]) -> list[tuple[str, str]]:
    """``(name, text)`` of every file (directories: their pool files), or a CommandError."""
    from ..poolfiles import expand_paths  # not at the top: it loads the pool parser

    files = expand_paths(paths)
    if not files:
        raise CommandError(f"no pool files in {', '.join(paths)}")
    out = []
    for f in files:
        try:
            out.append((f, Path(f).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as e:
            raise CommandError(f"cannot read {f}: {getattr(e, 'strerror', None) or e}") from None
    return out
