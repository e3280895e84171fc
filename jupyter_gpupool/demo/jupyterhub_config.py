"""JupyterHub configuration for ``gpupool demo``.

``gpupool demo`` starts JupyterHub with this file and passes everything that varies through
``GPUPOOL_DEMO_*`` environment variables, so the file also reads as an example of wiring the
gpupool service, its scopes and roles into a hub. For a real cluster, start from
``examples/jupyterhub_config.py`` instead.
"""

import json
import os
import secrets
import sys
from pathlib import Path

c = get_config()  # type: ignore[name-defined]  # noqa: F821 - provided by JupyterHub

env = os.environ
state = Path(env["GPUPOOL_DEMO_STATE_DIR"])
bindir = Path(sys.executable).parent

# --- the hub, on 127.0.0.1 only ------------------------------------------------------------
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(env["GPUPOOL_DEMO_PORT"])
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env["GPUPOOL_DEMO_HUB_PORT"])
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.log_level = env.get("GPUPOOL_DEMO_LOG_LEVEL", "INFO")
# JupyterHub scrubs ?token= from its access log, but not from the warning tornado writes for a
# refused request ("403 GET /hub/api/users?token=..."): a filter on its log handler does
c.JupyterHub.logging_config = {
    "filters": {"redact_secrets": {"()": "jupyter_gpupool.logredact.RedactSecrets"}},
    "handlers": {"console": {"filters": ["redact_secrets"]}},
}

# The Python port of configurable-http-proxy, so that pip alone installs the demo; started
# through jupyter_gpupool.demo.proxy, which makes it pass responses on as they come (or the
# spawn page's progress messages arrive all at once, at the end) and websockets as they are
# (JupyterLab's kernel protocol), as the JavaScript proxy does.
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env['GPUPOOL_DEMO_PROXY_API_PORT']}"
c.ConfigurableHTTPProxy.command = [sys.executable, "-m", "jupyter_gpupool.demo.proxy"]
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")

# --- users: anyone may log in with any password; `admin` is an admin -------------------------
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.Authenticator.admin_users = {"admin"}
# The users the README names exist from the start, as they would in a hub whose users come from
# a directory: the hub's API, the admin page and scripts (the tour) find `dave` before he has
# ever logged in. allow_all still lets any other name log in.
c.Authenticator.allowed_users = {"alice", "bob", "carol", "dave"}
c.JupyterHub.load_groups = {
    "ml-research": {"users": ["alice", "bob"]},
    "ml-ops": {"users": ["carol"]},
}

# --- single-user servers: pods on the simulated cluster, run as local processes -------------
service_cmd = env.get("GPUPOOL_DEMO_SERVICE_COMMAND")
# GPUPoolSpawner (the `gpupool` entry point): the spawn form lists the pools, a server starts in
# the first pool of the user's list that admits it. Plain KubeSpawner without the service.
c.JupyterHub.spawner_class = env.get(
    "GPUPOOL_DEMO_SPAWNER", "gpupool" if service_cmd else "kubespawner.KubeSpawner"
)
c.KubeSpawner.namespace = "default"
c.KubeSpawner.image = "jupyter-gpupool/demo-notebook"  # not pulled: the kubelet runs processes
c.KubeSpawner.cmd = [str(bindir / "jupyterhub-singleuser")]
# JupyterLab's announcements plugin asks each new user "Would you like to get notified about
# official Jupyter news?" (and, if they say yes, fetches the feed and checks for updates on the
# internet). The demo has no use for either: its page config turns the plugin off, and the
# server is told to fetch no feed (news_url None) should anyone turn it back on.
singleuser_config = [str(Path(__file__).resolve().parent / "singleuser")]  # labconfig/ in it
if env.get("JUPYTER_CONFIG_PATH"):
    singleuser_config.append(env["JUPYTER_CONFIG_PATH"])
c.KubeSpawner.environment = {"JUPYTER_CONFIG_PATH": os.pathsep.join(singleuser_config)}
singleuser_args = ["--LabApp.news_url=None"]
if os.geteuid() == 0:
    # jupyter-server refuses to run as root without it, and the hub would answer with a bare 500
    singleuser_args.append("--allow-root")
