"""What the config-reference generators (gen_service_config.py, gen_spawner_config.py) share.

Each generator renders the settings of one traitlets class as Markdown; this module finds the
configurable traits, words their defaults, and splices the result between two marker lines of a
hand-written document, with ``--check`` to fail when the committed text is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import traitlets


def configurable_traits(cls: type) -> list[tuple[str, traitlets.TraitType]]:
    """The configurable traits the class itself defines, in source order."""
    return [
        (name, trait)
        for name, trait in cls.__dict__.items()
        if isinstance(trait, traitlets.TraitType) and trait.metadata.get("config")
    ]


def default_text(cls: type, name: str, trait: traitlets.TraitType, computed: str) -> str:
    """The default as the reference shows it; ``computed`` for defaults made by ``@default``."""
    if name in cls._trait_default_generators:  # type: ignore[attr-defined]
        return computed
    value = trait.default_value
    if value is traitlets.Undefined:  # containers (List...) make their default on demand
        value = trait.default()
    return f"`{value!r}`"


def splice(current: str, doc: Path, begin: str, end: str, body: str) -> str:
    """``current`` with the text between the ``begin`` and ``end`` markers replaced by ``body``."""
    try:
        head, rest = current.split(begin, 1)
        _, tail = rest.split(end, 1)
    except ValueError:
        raise SystemExit(f"{doc}: the markers {begin!r} and {end!r} are missing") from None
    return f"{head}{begin}\n\n{body}\n{end}{tail}"


def main(
    description: str, doc: Path, begin: str, end: str, reference: Callable[[], str], script: str
) -> int:
    """Rewrite ``doc``'s generated section, or with ``--check`` exit 1 if it is stale."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"fail if {doc.name} is stale")
    args = parser.parse_args()
    current = doc.read_text(encoding="utf-8")
    new = splice(current, doc, begin, end, reference())
    if args.check:
        if new != current:
            print(f"{doc} is out of date; run: python {script}", file=sys.stderr)
            return 1
        return 0
    if new != current:
        doc.write_text(new, encoding="utf-8")
        print(f"updated {doc}")
    return 0
