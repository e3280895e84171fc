"""``gpupool describe pool NAME``: one pool with its nodes, servers and quota (gpuctl's verb);
``gpupool describe booking NAME``: one booking, its window and its next one."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.words.booking_rows import kept_in
from ..core.words.gpu_counts import count_text
from ..core.words.reports import quota_rows
from ..core.words.shape_choice import kind_words
from ..core.words.tables import cell
from .connection import add_connection_options, run, write
from .get import NODE_COLUMNS, QUOTA_COLUMNS, add_output_option, job_columns
from .output import Column, indent, render

if TYPE_CHECKING:  # imported by connection.run when a request is made (aiohttp is slow to import)
    from ..client import GPUPoolClient

TAKEN_OUT_COLUMNS = (Column("NODE NAME", "name"), Column("NOW IN POOL", "pool"))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "describe",
        help="show one pool (its settings, nodes, servers and quota) or one booking",
        description=__doc__,
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    p = kinds.add_parser("pool", aliases=["pools"], help="a pool")
    p.add_argument("name", metavar="NAME")
    add_output_option(p, ("table", "json", "yaml"))
    add_connection_options(p)
    p.set_defaults(func=lambda args: run(args, describe_pool))
    p = kinds.add_parser("booking", aliases=["bookings"], help="a booking")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--week", metavar="YYYY-Www", help="its windows that week (default: this one)")
    add_output_option(p, ("table", "json", "yaml"))
    add_connection_options(p)
    p.set_defaults(func=lambda args: run(args, describe_booking))


def _limits(limits: Mapping[str, Any]) -> str:
    parts = []
    if limits.get("min_gpus"):
        parts.append(f"at least {limits['min_gpus']} GPUs")
    if limits.get("max_gpus") is not None:
        parts.append(f"at most {limits['max_gpus']} GPUs")
    if limits.get("allowed_gpus"):
        parts.append("GPU counts " + ", ".join(str(n) for n in limits["allowed_gpus"]))
    return "; ".join(parts) or "none"


#: ``describe pool``'s table of what the pool's nodes offer.
SHAPE_COLUMNS = (
    Column("SHAPE", "id"),
    Column("KIND", "kind", get=lambda s: kind_words(str(s.get("kind")))),
    Column("GPU", "model"),
    Column("FREE", "free"),
    Column("TOTAL", "total"),
    Column("LARGEST FREE", "largest_free"),
    Column("GPU-EQUIVALENTS", "equivalent"),
    Column("ISOLATES", "isolates"),
)


def _total(pool: Mapping[str, Any]) -> str:
    """``17 (16 whole + 1 in MIG instances: 3 of 4 instances free)``; ``16`` alone for whole
    GPUs only."""
    total = count_text(pool.get("gpu_total"))
    words = pool.get("gpus_text") or ""
    return f"{total} ({words})" if ":" in words else total


def format_pool(pool: Mapping[str, Any], now: float) -> str:
    """The human-readable description of ``GET api/v1/pools/NAME`` (pure, for tests)."""
    fields = [
        ("Name", pool.get("name")),
        ("Description", pool.get("description")),
        ("Status", pool.get("status")),
        # GPU-equivalents, the whole GPUs and the parts beside them (core/words/gpu_counts.py)
        ("GPU Total", _total(pool)),
        ("GPU Used", count_text(pool.get("gpu_used"))),
        ("GPU Free", count_text(pool.get("gpu_free"))),
        ("Whole Available", pool.get("gpu_available")),
        ("Largest Free Block", pool.get("largest_free_block")),
        ("GPU Types", pool.get("gpu_types")),
        ("Node Count", f"{pool.get('node_count')} ({pool.get('schedulable_nodes')} schedulable)"),
        ("Servers", f"{pool.get('server_count')} ({pool.get('pending_servers')} pending)"),
        ("Placement", pool.get("placement")),
        ("Limits", _limits(pool.get("limits") or {})),
    ]
    if pool.get("platforms"):
        fields.append(
            (
                "Platforms",
                ", ".join(f"{p['name']} ({p.get('gpu_type') or 'any'})" for p in pool["platforms"]),
            )
        )
    if not pool.get("defined", True):
        fields.append(("Defined", "no (only a node label names it)"))
    width = max(len(k) for k, _ in fields) + 2
    out = "".join(f"{(k + ':').ljust(width)}{cell(v)}\n" for k, v in fields)
    if pool.get("nodes_taken_out"):
        out += "\n" + taken_out_note(pool["name"], pool["nodes_taken_out"])
    if pool.get("shapes"):
        shapes = pool["shapes"]
        out += "\nShapes:\n" + indent(render("table", shapes, SHAPE_COLUMNS))
    if "nodes" in pool:
        nodes = pool["nodes"]
        out += "\nNodes:\n"
        out += indent(render("table", nodes, NODE_COLUMNS)) if nodes else "  (none)\n"
    servers = pool.get("servers") or []
    out += "\nServers:\n"
    out += indent(render("table", servers, job_columns(now))) if servers else "  (none)\n"
    if pool.get("quota"):
        rows = quota_rows({"pools": {pool["name"]: pool["quota"]}}, _by_subject(pool))
        cols = [c for c in QUOTA_COLUMNS if c.key != "pool"]
        out += "\nQuota:\n" + indent(render("table", rows, cols))
    if pool.get("reservations"):
        out += f"\nAdmissions waiting for their pod: {len(pool['reservations'])}\n"
    return out


def taken_out_note(name: str, nodes: Sequence[Mapping[str, Any]]) -> str:
    """What to say about nodes the pool's document lists that are no longer in the pool."""
    rows = [{"name": n.get("name"), "pool": n.get("pool")} for n in nodes]
    table = render("table", rows, TAKEN_OUT_COLUMNS)
    return (
        "Nodes taken out outside gpupool:\n"
        + indent(table)
        + indent(
            "\nThe pool's document lists these nodes, but their pool label was removed or changed\n"
            "outside gpupool (by `gpuctl delete pool`, `gpuctl label node` or kubectl).\n"
            "To put them back, apply the pool file again: gpupool create -f FILE\n"
            f"To drop the pool instead: gpupool delete pool {name}\n"
        )
    )


