"""The API server's pod proxy: ``GET /api/v1/namespaces/NS/pods/NAME[:PORT]/proxy[/PATH]``.

The real API server dials the pod's IP and port and passes the answer on; the simulator's pods
run no servers of their own to dial, except one: a pod that is the simulated DCGM exporter. That
is a pod with the annotation ``sim.gpupool.jupyter.org/dcgm-exporter: "true"``, bound to a node
(``spec.nodeName``) and Running: it listens on port 9400 (dcgm-exporter's default) and answers
``/metrics`` with its node's exporter page (:meth:`..nodes.dcgm.DcgmExporter.render` of that node), as
the NVIDIA GPU Operator's DaemonSet pod does. Its labels are the deployer's choice (the test and
the docs use ``app=nvidia-dcgm-exporter``, as the GPU Operator does).

Every other pod proxy answers what kube-apiserver v1.25 answers when nothing listens there
(checked on ../shared/realk8s): a pod without an IP yet, ``400 address not allowed``; a pod with
one, ``503 error trying to reach service: dial tcp IP:PORT: connect: connection refused``
(``ServiceUnavailable``). Without ``:PORT``, the port is the pod's first declared
``containerPort``, else 80, as there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..nodes.dcgm import CONTENT_TYPE, DcgmExporter
from ..objects.errors import ApiError, not_found
from ..objects.resources import RESOURCES
from ..objects.store import Store

EXPORTER_ANNOTATION = "sim.gpupool.jupyter.org/dcgm-exporter"
EXPORTER_PORT = 9400
EXPORTER_PATH = "/metrics"

_PROXY = re.compile(r"^/namespaces/([^/]+)/pods/([^/]+)/proxy(/.*)?$")


@dataclass(frozen=True)
class ProxyRequest:
    """One pod proxy request: the pod, the port asked for (None: the default) and the path."""

    namespace: str
    name: str
    port: str | None
    path: str | None  # None: ``…/proxy`` without a slash


@dataclass(frozen=True)
class ProxyAnswer:
    code: int
    content_type: str
    body: str
    location: str | None = None


def parse_proxy_path(path: str) -> ProxyRequest | None:
    """The pod proxy request of an ``/api/v1`` path (``/namespaces/NS/pods/NAME:PORT/proxy/…``),
    None for any other path. ``[scheme:]name[:port]`` as the API server reads it; 400 ``invalid
    pod request`` otherwise."""
    m = _PROXY.match(path)
    if m is None:
        return None
    namespace, spec, rest = unquote(m.group(1)), unquote(m.group(2)), m.group(3)
    parts = spec.split(":")
    scheme = ""
    if len(parts) == 3:
        scheme, name, port = parts[0], parts[1], parts[2] or None
    elif len(parts) == 2:
        name, port = parts[0], parts[1] or None
    elif len(parts) == 1:
        name, port = parts[0], None
    else:
        raise ApiError(400, f'invalid pod request "{spec}"')
    if scheme not in ("", "http", "https") or not name:
        raise ApiError(400, f'invalid pod request "{spec}"')
    return ProxyRequest(namespace, name, port, rest)


def _unreachable(why: str) -> ApiError:
    return ApiError(503, f"error trying to reach service: {why}", "ServiceUnavailable")


def _default_port(pod: dict[str, Any]) -> str:
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("containerPort"):
                return str(p["containerPort"])
    return "80"


def is_exporter(pod: dict[str, Any]) -> bool:
    """True for a pod that is the simulated DCGM exporter on its node (see the module)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return (
        str(annotations.get(EXPORTER_ANNOTATION, "")).strip().lower() == "true"
        and bool((pod.get("spec") or {}).get("nodeName"))
        and (pod.get("status") or {}).get("phase") == "Running"
    )


def pod_proxy(store: Store, dcgm: DcgmExporter, req: ProxyRequest) -> ProxyAnswer:
    """The answer to ``GET`` of a pod proxy; ApiError for the API server's own refusals."""
    pod = store.find("pods", req.namespace, req.name)
    if pod is None:
        # as the real API server: the pod, even when it is the namespace that does not exist
        raise not_found(RESOURCES["pods"], req.name)
    if req.path is None:
        base = f"/api/v1/namespaces/{req.namespace}/pods/{req.name}"
        port = f":{req.port}" if req.port else ""
        return ProxyAnswer(301, "", "", f"{base}{port}/proxy/")
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise ApiError(400, "address not allowed")
    port = req.port or _default_port(pod)
    if not port.isdigit():
        # the real API server drops the connection without an answer for a named port
        raise _unreachable(f"dial tcp: lookup tcp/{port}: unknown port")
    if int(port) > 65535:
        raise _unreachable(f"dial tcp: address {port}: invalid port")
    if not is_exporter(pod) or int(port) != EXPORTER_PORT:
        raise _unreachable(f"dial tcp {ip}:{port}: connect: connection refused")
    node = pod["spec"]["nodeName"]
    if store.find("nodes", None, node) is None:  # its node is gone: so is what listened
        raise _unreachable(f"dial tcp {ip}:{port}: connect: connection refused")
    if node in dcgm.down:  # its exporter does not answer (docs/sim.md)
        raise _unreachable(f"dial tcp {ip}:{port}: connect: connection refused")
    if req.path != EXPORTER_PATH:
        return ProxyAnswer(404, "text/plain; charset=utf-8", "404 page not found\n")
    return ProxyAnswer(200, CONTENT_TYPE, dcgm.render(node))
