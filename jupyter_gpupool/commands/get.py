"""``gpupool get pools|jobs|nodes|labels|quotas|queue|gpu-hours|health|bookings``: gpuctl's listings,
from the service.

::

    gpupool get pools                          # POOL NAME  STATUS  GPU TOTAL  GPU USED ...
    gpupool get jobs --pool training-pool      # the notebook servers in a pool
    gpupool get nodes --pool dev-pool
    gpupool get labels gpu-node-6 --key=runwhere.ai/pool
    gpupool get quotas -o csv
    gpupool get queue --pool dev-pool          # the requests waiting in line, first in line first
    gpupool get gpu-hours --by group --since 30d    # from the service's ledger
    gpupool get health                         # admins: which part of the service is stuck
    gpupool get bookings --pool training-pool --week 2027-W03   # and their windows that week

Every ``get`` takes ``-o table|wide|json|yaml|csv``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.words.gpu_counts import count_text
from ..core.words.health_rows import HEALTH_FIELDS, health_rows
from ..core.words.reports import gpu_hours_text, quota_rows
from ..core.words.tables import age, human_duration, server_words
from .connection import CommandError, add_connection_options, run, write
from .output import OUTPUTS, Column, render

if TYPE_CHECKING:  # imported by connection.run when a request is made (aiohttp is slow to import)
    from ..client import GPUPoolClient


def shapes_cell(row: Mapping[str, Any]) -> str:
    """A pool's shapes with free and total units: ``whole 1/1, mig-3g.40gb 2/2, shared-4 8/8``
    (``gpupool describe pool`` says each in words)."""
    return ", ".join(
        f"{s.get('id')} {s.get('free')}/{s.get('total')}" for s in row.get("shapes") or ()
    )


def server_has(row: Mapping[str, Any]) -> str:
    """What a server has, as the service says it (``shape_text``: ``MIG 1g.10gb of an
    A100-80G``, ``2 \u00d7 A100-80G``, ``no GPU``); its GPU count from a service without it."""
    text = row.get("shape_text")
    return str(text) if text else str(row.get("gpus", 0))


POOL_COLUMNS = (
    Column("POOL NAME", "name"),
    Column("STATUS", "status"),
    *(
        GPU_COUNT_COLUMNS := (
            # GPU-equivalents: a MIG 1g.10gb of an A100 is 1/7 (core/words/gpu_counts.py)
            Column("GPU TOTAL", "gpu_total", get=lambda r: count_text(r.get("gpu_total"))),
            Column("GPU USED", "gpu_used", get=lambda r: count_text(r.get("gpu_used"))),
            Column("GPU FREE", "gpu_free", get=lambda r: count_text(r.get("gpu_free"))),
        )
    ),
    Column("NODE COUNT", "node_count"),
    Column("GPU TYPES", "gpu_types", wide=True),
    Column("AVAILABLE", "gpu_available", wide=True),
    Column("LARGEST FREE", "largest_free_block", wide=True),
    Column("SERVERS", "server_count", wide=True),
    Column("PENDING", "pending_servers", wide=True),
    Column("SHAPES (FREE/TOTAL)", "shape_counts", get=shapes_cell, wide=True),
    Column("GPUS", "gpus_text", wide=True),
    Column("DESCRIPTION", "description", wide=True),
)


def _idle(row: Mapping[str, Any]) -> Mapping[str, Any]:
    idle = row.get("idle")
    return idle if isinstance(idle, Mapping) else {}


def job_columns(now: float) -> tuple[Column, ...]:
    """``get jobs``' columns; ``-o wide`` adds what the server's GPUs do: their
    utilization, memory and idle state in words, and CSV gets them as raw numbers and times."""
    from ..core.words.gpu_use import idle_cell, memory_cell, utilization_cell  # only jobs' columns

    return (
        Column("USER", "user"),
        Column("SERVER", "server", get=lambda r: server_words(r.get("server"))),
        Column("POOL", "pool"),
        Column("NODE", "node"),
        # what it has, in the words of every surface (MIG 1g.10gb of an A100-80G)
        Column("GPUS", "shape_text", get=server_has),
        Column("STATUS", "state"),
        Column("OVER QUOTA", "over_quota"),
        Column("AGE", "created", get=lambda r: age(r.get("created"), now)),
        Column("POD", "pod", get=lambda r: f"{r.get('namespace')}/{r.get('name')}", wide=True),
        Column(
            "GPU-EQUIV.", "equivalents", get=lambda r: count_text(r.get("equivalents")), wide=True
        ),
        Column("CHARGED", "charged", wide=True),
        Column("PLATFORM", "platform", wide=True),
        Column("ADMISSION", "admission", wide=True),
        Column("GPU UTIL", "gpu_utilization", get=utilization_cell, wide=True),
        Column("", "gpu_utilization_max", wide=True, csv_only=True),
        Column("GPU MEM", "gpu_memory_used_mib", get=memory_cell, wide=True),
        Column("", "gpu_memory_total_mib", wide=True, csv_only=True),
        Column(
            "IDLE",
            "idle_since",
            get=lambda r: idle_cell(r.get("idle"), now),
            raw=lambda r: _idle(r).get("since"),
            wide=True,
        ),
        Column("", "idle_action", raw=lambda r: _idle(r).get("action"), wide=True, csv_only=True),
        Column(
            "", "idle_stops_at", raw=lambda r: _idle(r).get("stops_at"), wide=True, csv_only=True
        ),
    )


NODE_COLUMNS = (
    Column("NODE NAME", "name"),
    Column("STATUS", "status"),
    *GPU_COUNT_COLUMNS,
    Column("GPU TYPE", "gpu_type"),
    Column("POOL", "pool"),
    Column("REASONS", "reasons", get=lambda r: "; ".join(r.get("reasons") or ())),
    Column("GPUS", "gpus_text", wide=True),
    Column("PODS", "pods", wide=True),
    Column("SCHEDULABLE", "schedulable", wide=True),
)

LABEL_COLUMNS = (Column("KEY", "key"), Column("VALUE", "value"))

QUOTA_COLUMNS = (
    Column("POOL", "pool"),
    Column("SUBJECT", "subject"),
    Column("GUARANTEED", "guaranteed"),
    Column("LIMIT", "limit"),
    Column("USED", "used"),
    Column("RESERVED", "reserved"),
    Column("BORROWED", "borrowed"),
    Column("BORROWING", "borrowing", wide=True),
)


def waited(row: Mapping[str, Any], now: float) -> str:
    """How long a request has waited in line, as an AGE column says it (``-`` without a time)."""
    since = row.get("waiting_since")
    if isinstance(since, bool) or not isinstance(since, (int, float)):
        return "-"
    return human_duration(now - since)


def queue_columns(now: float) -> tuple[Column, ...]:
    """``get queue``'s columns: the line as the service orders it, with each
    request's wait estimate; ``-o wide`` adds
    the GPU type, the subject charged, the entry's id and the service's words."""
    return (
        Column("POSITION", "position"),
        Column("USER", "user"),
        Column("SERVER", "server", get=lambda r: server_words(r.get("server"))),
        Column("GPUS", "gpus"),
        Column("POOLS", "pools"),
        Column(
            "QUOTA", "within_quota", get=lambda r: "within" if r.get("within_quota") else "over"
        ),
        Column("WAITING", "waiting_since", get=lambda r: waited(r, now)),
        # when it should get in, and on what basis
        Column("EXPECTED", "estimate_words", get=lambda r: r.get("estimate_words") or "-"),
        Column("GPU TYPE", "gpu_type", wide=True),
        Column("SUBJECT", "subject", wide=True),
        Column("RECLAIMING", "reclaiming", wide=True),
        Column("ID", "id", wide=True),
        Column("MESSAGE", "message", wide=True),
        Column("REASONS", "reasons", get=lambda r: _one_line(r.get("reasons")), wide=True),
    )


def _one_line(text: Any) -> str:
    """The service's reasons (one line per pool) on one table line."""
    if isinstance(text, (list, tuple)):
        return "; ".join(str(t) for t in text)
    return "; ".join(line.strip() for line in str(text or "").splitlines() if line.strip())


