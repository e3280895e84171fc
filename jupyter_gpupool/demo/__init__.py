"""``gpupool demo``: the simulated cluster, the gpupool service and a real JupyterHub, on 127.0.0.1."""

#: JupyterHub's port when ``gpupool demo`` is given none.
DEFAULT_PORT = 8000
#: The state directory when ``gpupool demo`` is given none (relative to where it is started).
DEFAULT_STATE_DIR = "gpupool-demo"
#: In the state directory: the hub's URL, written once the demo answers, removed when it stops.
URL_FILE = "url"
#: In the state directory: the demo's admin API token, for scripts and the CLI.
ADMIN_TOKEN_FILE = "admin-token"
