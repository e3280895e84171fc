"""``/sim/v1/…``: the simulator's own endpoints, to change the cluster while it runs."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ..nodes.dcgm import CONTENT_TYPE as DCGM_CONTENT_TYPE
from ..objects.errors import ApiError
from .door import BaseHandler

UTILIZATION_BODY = '{"percent": 0..100} (or one per GPU: {"percent": [0..100, ...]})'


class ControlHandler(BaseHandler):
    """``/sim/v1/…``: change the cluster while it runs (for tests that run ``gpupool sim``).

    - ``POST /sim/v1/nodes`` with a cluster-file node mapping adds a node
    - ``DELETE /sim/v1/nodes/NAME`` removes one (its pods go with it)
    - ``PUT /sim/v1/nodes/NAME/mig`` ``{"mig": {"strategy": "mixed", "devices": {...}},
      "config": "NAME"}`` re-partitions a MIG node as the MIG manager does (409 while in use)
    - ``PUT /sim/v1/nodes/NAME/cordon`` ``{"unschedulable": true}``
    - ``PUT /sim/v1/nodes/NAME/conditions`` ``{"Ready": false, "MemoryPressure": true}``
      (``"Unknown"`` too); the node lifecycle controller's taints follow
    - ``PUT /sim/v1/faults`` ``{"error_rate": 0.2, "paths": ["/pods"], "seed": 1}``
    - ``POST /sim/v1/faults/cut-watches``, ``POST /sim/v1/faults/expire-history``
    - ``GET /sim/v1/dcgm/metrics[?node=NAME]``: the GPUs as NVIDIA's DCGM exporter reports them
      (Prometheus' text format; see :mod:`..nodes.dcgm`); ``PUT /sim/v1/dcgm/nodes/NAME``
      ``{"reachable": false}`` makes a node's exporter stop answering
    - ``PUT /sim/v1/namespaces/NS/pods/NAME/gpu-utilization`` ``{"percent": 80}`` (all its
      GPUs) or ``{"percent": [0, 90]}`` (one per GPU, in ``NVIDIA_VISIBLE_DEVICES`` order), and
      ``GET`` of the same path: what the pod's GPUs report as their utilization
    """

    def _body(self) -> dict:
        body = self.body_json() or {}
        if not isinstance(body, dict):
            raise ApiError(400, "expected a JSON object")
        return body

    def _do(self, fn: Any) -> None:
        try:
            result = fn()
            self.send_json(result if result is not None else {"ok": True})
        except ApiError as e:
            self.send_error_status(e)
        except (ValueError, TypeError) as e:
            self.send_error_status(ApiError(400, str(e)))

    def _utilization_path(self, path: str) -> tuple[str, str] | None:
        """``(namespace, pod)`` of ``namespaces/NS/pods/NAME/gpu-utilization``, else None."""
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if len(parts) == 5 and (parts[0], parts[2], parts[4]) == (
            "namespaces",
            "pods",
            "gpu-utilization",
        ):
            return parts[1], parts[3]
        return None

    def _percent(self) -> Any:
        """The ``percent`` of a ``{"percent": 0..100}`` body (checked by the exporter)."""
        body = self.body_json()
        if not isinstance(body, dict):
            raise ApiError(400, f"the body must be a JSON object: {UTILIZATION_BODY}")
        unknown = sorted(set(body) - {"percent"})
        if unknown:
            raise ApiError(400, f"unknown field {unknown[0]!r}: the body is {UTILIZATION_BODY}")
        if "percent" not in body:
            raise ApiError(400, f"percent is required: {UTILIZATION_BODY}")
        return body["percent"]

    def get(self, path: str) -> None:
        c = self.cluster
        if path.strip("/") == "dcgm/metrics":
            try:
                text = c.dcgm_metrics(self.get_argument("node", None) or None)
            except ApiError as e:
                self.send_error_status(e)
                return
            self.set_header("Content-Type", DCGM_CONTENT_TYPE)
            self.finish(text)
        elif (pod := self._utilization_path(path)) is not None:
            self._do(lambda: c.gpu_utilization(*pod))
        else:
            self.send_error_status(ApiError(404, f"no such control endpoint: {path}"))

    def post(self, path: str) -> None:
        c = self.cluster
        path = path.strip("/")
        if path == "nodes":
            self._do(lambda: c.add_node(self._body()))
        elif path == "faults/cut-watches":
            self._do(lambda: {"closed": c.faults.cut_watches()})
        elif path == "faults/expire-history":
            self._do(lambda: c.faults.expire_history())
        else:
            self.send_error_status(ApiError(404, f"no such control endpoint: {path}"))

    def put(self, path: str) -> None:
        c = self.cluster
        parts = path.strip("/").split("/")
        if parts == ["faults"]:
            self._do(lambda: c.faults.configure(**self._body()))
        elif (pod := self._utilization_path(path)) is not None:
            self._do(lambda: c.set_gpu_utilization(*pod, self._percent()))
        elif len(parts) == 3 and parts[:2] == ["dcgm", "nodes"]:

            def reachable() -> Any:
                body = self._body()
                if set(body) != {"reachable"} or not isinstance(body["reachable"], bool):
                    raise ApiError(400, 'the body is {"reachable": true} or {"reachable": false}')
                return c.set_dcgm_reachable(parts[2], body["reachable"])

            self._do(reachable)
        elif len(parts) == 3 and parts[0] == "nodes" and parts[2] == "mig":

            def mig() -> Any:
                body = self._body()
                if not isinstance(body.get("mig"), dict) or set(body) - {"mig", "config"}:
                    raise ApiError(400, 'the body is {"mig": {...}, "config": "NAME"}')
                return c.repartition(parts[1], body["mig"], str(body.get("config", "custom")))

            self._do(mig)
        elif len(parts) == 3 and parts[0] == "nodes" and parts[2] == "cordon":
            self._do(lambda: c.cordon(parts[1], bool(self._body().get("unschedulable", True))))
        elif len(parts) == 3 and parts[0] == "nodes" and parts[2] == "conditions":
            body = self._body()
            self._do(
                lambda: (
                    [
                        c.set_condition(parts[1], k, v if isinstance(v, str) else bool(v))
                        for k, v in body.items()
                    ][-1:]
                    and None
                )
            )
        else:
            self.send_error_status(ApiError(404, f"no such control endpoint: {path}"))

    def delete(self, path: str) -> None:
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "nodes":
            self._do(lambda: self.cluster.remove_node(parts[1]))
        else:
            self.send_error_status(ApiError(404, f"no such control endpoint: {path}"))
