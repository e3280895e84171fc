"""How the service reaches the cluster and keeps its live view: its settings.

The kubeconfig, the node label that names pools, how long the first sync may take, and how long
the per-pool usage rows made from the live view are reused.
"""

from __future__ import annotations

from typing import Any

from traitlets import Float, HasTraits, TraitError, Unicode, validate

from ...core.documents.mig_parted import DEFAULT_CONFIGS, MigConfigs, read_configs
from ...core.documents.yaml_reader import DocumentError
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

    mig_parted_config = Unicode(
        "",
        help="""The mig-parted config file that NVIDIA's MIG manager applies on the nodes (the
        ``config.yaml`` of the GPU operator's ``default-mig-parted-config`` ConfigMap, or of the
        ConfigMap its ``migManager.config.name`` names), mounted into the service's pod.

        A pool file's ``recut`` names configs of this file; the service reads what each one
        makes of a card (which MIG devices, on which GPU models) to choose a layout, to word
        what a re-cut brings and to check a booking's fit. Empty (the default): the GPU
        operator's default configs (``all-disabled``, ``all-1g.10gb``, ``all-balanced``...).
        A file that cannot be read, or is not a mig-parted config file, stops the service at
        start, saying why.

        Example::

            c.GPUPoolService.mig_parted_config = "/etc/mig-parted/config.yaml"
        """,
    ).tag(config=True)

    @validate("mig_parted_config")
    def _read_mig_parted(self, proposal: Any) -> str:
        path = str(proposal["value"])
        self._mig_configs = read_mig_parted(path) if path else DEFAULT_CONFIGS
        return path

    @property
    def mig_configs(self) -> MigConfigs:
        """The configs of :attr:`mig_parted_config` (the GPU operator's defaults without one)."""
        return getattr(self, "_mig_configs", DEFAULT_CONFIGS)

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


def read_mig_parted(path: str) -> MigConfigs:
    """The configs of the mig-parted file at ``path``; TraitError saying why it cannot be."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TraitError(f"mig_parted_config: cannot read {path}: {e.strerror or e}") from None
    try:
        return read_configs(text, path)
    except DocumentError as e:
        raise TraitError(
            f"mig_parted_config: {path} is not a mig-parted config file: {e}"
        ) from None
