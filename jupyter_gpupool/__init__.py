"""GPU node pools for JupyterHub on Kubernetes."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0.dev0"
__all__ = ["GPUPoolSpawner", "__version__", "load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_gpupool``: the ``%gpupool`` magics (IPython loads on first use)."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The jupyter-server extension (``/gpupool/...``) for the JupyterLab status item."""
    return [{"module": "jupyter_gpupool.notebook.serverext"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """The prebuilt JupyterLab extension (``jupyter labextension develop`` uses it)."""
    return [{"src": "labextension", "dest": "jupyter-gpupool"}]


def __getattr__(name: str) -> Any:
    # Importing the package stays cheap (the CLI, the magics): KubeSpawner loads on first use.
    if name == "GPUPoolSpawner":
        from .spawner import GPUPoolSpawner

        return GPUPoolSpawner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
