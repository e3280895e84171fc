"""A simulated Kubernetes cluster for the demo and tests.

Real clients (kubectl, kubernetes_asyncio, the sync kubernetes client, KubeSpawner) talk to it over
HTTP; see :class:`SimCluster` and ``gpupool sim --help``.
"""

from .cluster import SimCluster, kubeconfig_text, node_object
from .spec import ClusterSpec, NodeSpec, load_cluster_file, parse_cluster

__all__ = [
    "ClusterSpec",
    "NodeSpec",
    "SimCluster",
    "kubeconfig_text",
    "load_cluster_file",
    "node_object",
    "parse_cluster",
]