def gpu_hours_columns(by: str = "user") -> tuple[Column, ...]:
    """``get gpu-hours``' columns: the first says what the rows are (``USER``, ``GROUP``,
    ``POOL``, ``SHAPE``); hours as the reports page writes them (``<0.01`` for a slice's few
    minutes, not ``0.0``), raw numbers in CSV."""
    return (
        Column(by.upper(), "subject"),
        Column("GPU-HOURS", "gpu_hours", get=lambda r: gpu_hours_text(r["gpu_hours"])),
        Column("WITHIN QUOTA", "within_quota", get=lambda r: gpu_hours_text(r["within_quota"])),
        Column("OVER QUOTA", "over_quota", get=lambda r: gpu_hours_text(r["over_quota"])),
        Column("SESSIONS", "sessions"),
    )


def booking_who(row: Mapping[str, Any]) -> str:
    """``group cs231, user bob``."""
    return ", ".join(
        [f"group {g}" for g in row.get("groups") or ()]
        + [f"user {u}" for u in row.get("users") or ()]
    )


def _when(o: Any) -> str:
    return str(o["words"]) if isinstance(o, Mapping) else "-"


BOOKING_COLUMNS = (
    Column("NAME", "name"),
    Column("POOL", "pool"),
    Column("SHAPE", "shape"),
    Column("GPUS", "gpus"),
    Column("WHO", "who", get=booking_who),
    Column("WHEN", "window"),
    Column(
        "NEXT",
        "next",
        get=lambda r: (
            _when(r.get("current")) + " (now)" if r.get("current") else _when(r.get("next"))
        ),
    ),
    Column(
        "THIS WEEK",
        "week",
        get=lambda r: "; ".join(_when(o) for o in r.get("week") or ()) or "-",
        wide=True,
    ),
    Column("SOURCE", "source", wide=True),
    Column("CREATED BY", "created_by", wide=True),
    Column("DESCRIPTION", "description", wide=True),
)


