"""``gpupool label node NODE KEY=VALUE ... [--overwrite]``: set (or, with ``KEY-``, remove) node
labels, as ``gpuctl label node`` does.

Moving a node to a pool is ``gpupool label node NODE runwhere.ai/pool=POOL --overwrite``. Like
gpuctl, only keys under ``runwhere.ai/`` are accepted, so that the cluster's other labels are not
changed by mistake; ``--label-prefix`` (or ``GPUPOOL_LABEL_PREFIX``) sets another prefix, and an
empty one accepts any key. The service's pool label is always accepted. A label that already has
another value is only changed with ``--overwrite``.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from .connection import CommandError, add_connection_options, report, run, write

if TYPE_CHECKING:  # imported by connection.run when a request is made (aiohttp is slow to import)
    from ..client import GPUPoolClient

DEFAULT_PREFIX = "runwhere.ai/"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "label",
        help="set or remove node labels (move a node to a pool)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("kind", choices=["node", "nodes"], metavar="node")
    parser.add_argument("node", metavar="NODE")
    parser.add_argument(
        "labels", nargs="+", metavar="KEY=VALUE", help="KEY=VALUE, or KEY- to remove"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="change a label that already has another value"
    )
    parser.add_argument(
        "--label-prefix",
        default=None,
        metavar="PREFIX",
        help=f"accept only keys under PREFIX (default: $GPUPOOL_LABEL_PREFIX or {DEFAULT_PREFIX}; "
        "'' accepts any key)",
    )
    add_connection_options(parser)
    parser.set_defaults(func=run_label)


def parse_labels(items: list[str]) -> dict[str, str | None]:
    """``KEY=VALUE`` and ``KEY-`` arguments as a patch (None removes), checked as Kubernetes does."""
    from ..core.usage.labels import is_label_key, is_label_value  # not at the top: hashlib, re

    out: dict[str, str | None] = {}
    for item in items:
        if "=" in item:
            key, _, value = item.partition("=")
            if not is_label_value(value):
                raise CommandError(
                    f"{value!r} is not a valid label value (63 characters at most: letters, "
                    "digits, '-', '_', '.', starting and ending with a letter or digit)"
                )
            patch: str | None = value
        elif item.endswith("-"):
            key, patch = item[:-1], None
        else:
            raise CommandError(f"{item!r}: give KEY=VALUE to set a label, or KEY- to remove it")
        if not is_label_key(key):
            raise CommandError(f"{key!r} is not a valid label key (e.g. runwhere.ai/pool)")
        out[key] = patch
    return out


def outside_prefix(keys: list[str], prefix: str) -> list[str]:
    return [k for k in keys if prefix and not k.startswith(prefix)]


def run_label(args: argparse.Namespace) -> int:
    try:
        args.patch = parse_labels(args.labels)
    except CommandError as e:
        return report(e)
    if args.label_prefix is None:
        args.label_prefix = os.environ.get("GPUPOOL_LABEL_PREFIX", DEFAULT_PREFIX)
    return run(args, label)


async def label(client: GPUPoolClient, args: argparse.Namespace) -> int:
    prefix = args.label_prefix
    outside = outside_prefix(list(args.patch), prefix)
    if outside:
        # the service may name pools with another label key; that one is always fine
        pool_label = (await client.info()).get("pool_label")
        outside = [k for k in outside if k != pool_label]
    if outside:
        raise CommandError(
            f"label key {outside[0]} is not under {prefix}: labels managed by gpupool must be "
            f"prefixed with {prefix}, as gpuctl's are (--label-prefix='' accepts any key)"
        )
    result = await client.label_node(args.node, args.patch, overwrite=args.overwrite)
    changed = result.get("changed") or {}
    if not changed:
        write(f"node/{args.node} not labeled (no change)\n")
    for key, value in changed.items():
        what = f"{key}={value}" if value is not None else f"{key} removed"
        write(f"node/{args.node} labeled {what}\n")
    return 0
