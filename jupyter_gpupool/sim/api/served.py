"""What the simulated API server's handlers reach of the cluster they serve.

:func:`.server.make_app` hands the cluster to every handler (:mod:`.door`, :mod:`.server`,
:mod:`.control`); :class:`~.cluster.SimCluster`, which starts the server, is one. Described
here, below both, so that the handlers need not import the module that starts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..nodes.dcgm import DcgmExporter
from ..nodes.kubelet import Kubelet
from ..objects.faults import Faults
from ..objects.store import Store


class ServedCluster(Protocol):
    """The cluster as its handlers see it: its parts, and the changes ``/sim/v1`` makes."""

    token: str  # the bearer token every request must carry (the door)
    store: Store
    kubelet: Kubelet  # pods' logs
    dcgm: DcgmExporter  # pods' proxy to their node's exporter
    faults: Faults

    def add_node(self, node: Mapping[str, Any]) -> dict[str, Any]: ...

    def remove_node(self, name: str) -> None: ...

    def cordon(self, name: str, unschedulable: bool = True) -> dict[str, Any]: ...

    def set_condition(self, name: str, ctype: str, status: bool | str) -> dict[str, Any]: ...

    def set_gpu_utilization(
        self, namespace: str, name: str, percent: int | Sequence[int]
    ) -> dict[str, Any]: ...

    def gpu_utilization(self, namespace: str, name: str) -> dict[str, Any]: ...

    def set_dcgm_reachable(self, node: str, reachable: bool) -> dict[str, Any]: ...

    def dcgm_metrics(self, node: str | None = None) -> str: ...

    def repartition(
        self, name: str, mig: Mapping[str, Any], config: str = "custom"
    ) -> dict[str, Any]: ...
