"""``gpupool validate -f FILE|DIR ... [--nodes]``: check pool and quota files without applying
anything.

All paths are checked together, as the service would load them, so a pool defined twice in two
files or a quota naming a pool that no file defines is caught too. Each file gets one line,
``ok FILE (N pools)`` on stdout, or its problems as ``FILE:LINE: field.path: message`` on stderr.
With ``--nodes``, the files are also checked against the cluster the service sees: a shape a
pool's ``shapes`` names that none of its nodes offers is a problem (``GET api/v1/pools``'s
``shapes_offered``), and so is a booking that does not fit its pool's capacity in one of its
windows, with the pool's guaranteed quotas (``shapes`` and ``gpu_total``). Exit status 0 when every file is valid, 1 otherwise, 2 when ``--nodes``
could not reach the service.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .connection import add_connection_options, run
from .files import add_file_option

if TYPE_CHECKING:
    from ..client import GPUPoolClient
    from ..core.pools.model import Registry


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check pool and quota files",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_file_option(parser)
    parser.add_argument(
        "--nodes",
        action="store_true",
        help="also check the shapes each pool names against what its nodes offer, and that the "
        "bookings fit the pools' GPUs with their guaranteed quotas (asks the service)",
    )
    add_connection_options(parser)
    parser.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    status = check_files(args)
    if status or not args.nodes:
        return status
    return run(args, check_nodes)


async def check_nodes(client: GPUPoolClient, args: argparse.Namespace) -> int:
    """Each shape a pool names against what the pool's nodes offer, as the service sees them."""
    from ..poolfiles import load_paths

    registry = load_paths(args.files)
    rows = {row["name"]: row for row in await client.pools()}
    problems = 0
    for pool in registry.pools.values():
        if not pool.shapes:
            continue
        where = pool.source.file if pool.source is not None else "?"
        row = rows.get(pool.name)
        offered = list(row.get("shapes_offered") or []) if row is not None else []
        for i, rule in enumerate(pool.shapes):
            if rule.id in offered:
                continue
            problems += 1
            has = ", ".join(offered) if offered else "nothing: it has no GPU nodes"
            print(
                f"{where}:{rule.line or 0}: shapes[{i}].id: no node of pool {pool.name} offers "
                f"{rule.id} (its nodes offer {has})",
                file=sys.stderr,
            )
    problems += _check_bookings(registry, rows.values())
    if problems:
        return 1
    print(f"ok: the shapes the pools name are on their nodes ({len(rows)} pools seen)")
    if registry.bookings:
        print(f"ok: the bookings fit their pools ({len(registry.bookings)} bookings)")
    return 0


def _check_bookings(registry: Registry, rows: Iterable[Mapping[str, Any]]) -> int:
    """Each booking that does not fit its pool, at its line; how many."""
    from ..core.admission.booking_fit import booking_conflicts, capacity_from_rows, pool_guarantees

    conflicts = booking_conflicts(
        registry.bookings, capacity_from_rows(rows), pool_guarantees(registry.pool_quotas)
    )
    for c in conflicts:
        where = c.booking.source or "?"
        print(f"{where}: booking.name: {c.words()}", file=sys.stderr)
    return len(conflicts)


def check_files(args: argparse.Namespace) -> int:
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
