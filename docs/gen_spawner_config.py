"""Regenerate the configuration reference in ``docs/spawner.md`` from GPUPoolSpawner's traits.

The reference is the text between the two marker lines; the rest of the file is written by hand.
Each configurable trait GPUPoolSpawner adds to KubeSpawner becomes one section: its config name,
type, default and ``help`` (written in Markdown, examples included). ::

    python docs/gen_spawner_config.py           # rewrite the section in place
    python docs/gen_spawner_config.py --check   # exit 1 if the committed section is stale
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import traitlets  # noqa: E402

from jupyter_gpupool.spawner.spawner import GPUPoolSpawner  # noqa: E402

DOC = ROOT / "docs" / "spawner.md"
BEGIN = "<!-- BEGIN GENERATED CONFIG REFERENCE: python docs/gen_spawner_config.py -->"
END = "<!-- END GENERATED CONFIG REFERENCE -->"
TYPES = {
    "Int": "integer",
    "Integer": "integer",
    "Unicode": "string",
    "Float": "number",
    "Bool": "boolean",
    "List": "list",
    "Dict": "dict",
}


def settings(cls: type = GPUPoolSpawner) -> list[tuple[str, traitlets.TraitType]]:
    """The configurable traits the class itself defines, in source order."""
    return [
        (name, trait)
        for name, trait in cls.__dict__.items()
        if isinstance(trait, traitlets.TraitType) and trait.metadata.get("config")
    ]


def _default(cls: type, name: str, trait: traitlets.TraitType) -> str:
    if name in cls._trait_default_generators:
        return "computed (see below)"
    value = trait.default_value
    if value is traitlets.Undefined:
        value = trait.default()
    return f"`{value!r}`"


def reference(cls: type = GPUPoolSpawner) -> str:
    sections = [
        f"Settings of `{cls.__name__}` in `jupyterhub_config.py`, as "
        f"`c.{cls.__name__}.NAME = value`. Everything of KubeSpawner applies too "
        f"(`c.KubeSpawner.NAME` or `c.{cls.__name__}.NAME`)."
    ]
    for name, trait in settings(cls):
        kind = TYPES.get(type(trait).__name__, type(trait).__name__)
        facts = f"type: {kind}; default: {_default(cls, name, trait)}"
        sections.append(
            f"### `c.{cls.__name__}.{name}`\n\n{facts}\n\n{inspect.cleandoc(trait.help)}"
        )
    return "\n\n".join(sections) + "\n"


def render(current: str) -> str:
    try:
        head, rest = current.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        raise SystemExit(f"{DOC}: the markers {BEGIN!r} and {END!r} are missing") from None
    return f"{head}{BEGIN}\n\n{reference()}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/spawner.md is stale")
    args = parser.parse_args()
    current = DOC.read_text(encoding="utf-8")
    new = render(current)
    if args.check:
        if new != current:
            print(f"{DOC} is out of date; run: python docs/gen_spawner_config.py", file=sys.stderr)
            return 1
        return 0
    if new != current:
        DOC.write_text(new, encoding="utf-8")
        print(f"updated {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
