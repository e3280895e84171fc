"""``gpupool sim``: serve a simulated Kubernetes cluster on 127.0.0.1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sim",
        help="serve a simulated Kubernetes cluster (for the demo and tests)",
        description=(
            "Serve a simulated Kubernetes API on 127.0.0.1, described by a cluster file. "
            "Prints 'ready URL' once it answers; stops on SIGINT or SIGTERM."
        ),
    )
    p.add_argument("--cluster", required=True, metavar="FILE", help="cluster file (YAML)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (0 picks a free one)")
    p.add_argument(
        "--kubeconfig",
        default="./sim-kubeconfig",
        metavar="PATH",
        help="where to write a kubeconfig for the cluster (default: ./sim-kubeconfig)",
    )
    p.add_argument(
        "--run-processes",
        action="store_true",
        help="run each pod's command as a local process on its own 127.0.0.x address",
    )
    p.add_argument(
        "--start-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="how long the kubelet takes to start a bound pod (default 0)",
    )
    p.add_argument(
        "--mig-delay",
        type=float,
        default=0.05,
        metavar="SECONDS",
        help="seconds between the MIG manager's steps when a node's nvidia.com/mig.config "
        "label changes (default 0.05)",
    )
    p.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    p.set_defaults(func=run)


async def serve(args: argparse.Namespace) -> int:
    from ..core.documents.yaml_reader import DocumentError
    from ..sim import SimCluster

    try:
        cluster = SimCluster.from_file(
            args.cluster,
            port=args.port,
            kubeconfig=args.kubeconfig,
            run_processes=args.run_processes,
            start_delay=args.start_delay,
            mig_delay=args.mig_delay,
        )
    except DocumentError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 1
    try:
        await cluster.start()
    except OSError as e:
        print(f"gpupool sim: cannot listen on 127.0.0.1:{args.port}: {e.strerror}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"kubeconfig {cluster.kubeconfig}", flush=True)
    print(f"ready {cluster.url}", flush=True)
    try:
        await stop.wait()
    finally:
        await cluster.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(serve(args))