c.KubeSpawner.args = singleuser_args
# A start may wait in line for GPUs (the spawn form's "wait in line" box) until start_timeout:
# a quarter of an hour here (docs/spawner.md, "Waiting in line").
c.KubeSpawner.start_timeout = 900
c.KubeSpawner.http_timeout = 60
c.Spawner.default_url = "/lab"
# more servers per user: `%gpupool launch NAME` and the launch widget start named servers
c.JupyterHub.allow_named_servers = True
# The spawner asks the service directly (not through the proxy), with the token of the
# `gpupool-spawner` service below (custom:gpupool:admin: admissions on behalf of any user).
c.GPUPoolSpawner.service_url = (
    f"http://127.0.0.1:{env.get('GPUPOOL_DEMO_SERVICE_PORT', '10101')}/services/gpupool/"
)
spawner_token = env.get("GPUPOOL_SPAWNER_TOKEN", "")
c.GPUPoolSpawner.service_token = spawner_token

# --- the gpupool service and its scopes -------------------------------------------------------
c.JupyterHub.custom_scopes = {
    "custom:gpupool:use": {
        "description": "Use GPU pools: see pools and your own servers, quota and admissions.",
    },
    "custom:gpupool:admin": {
        "description": "Administer GPU pools: pools, nodes, quotas and everyone's servers.",
    },
    "custom:gpupool:metrics": {
        "description": "Read the gpupool service's Prometheus metrics, and nothing else.",
    },
}
# A token for Prometheus to scrape /services/gpupool/metrics with, which can do nothing else
# (role `gpupool-metrics` below): made once, kept in the state directory like admin-token.
metrics_token_file = state / "metrics-token"
if not metrics_token_file.exists():
    metrics_token_file.touch(mode=0o600)
    metrics_token_file.write_text(secrets.token_hex(32) + "\n")
services: list[dict[str, object]] = [
    # A token for scripts and the CLI: `gpupool --token-file STATE/admin-token ...`
    {"name": "demo-admin", "api_token": (state / "admin-token").read_text().strip()},
    {"name": "prometheus", "api_token": metrics_token_file.read_text().strip()},
]
if spawner_token:
    # the token GPUPoolSpawner admits servers with (see docs/service.md)
    services.append({"name": "gpupool-spawner", "api_token": spawner_token})
if service_cmd:
    services.append(
        {
            "name": "gpupool",
            "url": f"http://127.0.0.1:{env['GPUPOOL_DEMO_SERVICE_PORT']}",
            "command": json.loads(service_cmd),  # a JSON list of arguments
            "oauth_no_confirm": True,
            # so that the service's page cookie carries the visitor's gpupool scopes
            "oauth_client_allowed_scopes": ["custom:gpupool:use", "custom:gpupool:admin"],
            "display": True,
        }
    )
c.JupyterHub.services = services
c.JupyterHub.load_roles = [
    {
        # every user may use pools and open the service's pages
        "name": "user",
        "scopes": ["self", "custom:gpupool:use", "access:services!service=gpupool"],
    },
    {
        "name": "gpupool-admins",
        "users": ["admin"],
        "services": ["demo-admin", "gpupool-spawner"] if spawner_token else ["demo-admin"],
        "scopes": [
            "admin:users",
            "admin:servers",
            "admin:groups",
            "tokens",  # scripts (and the tests) make API tokens for users
            "custom:gpupool:admin",
            "access:services",
            "access:servers",
            "list:users",
            "read:users",
        ],
    },
    {
        # a scrape token: metrics only (it needs access to the service, as every caller does)
        "name": "gpupool-metrics",
        "services": ["prometheus"],
        "scopes": ["custom:gpupool:metrics", "access:services!service=gpupool"],
    },
    {
        # what the service itself needs: look up users' groups, stop servers it reclaims
        "name": "gpupool-service",
        "services": ["gpupool"] if service_cmd else [],
        "scopes": ["read:users:groups", "delete:servers"],
    },
]

# --- more settings (tests, or your own experiments): a config file loaded last ------------------
if env.get("GPUPOOL_DEMO_EXTRA_CONFIG"):
    load_subconfig(env["GPUPOOL_DEMO_EXTRA_CONFIG"])  # type: ignore[name-defined]  # noqa: F821
