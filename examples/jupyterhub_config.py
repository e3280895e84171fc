"""jupyterhub_config.py for a real Kubernetes cluster with GPU pools.

The hub runs in the cluster (its service account may read nodes and pods cluster-wide and label
nodes: see docs/service.md for the RBAC), users get KubeSpawner pods placed by GPUPoolSpawner, and
the gpupool service runs as a hub-managed service beside the hub. Replace the authenticator, the
image and the admin users with yours. Tokens come from the environment: GPUPOOL_SPAWNER_TOKEN
(generate it with `openssl rand -hex 32`), with which the spawner admits on behalf of users, and
optionally GPUPOOL_METRICS_TOKEN, with which Prometheus scrapes the service's metrics.
"""

import os
import sys

c = get_config()  # type: ignore[name-defined]  # noqa: F821 - provided by JupyterHub

# --- scopes and the service ------------------------------------------------------------------
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
c.JupyterHub.services = [
    {
        "name": "gpupool",
        "url": "http://127.0.0.1:10101",
        "command": [
            sys.executable,
            "-m",
            "jupyter_gpupool.service",
            "--port=10101",
            # pools and quotas live in a ConfigMap in the hub's namespace (survives restarts);
            # use --pools=/srv/gpupool/pools for a directory of YAML files instead
            "--registry=configmap",
        ],
        "oauth_no_confirm": True,
        "oauth_client_allowed_scopes": ["custom:gpupool:use", "custom:gpupool:admin"],
    },
    {"name": "gpupool-spawner", "api_token": os.environ["GPUPOOL_SPAWNER_TOKEN"]},
]
if os.environ.get("GPUPOOL_METRICS_TOKEN"):
    # the token Prometheus scrapes /services/gpupool/metrics with (role gpupool-metrics)
    c.JupyterHub.services.append(
        {"name": "prometheus", "api_token": os.environ["GPUPOOL_METRICS_TOKEN"]}
    )
c.JupyterHub.load_roles = [
    {
        "name": "user",
        "scopes": ["self", "custom:gpupool:use", "access:services!service=gpupool"],
    },
    {
        "name": "gpupool-admins",
        "users": ["admin"],  # your GPU admins
        "services": ["gpupool-spawner"],
        "scopes": ["custom:gpupool:admin", "access:services!service=gpupool"],
    },
    {
        # metrics and nothing else: a scrape token cannot change pools
        "name": "gpupool-metrics",
        "services": [s["name"] for s in c.JupyterHub.services if s["name"] == "prometheus"],
        "scopes": ["custom:gpupool:metrics", "access:services!service=gpupool"],
    },
    {
        "name": "gpupool-service",
        "services": ["gpupool"],
        "scopes": ["read:users:groups", "delete:servers"],
    },
]

# --- the spawner ---------------------------------------------------------------------------
c.JupyterHub.spawner_class = "gpupool"
c.GPUPoolSpawner.service_url = "http://127.0.0.1:10101/services/gpupool/"
c.GPUPoolSpawner.service_token = os.environ["GPUPOOL_SPAWNER_TOKEN"]
c.GPUPoolSpawner.pool_schedule_timeout = 60  # seconds Unschedulable before the next pool
c.GPUPoolSpawner.pool_schedule_timeouts = {"training-pool": 120}
# The service as the notebook servers reach it (%gpupool, LaunchPanel, the JupyterLab status
# item; docs/notebook.md): the hub's 127.0.0.1 is not theirs. Default: service_url.
# c.GPUPoolSpawner.notebook_service_url = "https://hub.example.org/services/gpupool/"
c.JupyterHub.allow_named_servers = True  # `%gpupool launch NAME` starts named servers
c.KubeSpawner.image = "quay.io/jupyter/pytorch-notebook:cuda12-latest"
c.KubeSpawner.start_timeout = 600  # the whole fallback walk must fit in it
# Waiting in line when no pool can take a server now (the spawn form's box, ticked by default
# here): a start that waits gives up at start_timeout, so give it more (docs/spawner.md).
# c.GPUPoolSpawner.queue_by_default = True
# c.KubeSpawner.start_timeout = 3600
c.KubeSpawner.default_url = "/lab"

# --- users and groups (quotas are per JupyterHub group) ---------------------------------------
# c.JupyterHub.authenticator_class = "github"  # or generic-oauth, ldap...
c.Authenticator.admin_users = {"admin"}
c.JupyterHub.load_groups = {
    "ml-research": {"users": ["alice", "bob"]},
    "ml-ops": {"users": ["carol"]},
}
