"""``gpupool delete -f FILE|DIR ...`` or ``gpupool delete pool NAME ...``: delete pools.

Deleting a pool removes its document and the pool label of its nodes (they join ``default``); it
never stops a server: the servers still running there are listed, as gpuctl recommends stopping
them first. Quota documents in the files are not deleted (replace them with ``gpupool create``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..client import GPUPoolClient, GPUPoolError
from .connection import CommandError, add_connection_options, explain, report, run, write
from .create import add_file_option, read_files
from .documents import Chunk, split_documents


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "delete",
        help="delete pools (by file or name); servers keep running",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        usage="gpupool delete (-f FILE|DIR ... | pool NAME ...) [options]",
    )
    parser.add_argument(
        "target", nargs="*", metavar="pool NAME", help="`pool` and the names of pools to delete"
    )
    add_file_option(parser, required=False)
    add_connection_options(parser)
    parser.set_defaults(func=run_delete)


def pools_to_delete(args: argparse.Namespace) -> list[str]:
    if args.target:
        if args.files:
            raise CommandError("give either -f FILE or pool NAME, not both")
        kind, *given = args.target
        if kind not in ("pool", "pools") or not given:
            raise CommandError("say what to delete: gpupool delete pool NAME, or -f FILE")
        return given
    if not args.files:
        raise CommandError("say what to delete: gpupool delete pool NAME, or -f FILE")
    names: list[str] = []
    skipped = 0
    for _, text in read_files(args.files):
        for part in split_documents(text):
            if isinstance(part, Chunk) and part.is_pool and part.name:
                names.append(part.name)
            elif isinstance(part, Chunk) and part.is_quota:
                skipped += 1
    if skipped:
        print(
            f"note: {skipped} quota document{'s' if skipped > 1 else ''} not deleted; "
            "change quotas with `gpupool create -f`",
            file=sys.stderr,
        )
    if not names:
        raise CommandError(f"{', '.join(args.files)}: no pool documents to delete")
    return names


def run_delete(args: argparse.Namespace) -> int:
    try:
        names = pools_to_delete(args)
    except CommandError as e:
        return report(e)
    args.pool_names = names
    return run(args, delete)


async def delete(client: GPUPoolClient, args: argparse.Namespace) -> int:
    status = 0
    for name in args.pool_names:
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
