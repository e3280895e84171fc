"""The gpupool service with its registry changes made on the event loop: the baseline of
``bench_registry.py``.

Runs the service exactly as ``python -m jupyter_gpupool.service`` does (same arguments, same
parsing and checking of pool documents, same files written), except that what the pool manager
and the registry store hand to a thread (``asyncio.to_thread``) runs in the event loop instead,
as it did before issue 27. So the benchmark's ratio of the two services' admission waits during
a change is what keeping the change off the event loop buys. Run by ``bench_registry.py``.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_gpupool.service.app import main
from jupyter_gpupool.service.registry import changes, store


async def in_the_loop(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


# the registry's modules only: the database's writer keeps its thread
_asyncio = types.SimpleNamespace(**{**vars(asyncio), "to_thread": in_the_loop})
changes.asyncio = _asyncio  # type: ignore[attr-defined]
store.asyncio = _asyncio  # type: ignore[attr-defined]

if __name__ == "__main__":
    main()
