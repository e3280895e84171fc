"""A simulated Kubernetes cluster for the demo and tests.

Real clients (kubectl, kubernetes_asyncio, the sync kubernetes client, KubeSpawner) talk to it over
HTTPS, with the token of the kubeconfig it writes; see :class:`SimCluster`, ``gpupool sim --help``
and docs/sim.md.
"""

from .cluster import SimCluster, node_object
from .credentials import kubeconfig_text, sim_auth_headers, sim_ssl_context
from .nodes.spec import ClusterSpec, NodeSpec, load_cluster_file, parse_cluster

__all__ = [
    "ClusterSpec",
    "NodeSpec",
    "SimCluster",
    "kubeconfig_text",
    "load_cluster_file",
    "node_object",
    "parse_cluster",
    "sim_auth_headers",
    "sim_ssl_context",
]
