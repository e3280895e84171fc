"""``gpupool validate -f FILE|DIR ... [--nodes | --service]``: check pool, quota and booking
files without applying anything.

All paths are checked together, as the service would load them, so a pool defined twice in two
files, or a quota or a booking naming a pool that no file defines, is caught too. Each file gets
one line, ``ok FILE (N pools)`` on stdout once nothing found a problem in it, or its problems as
``FILE:LINE: field.path: message`` on stderr. A booking file names pools defined elsewhere: check
it with the pool files (``-f pools/ -f bookings.yaml``) or with ``--service``, which takes the
pools (and the quota documents) the files do not define from the running service. With
``--nodes`` (implied by ``--service``), the files are also checked against the cluster the
service sees: a shape a pool's ``shapes`` names that none of its nodes offers is a problem
(``GET api/v1/pools``'s ``shapes_offered``), and so is a booking that does not fit its pool's
capacity in one of its windows, with the pool's guaranteed quotas (``shapes`` and
``gpu_total``). Exit status 0 when every file is valid, 1 otherwise, 2 when the service could
not be reached.
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
        help="check pool, quota and booking files",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_file_option(parser)
    parser.add_argument(
        "--nodes",
        action="store_true",
        help="also check the shapes each pool names against what its nodes offer, and that the "
        "bookings fit the pools' GPUs with their guaranteed quotas (asks the service)",
    )
    parser.add_argument(
        "--service",
        action="store_true",
        help="take the pools and quota documents the files do not define from the running "
        "service (to check a booking file alone); implies --nodes",
    )
    add_connection_options(parser)
    parser.set_defaults(func=run_validate)


#: Said after an unknown pool when the files given define none: how to check a booking file.
BOOKING_FILE_HINT = (
    "gpupool validate: the files given define no pool; check a booking file with the pool "
    "files it names (gpupool validate -f POOL-FILES -f {file}), or against the running "
    "service's pools (gpupool validate --service -f {file})"
)


def run_validate(args: argparse.Namespace) -> int:
    if not getattr(args, "service", False) and not args.nodes:
        return check_files(args)
    return run(args, check_with_service)


async def check_with_service(client: GPUPoolClient, args: argparse.Namespace) -> int:
    """The files, then (``--nodes``) what they name against the service's pools and nodes; with
    ``--service`` the pools and quota documents the files lack come from the service. ``ok
    FILE`` only for a file in which neither found a problem."""
    from ..poolfiles import check_paths, load_paths

    extra = await service_texts(client, args.files) if getattr(args, "service", False) else []
    report = check_paths(args.files, extra)
    if not report.files:
        print("gpupool validate: no pool files found", file=sys.stderr)
        return 1
    for problem in report.problems:
        print(problem, file=sys.stderr)
    if report.problems:
        return 1
    registry = load_paths(args.files, extra)
    rows = {row["name"]: row for row in await client.pools()}
    problems = node_problems(registry, rows)
    for _, message in problems:
        print(message, file=sys.stderr)
    bad = {file for file, _ in problems}
    for f in report.files:
        if f not in bad:
            print(f"ok {f} ({report.pools_per_file[f]} pools)")
    if problems:
        return 1
    print(f"ok: the shapes the pools name are on their nodes ({len(rows)} pools seen)")
    if registry.bookings:
        print(f"ok: the bookings fit their pools ({len(registry.bookings)} bookings)")
    return 0


async def service_texts(client: GPUPoolClient, paths: list[str]) -> list[tuple[str, str]]:
    """``(YAML text, name)`` of the service's pool documents for the pools the files do not
    define (named ``service:pools/NAME``), and of its quota documents when the files hold none
    (``service:quotas/NAME``)."""
    import yaml

    defined, has_quotas = _defined_in(paths)
    texts = []
    for row in await client.pools():
        name = row["name"]
        if name in defined or not row.get("defined", True):
            continue
        document = (await client.pool(name)).get("document")
        if document is not None:
            texts.append((yaml.safe_dump(document, sort_keys=False), f"service:pools/{name}"))
    if not has_quotas:
        for doc in (await client.quotas()).get("documents") or ():
            name = (doc.get("quota") or {}).get("name", "quotas")
            texts.append((yaml.safe_dump(doc, sort_keys=False), f"service:quotas/{name}"))
    return texts


def _defined_in(paths: list[str]) -> tuple[set[str], bool]:
    """The pools the files define, and whether they hold a quota document (read as YAML only:
    the files' own check says what else is wrong with them)."""
    import yaml

    from ..poolfiles import expand_paths

    defined: set[str] = set()
    has_quotas = False
    for f in expand_paths(paths):
        try:
            with open(f, encoding="utf-8") as fh:
                documents = list(yaml.safe_load_all(fh))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "pool" and isinstance(doc.get("pool"), dict):
                defined.add(str(doc["pool"].get("name")))
            has_quotas = has_quotas or doc.get("kind") == "quota"
    return defined, has_quotas


async def check_nodes(client: GPUPoolClient, args: argparse.Namespace) -> int:
    """Each shape a pool names against what the pool's nodes offer, and each booking against
    its pool's GPUs, as the service sees them."""
    from ..poolfiles import load_paths

    registry = load_paths(args.files)
    rows = {row["name"]: row for row in await client.pools()}
    problems = node_problems(registry, rows)
    for _, message in problems:
        print(message, file=sys.stderr)
    if problems:
        return 1
    print(f"ok: the shapes the pools name are on their nodes ({len(rows)} pools seen)")
    if registry.bookings:
        print(f"ok: the bookings fit their pools ({len(registry.bookings)} bookings)")
    return 0


def node_problems(registry: Registry, rows: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """``(file, message)`` for each shape a pool names that none of its nodes offers and each
    booking that does not fit its pool."""
    problems: list[Problem] = []
    for pool in registry.pools.values():
        if not pool.shapes:
            continue
        where = pool.source.file if pool.source is not None else "?"
        row = rows.get(pool.name)
        offered = list(row.get("shapes_offered") or []) if row is not None else []
        for i, rule in enumerate(pool.shapes):
            if rule.id in offered:
                continue
            has = ", ".join(offered) if offered else "nothing: it has no GPU nodes"
            problems.append(
                (
                    where,
                    f"{where}:{rule.line or 0}: shapes[{i}].id: no node of pool {pool.name} "
                    f"offers {rule.id} (its nodes offer {has})",
                )
            )
    return problems + _booking_problems(registry, rows.values())


def _booking_problems(registry: Registry, rows: Iterable[Mapping[str, Any]]) -> list[Problem]:
    """Each booking that does not fit its pool, at its line."""
    from ..core.admission.booking_fit import booking_conflicts, capacity_from_rows, pool_guarantees

    conflicts = booking_conflicts(
        registry.bookings, capacity_from_rows(rows), pool_guarantees(registry.pool_quotas)
    )
    out = []
    for c in conflicts:
        source = c.booking.source
        where = source.file if source is not None else "?"
        out.append((where, f"{source or '?'}: booking.name: {c.words()}"))
    return out


#: A problem found against the service: the file it is in, and the line to print.
Problem = tuple[str, str]


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
    if not any(report.pools_per_file.values()) and any(
        p.message.startswith("unknown pool ") for p in report.problems
    ):
        print(BOOKING_FILE_HINT.format(file=report.files[0]), file=sys.stderr)
    return 1 if report.problems else 0
