"""What a test module needs from the machine, and what happens when it is missing.

On a developer's machine a missing tool skips the module with the reason. Under CI (``CI`` set to
true, as CI services and ``.ci/run`` set it) it is an error instead: CI installs every tool the
suite needs (``scripts/test.sh``), so a missing one means the install is broken, and a skipped
module would let a green run hide untested code.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need(ok: object, what: str, where: str = "scripts/test.sh installs it") -> None:
    """Skip the calling module (fail it under CI) unless ``ok``; ``what`` says what is missing,
    ``where`` where CI gets it."""
    if ok:
        return
    if under_ci():
        pytest.fail(f"{what} (required under CI: {where})", pytrace=False)
    pytest.skip(what, allow_module_level=True)


def need_module(name: str, what: str) -> ModuleType:
    """Import ``name``, or :func:`need` fails/skips with ``what``."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        need(False, f"{what} ({e})")
        raise  # pragma: no cover - need() raised already
