"""Where the GPUs' utilization is measured: its settings.

The source (NVIDIA's DCGM exporter, read directly or through Prometheus), where its pages or pods
are, and how often it is polled.
"""

from __future__ import annotations

from typing import Any

from traitlets import (
    CaselessStrEnum,
    Float,
    HasTraits,
    Integer,
    List,
    TraitError,
    Unicode,
    validate,
)

from ...core.kube.labelselectors import SelectorError, parse_label_selector
from ...core.kube.names import is_dns1123_label
from .checks import more_than_zero


class UtilizationSettings(HasTraits):
    """Where and how often the GPUs' utilization is measured."""

    utilization_source = CaselessStrEnum(
        ["none", "dcgm", "prometheus"],
        default_value="none",
        help="""Where the GPUs' utilization is measured: ``dcgm``, ``prometheus`` or ``none``.

        ``dcgm`` reads NVIDIA's DCGM exporter pages (``dcgm_urls``, and the exporter pods
        ``dcgm_pod_selector`` finds); ``prometheus`` asks a Prometheus server that scrapes
        them (``prometheus_url``). The service polls every
        ``utilization_interval`` seconds and shows each server's GPU utilization and GPU
        memory (``GET api/v1/servers``). ``none`` measures nothing.

        Example::

            c.GPUPoolService.utilization_source = "prometheus"
        """,
    ).tag(config=True)

    utilization_interval = Float(
        30.0,
        help="""Seconds between two polls of the GPU utilization source.

        A measurement older than three intervals is stale: shown as none, and never taken
        for an idle GPU.

        Example::

            c.GPUPoolService.utilization_interval = 15
        """,
    ).tag(config=True)

    dcgm_urls = List(
        Unicode(),
        default_value=[],
        help="""The DCGM exporter pages the ``dcgm`` source reads.

        A path (starting with ``/``) is read from the Kubernetes API server with the service's
        credentials: the exporter's service through the API server's proxy (the service
        account needs ``get`` on ``services/proxy`` there), or the simulated cluster's
        ``/sim/v1/dcgm/metrics``. A ``http://`` or ``https://`` URL is read as it is.

        Example::

            c.GPUPoolService.dcgm_urls = [
                "/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:9400/proxy/metrics"
            ]
        """,
    ).tag(config=True)

    dcgm_pod_selector = Unicode(
        "",
        help="""A label selector of the DCGM exporter's pods, which the ``dcgm`` source reads.

        Every poll lists the pods it matches (in ``dcgm_namespace``), and reads each running
        one through the Kubernetes API server's pod proxy,
        ``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/metrics`` (port ``dcgm_port``), with the
        service's credentials: the service account needs ``list`` on ``pods`` and ``get`` on
        ``pods/proxy`` in that namespace. The NVIDIA GPU Operator's exporter runs as a
        DaemonSet, one pod per GPU node: a node added later is read from the first poll after
        its exporter pod runs. Given with ``dcgm_urls``, both are read. Empty: no discovery.

        Example::

            c.GPUPoolService.dcgm_pod_selector = "app=nvidia-dcgm-exporter"
        """,
    ).tag(config=True)

    dcgm_namespace = Unicode(
        "",
        help="""The namespace of the DCGM exporter's pods (``dcgm_pod_selector``); empty: every
        namespace.

        Example::

            c.GPUPoolService.dcgm_namespace = "gpu-operator"
        """,
    ).tag(config=True)

    dcgm_port = Integer(
        9400,
        help="""The port the DCGM exporter's pods serve ``/metrics`` on (``dcgm_pod_selector``);
        9400 is the exporter's default.

        Example::

            c.GPUPoolService.dcgm_port = 9400
        """,
    ).tag(config=True)

    @validate("dcgm_pod_selector")
    def _valid_dcgm_pod_selector(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip()
        if value:
            try:
                parse_label_selector(value)
            except SelectorError as e:
                raise TraitError(f"dcgm_pod_selector: {e}") from None
        return value

    @validate("dcgm_namespace")
    def _valid_dcgm_namespace(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip()
        if value and not is_dns1123_label(value):
            raise TraitError(
                f"dcgm_namespace must be a namespace name (lowercase letters, digits and '-', "
                f"at most 63 characters), not {value!r}"
            )
        return value

    @validate("dcgm_port")
    def _valid_dcgm_port(self, proposal: Any) -> int:
        value = int(proposal["value"])
        if not 1 <= value <= 65535:
            raise TraitError(f"dcgm_port must be a port number from 1 to 65535, not {value}")
        return value

    prometheus_url = Unicode(
        "",
        help="""The Prometheus server the ``prometheus`` source asks (its base URL).

        Example::

            c.GPUPoolService.prometheus_url = "http://prometheus-server.monitoring:80"
        """,
    ).tag(config=True)

    prometheus_query = Unicode(
        "",
        help="""A PromQL query giving each pod's mean GPU utilization in percent, by
        ``namespace`` and ``pod`` labels, instead of the default
        ``avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)``.

        With the default, the service also asks for the highest GPU's utilization, the
        GPU memory used and free, the MIG instances' ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (x 100)
        and which pods share a GPU (docs/shapes.md); with a query of your own, only for that.

        Example::

            c.GPUPoolService.prometheus_query = "avg by (namespace, pod) (dcgm_gpu_utilization)"
        """,
    ).tag(config=True)

    @validate("utilization_interval")
    def _positive_interval(self, proposal: Any) -> float:
        return more_than_zero(proposal)
