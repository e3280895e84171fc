"""JSON Schema of pool files, generated from the shapes the loader checks against.

Editors (VS Code's YAML extension, JetBrains) use it to complete and check pool files as they are
typed: put ``# yaml-language-server: $schema=<path or URL of pool.schema.json>`` at the top of a
file. Because it is generated from :data:`~jupyter_gpupool.core.pools.document_spec.POOL_DOCUMENT`,
:data:`~jupyter_gpupool.core.pools.document_spec.QUOTA_DOCUMENT` and ``BOOKING_DOCUMENT``, it accepts what the loader accepts
(cross-document rules such as duplicate names are the loader's alone).

The package ships the result as ``jupyter_gpupool/schema/pool.schema.json``; a test fails when it
is stale. Regenerate it with::

    python -m jupyter_gpupool.poolschema --write
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from .core.pools.document_spec import BOOKING_DOCUMENT, POOL_DOCUMENT, QUOTA_DOCUMENT

SCHEMA_ID = "urn:jupyter-gpupool:schema:pool:v0.1"
SHIPPED = Path(__file__).parent / "schema" / "pool.schema.json"


def generate() -> dict[str, Any]:
    """The schema: a document is a pool, a quota or a booking document."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "gpupool pool file",
        "description": "gpuctl-compatible pool and quota documents with gpupool's extensions, and "
        "booking documents. "
        "See docs/pools.md.",
        "oneOf": [
            {"$ref": "#/$defs/pool"},
            {"$ref": "#/$defs/quota"},
            {"$ref": "#/$defs/booking"},
        ],
        "$defs": {
            "pool": POOL_DOCUMENT.schema(),
            "quota": QUOTA_DOCUMENT.schema(),
            "booking": BOOKING_DOCUMENT.schema(),
        },
    }


def render() -> str:
    """The schema as the shipped file spells it (stable key order, trailing newline)."""
    return json.dumps(generate(), indent=2, ensure_ascii=False) + "\n"


def shipped() -> str:
    """The schema file as installed with the package."""
    return resources.files("jupyter_gpupool").joinpath("schema/pool.schema.json").read_text("utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_gpupool.poolschema", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--write", action="store_true", help=f"write {SHIPPED}")
    args = parser.parse_args(argv)
    if args.write:
        SHIPPED.write_text(render(), encoding="utf-8")
        print(f"wrote {SHIPPED}")
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