#: ``get health``'s table: the same rows as the admins' health page (core/words/health_rows.py).
HEALTH_COLUMNS = tuple(Column(heading.upper(), field) for field, heading in HEALTH_FIELDS)


def add_output_option(parser: argparse.ArgumentParser, choices: tuple[str, ...] = OUTPUTS) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="table",
        help="output format (default: gpuctl's table)",
    )
    parser.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const="json",
        help="the same as -o json (gpuctl's spelling)",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "get",
        help="list pools, jobs (notebook servers), nodes, a node's labels, quotas or the queue",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    resources = parser.add_subparsers(dest="resource", metavar="RESOURCE", required=True)

    p = resources.add_parser("pools", aliases=["pool"], help="pools with their GPUs and nodes")
    p.set_defaults(func=lambda args: run(args, get_pools))

    p = resources.add_parser(
        "jobs", aliases=["job", "servers"], help="notebook servers, by pool or user"
    )
    p.add_argument("--pool", help="only the servers in this pool")
    p.add_argument("--user", help="only this user's servers")
    p.set_defaults(func=lambda args: run(args, get_jobs))

    p = resources.add_parser("nodes", aliases=["node"], help="nodes with GPUs and status reasons")
    p.add_argument("--pool", help="only the nodes of this pool")
    p.set_defaults(func=lambda args: run(args, get_nodes))

    p = resources.add_parser("labels", aliases=["label"], help="a node's labels")
    p.add_argument("node", metavar="NODE")
    p.add_argument("--key", help="only this label (gpuctl: --key=runwhere.ai/pool)")
    p.set_defaults(func=lambda args: run(args, get_labels))

    p = resources.add_parser("quotas", aliases=["quota"], help="quotas with GPUs used")
    p.set_defaults(func=lambda args: run(args, get_quotas))

    p = resources.add_parser("queue", help="requests waiting in line for GPUs, first in line first")
    p.add_argument("--pool", help="only the requests waiting for this pool")
    p.set_defaults(func=lambda args: run(args, get_queue))

    p = resources.add_parser(
        "gpu-hours", help="GPU-hours per user, group or pool, within and over quota"
    )
    p.add_argument("--by", choices=("user", "group", "pool", "shape"), default="user")
    p.add_argument("--since", default="7d", help="7d, 30d, 24h or a date YYYY-MM-DD")
    p.add_argument("--until", help="a date YYYY-MM-DD (its start), or now (the default)")
    p.set_defaults(func=lambda args: run(args, get_gpu_hours))

    p = resources.add_parser(
        "bookings", aliases=["booking"], help="bookings: GPUs of a pool for a group in a window"
    )
    p.add_argument("--pool", help="only the bookings of this pool")
    p.add_argument(
        "--week",
        nargs="?",
        const="",
        metavar="YYYY-Www",
        help="only the bookings with a window that week (2027-W03, or a date in it; without a "
        "value the current week), and their windows",
    )
    p.set_defaults(func=lambda args: run(args, get_bookings))
    p = resources.add_parser(
        "health", help="the service's loops, watch and database, and what is stuck (admins)"
    )
    p.set_defaults(func=lambda args: run(args, get_health))

    for sub in {id(p): p for p in resources.choices.values()}.values():  # aliases share one
        add_output_option(sub)
        add_connection_options(sub)


