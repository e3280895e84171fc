"""GPU node pools for JupyterHub on Kubernetes."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0.dev0"
__all__ = ["GPUPoolSpawner", "__version__"]


def __getattr__(name: str) -> Any:
    # Importing the package stays cheap (the CLI, the magics): KubeSpawner loads on first use.
    if name == "GPUPoolSpawner":
        from .spawner import GPUPoolSpawner

        return GPUPoolSpawner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
