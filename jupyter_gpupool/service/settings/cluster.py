"""How the service reaches the cluster and keeps its live view: its settings.

The kubeconfig, the node label that names pools, how long the first sync may take, and how long
the per-pool usage rows made from the live view are reused.
"""

from __future__ import annotations

from typing import Any

from traitlets import Float, HasTraits, TraitError, Unicode, validate

from ...core.usage.labels import POOL_LABEL, is_label_key
from .checks import more_than_zero


class ClusterSettings(HasTraits):
    """How the service reaches the cluster and keeps its live view."""

    kubeconfig = Unicode(
        "",
        help="""The kubeconfig file to reach the Kubernetes API with.

        Empty (the default): the pod's service account when running in a cluster, else
        ``$KUBECONFIG``, else ``~/.kube/config``. The service lists and watches nodes and pods
        cluster-wide and patches node labels, so it needs a ClusterRole for that.

        Example::

            c.GPUPoolService.kubeconfig = "/etc/gpupool/kubeconfig"
        """,
    ).tag(config=True)

    pool_label = Unicode(
        POOL_LABEL,
        help="""The node label whose value names a node's pool (gpuctl's by default).

        Nodes without it are in the ``default`` pool. Pools created through the API label
        their nodes with it.

        Example::

            c.GPUPoolService.pool_label = "example.org/gpu-pool"
        """,
    ).tag(config=True)

    @validate("pool_label")
    def _check_pool_label(self, proposal: Any) -> str:
        value = str(proposal["value"])
        if not is_label_key(value):
            raise TraitError(f"pool_label {value!r} is not a valid Kubernetes label key")
        return value

    sync_timeout = Float(
        60.0,
        help="""How long, in seconds, to wait at start for the first full list of nodes and pods.

        Until it has arrived the API answers 503, so no admission is ever made against a
        partial view of the cluster.

        Example::

            c.GPUPoolService.sync_timeout = 120
        """,
    ).tag(config=True)

    @validate("sync_timeout")
    def _positive_sync_timeout(self, proposal: Any) -> float:
        return more_than_zero(proposal, " seconds")

    summary_cache_seconds = Float(
        0.5,
        help="""How long the per-pool usage rows (``GET api/v1/pools``, the spawn form) are
        reused before they are recomputed from the usage index.

        GPUs held by admissions are always current; what pods use lags by about this much
        (at most four times this under heavy load, when rows are rebuilt a few per request so
        that no request waits for all of them). 0 recomputes on every request.

        Example::

            c.GPUPoolService.summary_cache_seconds = 2
        """,
    ).tag(config=True)