def _by_subject(pool: Mapping[str, Any]) -> dict[str, dict[str, int]] | None:
    usage = pool.get("usage_by_subject")
    return {pool["name"]: usage} if usage is not None else None


async def describe_pool(client: GPUPoolClient, args: argparse.Namespace) -> int:
    pool = await client.pool(args.name)
    if args.output == "table":
        write(format_pool(pool, time.time()))
    else:
        write(render(args.output, [], (), raw=pool))
    return 0


def format_booking(b: Mapping[str, Any]) -> str:
    """The human-readable description of ``GET api/v1/bookings/NAME`` (pure, for tests)."""

    def when(o: Any) -> str:
        return f"{o['words']} ({o['start']} to {o['end']})" if isinstance(o, Mapping) else "none"

    fields = [
        ("Name", b.get("name")),
        ("Description", b.get("description")),
        ("Pool", b.get("pool")),
        ("Shape", b.get("shape")),
        ("GPUs", f"{b.get('gpus')} ({b.get('gpu_equivalents')} GPU-equivalents)"),
        ("Groups", ", ".join(b.get("groups") or ()) or "none"),
        ("Users", ", ".join(b.get("users") or ()) or "none"),
        ("When", b.get("window")),
        ("Now", when(b.get("current"))),
        ("Next", when(b.get("next"))),
        ("Kept in", kept_in(b)),
        ("Created by", b.get("created_by") or "-"),
        ("Changed by", b.get("changed_by") or "-"),
    ]
    width = max(len(k) for k, _ in fields) + 2
    out = "".join(f"{(k + ':').ljust(width)}{cell(v)}\n" for k, v in fields)
    week = b.get("week") or []
    out += "\nThis week:\n" + ("".join(f"  {when(o)}\n" for o in week) or "  (none)\n")
    return out


async def describe_booking(client: GPUPoolClient, args: argparse.Namespace) -> int:
    booking = await client.booking(args.name, week=args.week)
    if args.output == "table":
        write(format_booking(booking))
    else:
        write(render(args.output, [], (), raw=booking))
    return 0
