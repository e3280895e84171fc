"""``gpupool demo``: everything on 127.0.0.1, for a first look."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from ..demo import DEFAULT_PORT, DEFAULT_STATE_DIR


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run a simulated GPU cluster, the gpupool service and JupyterHub on 127.0.0.1",
        description=(
            "Start the simulated cluster (gpuctl's four pools), the gpupool service and a real "
            "JupyterHub with a dummy authenticator, all on 127.0.0.1. Prints 'ready URL' when "
            "everything answers; SIGINT or SIGTERM stops it all."
        ),
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"JupyterHub's port (default {DEFAULT_PORT})"
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        default=Path(DEFAULT_STATE_DIR),
        metavar="DIR",
        help="hub database, cookie secret, kubeconfig, logs and admin-token (default ./gpupool-demo)",
    )
    p.add_argument(
        "--cluster", type=Path, metavar="FILE", help="cluster file (default: the demo's)"
    )
    p.add_argument("--pools", type=Path, metavar="DIR", help="pool files (default: examples/pools)")
    p.add_argument("--log-level", default="INFO", help="JupyterHub's log level (default INFO)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core.documents.yaml_reader import DocumentError
    from ..demo.run import DemoOptions, run_demo

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    opts = DemoOptions(
        port=args.port,
        state_dir=args.state_dir,
        cluster_file=args.cluster,
        pools_dir=args.pools,
        log_level=args.log_level.upper(),
    )
    try:
        return asyncio.run(run_demo(opts))
    except DocumentError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 1
