"""The jupyter-server extension behind the JupyterLab status item: ``/gpupool/...``.

Enabled by ``jupyter-config/server-config/jupyter_gpupool.json``, which the wheel installs as
``etc/jupyter/jupyter_server_config.d/jupyter_gpupool.json``.
"""

from __future__ import annotations

from typing import Any

from .handlers import setup_handlers

__all__ = ["load_jupyter_server_extension"]


def _load_jupyter_server_extension(server_app: Any) -> None:
    setup_handlers(server_app.web_app)
    server_app.log.info("jupyter_gpupool: /gpupool/ handlers for the JupyterLab status item")


# the name jupyter_server < 2 looked for
load_jupyter_server_extension = _load_jupyter_server_extension
