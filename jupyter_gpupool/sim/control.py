"""``/sim/v1/…``: the simulator's own endpoints, to change the cluster while it runs."""

from __future__ import annotations

from typing import Any

from .door import BaseHandler
from .errors import ApiError


class ControlHandler(BaseHandler):
    """``/sim/v1/…``: change the cluster while it runs (for tests that run ``gpupool sim``).

    - ``POST /sim/v1/nodes`` with a cluster-file node mapping adds a node
    - ``DELETE /sim/v1/nodes/NAME`` removes one (its pods go with it)
    - ``PUT /sim/v1/nodes/NAME/cordon`` ``{"unschedulable": true}``
    - ``PUT /sim/v1/nodes/NAME/conditions`` ``{"Ready": false, "MemoryPressure": true}``
      (``"Unknown"`` too); the node lifecycle controller's taints follow
    - ``PUT /sim/v1/faults`` ``{"error_rate": 0.2, "paths": ["/pods"], "seed": 1}``
    - ``POST /sim/v1/faults/cut-watches``, ``POST /sim/v1/faults/expire-history``
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
