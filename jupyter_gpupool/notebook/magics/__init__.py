"""``%gpupool`` magics: ``%load_ext jupyter_gpupool``, then ``%gpupool help``.

See ``docs/notebook.md``. IPython is imported here, not by ``import jupyter_gpupool``.
"""

from __future__ import annotations

from typing import Any

from .magic import GPUPoolMagics

__all__ = ["GPUPoolMagics", "load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(GPUPoolMagics)
