"""``gpupool validate -f FILE|DIR ...``: check pool and quota files without applying anything.

All paths are checked together, as the service would load them, so a pool defined twice in two
files or a quota naming a pool that no file defines is caught too. Each file gets one line,
``ok FILE (N pools)`` on stdout, or its problems as ``FILE:LINE: field.path: message`` on stderr.
Exit status 0 when every file is valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .files import add_file_option


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check pool and quota files",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_file_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..poolfiles import check_paths  # not at the top: it loads the pool parser

    report = check_paths(args.files)
    if not report.files:
        print("gpupool validate: no pool files found", file=sys.stderr)
        return 1
    for f in report.files:
        problems = report.problems_in(f)
        if problems:
            for p in problems:
                print(p, file=sys.stderr)
        else:
            print(f"ok {f} ({report.pools_per_file[f]} pools)")
    return 1 if report.problems else 0
