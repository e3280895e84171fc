"""The gpupool JupyterHub service: ``python -m jupyter_gpupool.service`` (see ``docs/service.md``).

Importing this package starts nothing and reads no configuration; :class:`GPUPoolService` does,
when it is started.
"""

from .app import GPUPoolService, main

__all__ = ["GPUPoolService", "main"]
