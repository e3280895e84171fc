"""``gpupool create -f FILE|DIR ...``: create or replace pools (quotas, bookings) from gpuctl files.

The pool documents of all the files go to the service in one request, so either every pool is
created (and its nodes labelled) or, if anything is wrong, nothing is; problems are reported as
``FILE:LINE: field: message``. Booking documents (``kind: booking``) go in the same request: the
service keeps them in its database once the pools are applied, and refuses one that does not
fit its pool (the window named). Quota documents (``kind: quota``) then replace the quota documents
of the same name; the others in force stay.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .connection import CommandError, add_connection_options, run, write
from .files import add_file_option, read_files

if TYPE_CHECKING:  # imported where used: yaml and aiohttp are slow to import
    from ..client import GPUPoolClient, GPUPoolError
    from .documents import Request


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "create",
        aliases=["apply"],
        help="create or replace pools, quotas and bookings from files",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_file_option(parser)
    add_connection_options(parser)
    parser.set_defaults(func=lambda args: run(args, create))


def refused(e: GPUPoolError, req: Request) -> Exception:
    """A 400 about the documents, with each problem at its file and line."""
    if e.status != 400:
        return e
    first = req.relocate(e.message.split("\n", 1)[0].rstrip(":"))
    if not first.endswith("nothing was changed"):  # some of the service's messages say it
        first += "; nothing was changed"
    problems = [req.relocate(str(p)) for p in e.body.get("problems") or ()]
    return CommandError(first, details=problems)


async def create(client: GPUPoolClient, args: argparse.Namespace) -> int:
    from ..client import GPUPoolError
    from .documents import build_request, wanted

    files = read_files(args.files)
    pools = build_request(files, lambda c: wanted(c, "pool"))
    quotas = build_request(files, lambda c: wanted(c, "quota"))
    if not pools.documents and not quotas.documents:
        raise CommandError(f"{', '.join(f for f, _ in files)}: no pool or quota documents")
    if pools.documents:
        try:
            result = await client.apply_pools(pools.text)
        except GPUPoolError as e:
            raise refused(e, pools) from None
        for verb in ("created", "replaced"):
            for name in result.get(verb) or ():
                write(f"pool {name} {verb}\n")
        for verb in ("created", "replaced"):
            for name in result.get(f"bookings_{verb}") or ():
                write(f"booking {name} {verb}\n")
        if result.get("labeled_nodes"):
            write(f"nodes labelled: {', '.join(result['labeled_nodes'])}\n")
        if result.get("unlabeled_nodes"):
            write(f"nodes taken out of their pool: {', '.join(result['unlabeled_nodes'])}\n")
    if quotas.documents:
        current = await client.quotas()
        kept = [
            d
            for d in current.get("documents") or ()
            if (d.get("quota") or {}).get("name") not in quotas.names
        ]
        quotas = build_request(files, lambda c: wanted(c, "quota"), in_force=kept)
        try:
            await client.put_quotas(quotas.text)
        except GPUPoolError as e:
            raise refused(e, quotas) from None
        for name in quotas.names or ["(unnamed)"]:
            write(f"quota {name} applied\n")
    return 0
