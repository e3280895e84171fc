"""The gpupool JupyterHub service: ``python -m jupyter_gpupool.service`` (see ``docs/service.md``).

Importing this package starts nothing and reads no configuration; :class:`GPUPoolService` does,
when it is started.
"""

from .cluster import lazykube

# Before anything imports kubernetes_asyncio: its ~700 model classes stay unloaded (35 MB).
lazykube.install()

from .app import GPUPoolService, main  # noqa: E402

__all__ = ["GPUPoolService", "main"]
