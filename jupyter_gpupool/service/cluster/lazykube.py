"""kubernetes_asyncio without importing all of it: its packages' names are looked up when used.

``import kubernetes_asyncio`` (or any of its modules: a package's ``__init__`` runs first)
imports every generated API class and all ~700 model classes, 35 MB of the service's memory at
150,000 pods, although the service reads objects as raw JSON (:mod:`.watch`, :mod:`.kube`) and
uses a few names: ``ApiClient``, ``Configuration``, ``CoreV1Api``, ``config.load_*``,
``watch.Watch``, ``ApiException``.

:func:`install`, called before the first import of kubernetes_asyncio, puts its top package,
``client``, ``client.api`` and ``client.models`` in ``sys.modules`` without running their
``__init__``: each gets a module ``__getattr__`` that imports, on first use, the module that
the real ``__init__`` imports the name from (the map is read from the ``__init__``'s own
``from kubernetes_asyncio.X import Name`` lines, so it follows the installed version). Every
name stays reachable as before (``client.V1Pod``, ``getattr(client.models, "V1Pod")`` that the
API client's deserializer does); only what is used is loaded. Where the installed package does
not look as expected (no such lines, already imported), nothing is changed.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

TOP = "kubernetes_asyncio"
#: The packages whose ``__init__`` imports everything, made lazy
LAZY = (TOP, f"{TOP}.client", f"{TOP}.client.api", f"{TOP}.client.models")

_FROM = re.compile(r"^from (kubernetes_asyncio(?:\.\w+)+) import (\w+)\s*$", re.M)
_AS = re.compile(r"^import (kubernetes_asyncio\.\w+) as (\w+)\s*$", re.M)
_VERSION = re.compile(r"^__version__ = \"([^\"]+)\"", re.M)


def _names(init: str) -> dict[str, tuple[str, str]]:
    """Name -> (module, attribute) for what an ``__init__``'s text imports (a module imported
    ``as`` a name: that module itself, attribute "")."""
    names = {name: (module, name) for module, name in _FROM.findall(init)}
    names.update({alias: (module, "") for module, alias in _AS.findall(init)})
    return names


def _lazy_module(name: str, folder: Path) -> types.ModuleType | None:
    init = folder / "__init__.py"
    try:
        text = init.read_text(encoding="utf-8")
    except OSError:
        return None
    names = _names(text)
    if not names:
        return None
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(folder)]
    )
    if spec is None:
        return None
    module = importlib.util.module_from_spec(spec)
    version = _VERSION.search(text)
    if version:
        module.__version__ = version.group(1)  # type: ignore[attr-defined]
    module.__all__ = sorted(names)  # type: ignore[attr-defined]

    def __getattr__(attr: str) -> Any:
        found = names.get(attr)
        if found is None:
            # a submodule (``kubernetes_asyncio.client.rest``), as the real ``__init__`` leaves
            # the ones it imports
            if importlib.util.find_spec(f"{name}.{attr}") is None:
                raise AttributeError(f"module {name!r} has no attribute {attr!r}")
            found = (f"{name}.{attr}", "")
        where, what = found
        value: Any = importlib.import_module(where)
        if what:
            value = getattr(value, what)
        setattr(module, attr, value)  # looked up once
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def install() -> bool:
    """Make kubernetes_asyncio's heavy packages lazy (before its first import); whether it
    was done."""
    if TOP in sys.modules:
        return False  # already imported, as it is
    spec = importlib.machinery.PathFinder.find_spec(TOP)
    if spec is None or not spec.submodule_search_locations:
        return False
    root = Path(next(iter(spec.submodule_search_locations)))
    modules = {}
    for name in LAZY:
        module = _lazy_module(name, root.joinpath(*name.split(".")[1:]))
        if module is None:
            return False
        modules[name] = module
    for name, module in modules.items():
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    return True