async def get_pools(client: GPUPoolClient, args: argparse.Namespace) -> int:
    pools = await client.pools()
    write(render(args.output, pools, POOL_COLUMNS))
    return 0


async def get_bookings(client: GPUPoolClient, args: argparse.Namespace) -> int:
    answer = await client.bookings(pool=args.pool, week=args.week or None)
    rows = list(answer["bookings"])
    if args.week is not None:
        rows = [r for r in rows if r.get("week")]
    write(render(args.output, rows, BOOKING_COLUMNS, raw=answer))
    return 0


async def get_jobs(client: GPUPoolClient, args: argparse.Namespace) -> int:
    params = {"pool": args.pool, "user": args.user}
    answer = (await client.request("GET", "api/v1/servers", params=params)).json()
    servers = list(answer["servers"])
    write(render(args.output, servers, job_columns(time.time())))
    problem = (answer.get("utilization") or {}).get("problem")
    if args.output == "wide" and problem:
        # the GPU columns say "-": the reason goes to stderr, the table stays parseable
        print(f"gpupool: GPU utilization not measured: {problem}", file=sys.stderr)
    return 0


async def get_nodes(client: GPUPoolClient, args: argparse.Namespace) -> int:
    nodes = await client.nodes(pool=args.pool)
    write(render(args.output, nodes, NODE_COLUMNS))
    return 0


async def get_labels(client: GPUPoolClient, args: argparse.Namespace) -> int:
    labels = await client.node_labels(args.node, key=args.key)
    if args.key is not None and args.key not in labels:
        raise CommandError(f"node {args.node} has no label {args.key}")
    if args.key is not None and args.output in ("table", "wide"):
        write(f"{args.node} {args.key}: {labels[args.key]}\n")  # gpuctl's line
        return 0
    rows = [{"key": k, "value": v} for k, v in sorted(labels.items())]
    write(render(args.output, rows, LABEL_COLUMNS, raw={"node": args.node, "labels": labels}))
    return 0


async def get_quotas(client: GPUPoolClient, args: argparse.Namespace) -> int:
    quotas = await client.quotas()
    usage = await client.usage()
    rows = quota_rows(quotas, usage.get("by_subject"))
    write(render(args.output, rows, QUOTA_COLUMNS, raw=quotas))
    return 0


async def get_queue(client: GPUPoolClient, args: argparse.Namespace) -> int:
    answer = await client.queue()
    rows = list(answer.get("queue") or [])
    if args.pool is not None:
        rows = [r for r in rows if args.pool in (r.get("pools") or ())]
        counts = answer.get("pools") or {}
        answer = {"queue": rows, "pools": {args.pool: int(counts.get(args.pool) or 0)}}
    write(render(args.output, rows, queue_columns(time.time()), raw=answer))
    return 0


async def get_gpu_hours(client: GPUPoolClient, args: argparse.Namespace) -> int:
    report = await client.gpu_hours(by=args.by, since=args.since, until=args.until)
    columns = gpu_hours_columns(str(report.get("by") or args.by or "user"))
    write(render(args.output, report["rows"], columns, raw=report))
    return 0


async def get_health(client: GPUPoolClient, args: argparse.Namespace) -> int:
    """The table, then the status and each problem on a line; exit status 1 when degraded, so
    that a script can tell."""
    answer = await client.health()
    write(render(args.output, health_rows(answer), HEALTH_COLUMNS, raw=answer))
    if args.output in ("table", "wide"):
        lines = [f"status: {answer.get('status')}"]
        lines += [f"- {problem}" for problem in answer.get("problems") or ()]
        write("\n".join(lines) + "\n")
    return 0 if answer.get("status") == "ok" else 1
