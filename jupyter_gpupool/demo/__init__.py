"""``gpupool demo``: the simulated cluster, the gpupool service and a real JupyterHub, on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

#: JupyterHub's port when ``gpupool demo`` is given none.
DEFAULT_PORT = 8000
#: The state directory when ``gpupool demo`` is given none (relative to where it is started).
DEFAULT_STATE_DIR = "gpupool-demo"
#: Where binder/start keeps the demo's state (under the home directory).
HOME_STATE_DIR = ".gpupool-demo"
#: In the state directory: the hub's URL, written once the demo answers, removed when it stops.
URL_FILE = "url"
#: In the state directory: the demo's admin API token, for scripts and the CLI.
ADMIN_TOKEN_FILE = "admin-token"


def state_dirs(cwd: Path | None = None, home: Path | None = None) -> list[Path]:
    """Where a demo keeps its state when started as the README and the tour say: from the
    clone's root (seen from there or from ``examples/``), or in the home directory (binder)."""
    cwd = (cwd or Path.cwd()).absolute()
    home = home or Path.home()
    return [cwd / DEFAULT_STATE_DIR, cwd.parent / DEFAULT_STATE_DIR, home / HOME_STATE_DIR]
