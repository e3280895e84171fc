"""Regenerate the configuration reference in ``docs/spawner.md`` from GPUPoolSpawner's traits.

The reference is the text between the two marker lines; the rest of the file is written by hand.
Each configurable trait GPUPoolSpawner adds to KubeSpawner becomes one section: its config name,
type, default and ``help`` (written in Markdown, examples included). ::

    python docs/gen_spawner_config.py           # rewrite the section in place
    python docs/gen_spawner_config.py --check   # exit 1 if the committed section is stale
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from configref import configurable_traits, default_text, main  # noqa: E402

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


def reference(cls: type = GPUPoolSpawner) -> str:
    sections = [
        f"Settings of `{cls.__name__}` in `jupyterhub_config.py`, as "
        f"`c.{cls.__name__}.NAME = value`. Everything of KubeSpawner applies too "
        f"(`c.KubeSpawner.NAME` or `c.{cls.__name__}.NAME`)."
    ]
    for name, trait in configurable_traits(cls):
        kind = TYPES.get(type(trait).__name__, type(trait).__name__)
        facts = f"type: {kind}; default: {default_text(cls, name, trait, 'computed (see below)')}"
        sections.append(
            f"### `c.{cls.__name__}.{name}`\n\n{facts}\n\n{inspect.cleandoc(trait.help)}"
        )
    return "\n\n".join(sections) + "\n"


if __name__ == "__main__":
    sys.exit(
        main(__doc__.split("\n\n")[0], DOC, BEGIN, END, reference, "docs/gen_spawner_config.py")
    )
