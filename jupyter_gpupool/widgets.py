"""``jupyter_gpupool.widgets``: the public path of the notebook widgets (they live in
:mod:`jupyter_gpupool.notebook.widgets`). Needs ipywidgets."""

from .notebook.widgets import LaunchPanel, PoolBar

__all__ = ["LaunchPanel", "PoolBar"]
