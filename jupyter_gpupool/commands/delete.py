"""``gpupool delete -f FILE|DIR ...``, ``gpupool delete pool NAME ...``,
``gpupool delete quota NAME ...`` or ``gpupool delete booking NAME ...``: delete pools, quota
documents and bookings.

Deleting a pool removes its document and the pool label of its nodes (they join ``default``); it
never stops a server: the servers still running there are listed, as gpuctl recommends stopping
them first. Deleting a quota document sends the other quota documents in force back to the
service (``PUT api/v1/quotas`` replaces them all). Quota documents go first, so that a pool whose
quota document is deleted with it is not refused for being named by that quota.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .connection import CommandError, add_connection_options, explain, report, run, write
from .files import add_file_option, read_files

if TYPE_CHECKING:  # imported where used: yaml and aiohttp are slow to import
    from ..client import GPUPoolClient

POOL_WORDS = ("pool", "pools")
QUOTA_WORDS = ("quota", "quotas")
BOOKING_WORDS = ("booking", "bookings")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "delete",
        help="delete pools, quota documents and bookings (by file or name); servers keep running",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        usage="gpupool delete (-f FILE|DIR ... | pool|quota|booking NAME ...) [options]",
    )
    parser.add_argument(
        "target",
        nargs="*",
        metavar="pool|quota|booking NAME",
        help="`pool`, `quota` or `booking` and the names of what to delete",
    )
    add_file_option(parser, required=False)
    add_connection_options(parser)
    parser.set_defaults(func=run_delete)


@dataclass
class Targets:
    pools: list[str] = field(default_factory=list)
    quotas: list[str] = field(default_factory=list)
    bookings: list[str] = field(default_factory=list)


WHAT = "say what to delete: gpupool delete pool NAME, quota NAME, booking NAME, or -f FILE"


def targets(args: argparse.Namespace) -> Targets:
    from .documents import Chunk, split_documents  # not at the top: yaml is slow to import

    if args.target:
        if args.files:
            raise CommandError("give either -f FILE or pool|quota|booking NAME, not both")
        kind, *given = args.target
        if kind in POOL_WORDS and given:
            return Targets(pools=given)
        if kind in QUOTA_WORDS and given:
            return Targets(quotas=given)
        if kind in BOOKING_WORDS and given:
            return Targets(bookings=given)
        raise CommandError(WHAT)
    if not args.files:
        raise CommandError(WHAT)
    found = Targets()
    for _, text in read_files(args.files):
        for part in split_documents(text):
            if isinstance(part, Chunk) and part.name:
                if part.is_pool:
                    found.pools.append(part.name)
                elif part.is_quota:
                    found.quotas.append(part.name)
                elif part.is_booking:
                    found.bookings.append(part.name)
    if not found.pools and not found.quotas and not found.bookings:
        raise CommandError(
            f"{', '.join(args.files)}: no pool, quota or booking documents to delete"
        )
    return found


def run_delete(args: argparse.Namespace) -> int:
    try:
        args.targets = targets(args)
    except CommandError as e:
        return report(e)
    return run(args, delete)


async def delete(client: GPUPoolClient, args: argparse.Namespace) -> int:
    from ..client import GPUPoolError

    status = 0
    if args.targets.quotas:
        status = await delete_quotas(client, args.targets.quotas)
    for name in args.targets.bookings:  # before the pools they name
        try:
            await client.delete_booking(name)
        except GPUPoolError as e:
            error = explain(e, client.url)
            if error.status != 1:
                raise
            status = report(error)
            continue
        write(f"booking {name} deleted\n")
    for name in args.targets.pools:
        try:
            result = await client.delete_pool(name)
        except GPUPoolError as e:
            error = explain(e, client.url)
            if error.status != 1:
                raise  # the service is away: the next ones would fail the same way
            status = report(error)
            continue
        write(f"pool {name} deleted\n")
        if result.get("unlabeled_nodes"):
            write(f"nodes back in default: {', '.join(result['unlabeled_nodes'])}\n")
        servers = result.get("servers_still_running") or []
        if servers:
            write(
                f"{len(servers)} server{'s' if len(servers) > 1 else ''} still running in "
                f"{name} (deleting a pool never stops servers):\n"
            )
            for s in servers:
                where = f" on {s['node']}" if s.get("node") else ""
                write(f"  {s['user']}/{s.get('server') or ''}{where} ({s.get('gpus', 0)} GPUs)\n")
    return status


async def delete_quotas(client: GPUPoolClient, names: list[str]) -> int:
    """Put back every quota document in force but ``names``; 1 if one of them is not there."""
    from .documents import quota_text

    status = 0
    documents = (await client.quotas()).get("documents") or []
    in_force = [str((d.get("quota") or {}).get("name")) for d in documents]
    for name in names:
        if name not in in_force:
            known = ", ".join(in_force) or "none"
            status = report(CommandError(f"no quota document named {name!r} (in force: {known})"))
    gone = [n for n in in_force if n in names]
    if not gone:
        return status
    staying = [d for d, n in zip(documents, in_force, strict=True) if n not in names]
    await client.put_quotas(quota_text(staying))
    for name in gone:
        write(f"quota {name} deleted\n")
    return status
