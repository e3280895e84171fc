"""The handler every simulated API request goes through first: the door, and body decoding.

Every request first passes the door (:meth:`BaseHandler.prepare`): in process mode, creating a pod
runs its command on this machine, so the server must not take requests from just anyone. It wants
the bearer token of the kubeconfig the cluster wrote, refuses anything a web browser sent (an
``Origin`` header), and takes request bodies only in the media types the real API server decodes:
a page's ``text/plain`` POST, which browsers send cross-origin without asking first, never reaches
a handler.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

import tornado.web

from ...core.documents import yaml_reader
from ..objects.errors import ApiError
from ..objects.patch import SUPPORTED_PATCH_TYPES
from .served import ServedCluster

# Request bodies of create, replace and delete: the media types the real API server decodes, less
# protobuf, which the simulator cannot read. As there, a missing Content-Type means JSON.
BODY_MEDIA_TYPES = ("application/json", "application/yaml")
# Health probes answer without a token, as the real API server's do for anonymous users (the
# system:public-info-viewer role): they say "ok" and nothing else.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/livez"})


class BaseHandler(tornado.web.RequestHandler):
    cluster: ServedCluster

    def initialize(self, cluster: ServedCluster) -> None:
        self.cluster = cluster

    def check_xsrf_cookie(self) -> None:  # an API server, not a web page: see prepare()
        pass

    def prepare(self) -> None:
        refused = self.refusal()
        if refused is not None:
            self.send_error_status(refused)

    def refusal(self) -> ApiError | None:
        """Why the door stays shut for this request, or None to let it in."""
        if "Origin" in self.request.headers:
            # kubectl and the client libraries never send Origin; browsers always do on the
            # cross-origin POSTs a web page can make without a preflight.
            return ApiError(
                403,
                "requests with an Origin header are refused: the gpupool simulated cluster "
                "does not serve web pages; use kubectl or a Kubernetes client with its kubeconfig",
            )
        if self.request.path.rstrip("/") not in OPEN_PATHS:
            scheme, _, token = self.request.headers.get("Authorization", "").partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                return ApiError(401, "Unauthorized", "Unauthorized")
            if not hmac.compare_digest(token.encode(), self.cluster.token.encode()):
                # The real API server says 401 here too; 403 tells a user with a stale
                # kubeconfig that a token arrived but is not this cluster's.
                return ApiError(
                    403,
                    "forbidden: the bearer token is not this simulated cluster's; use the "
                    "kubeconfig it wrote when it started",
                )
        return self._media_type_refusal()

    def _media_type(self) -> str:
        return self.request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()

    def _media_type_refusal(self) -> ApiError | None:
        method = self.request.method
        if method == "PATCH":
            accepted: tuple[str, ...] = SUPPORTED_PATCH_TYPES
            media = self._media_type()  # no default: a patch must say which kind it is
        elif method in ("POST", "PUT") or (method == "DELETE" and self.request.body):
            accepted = BODY_MEDIA_TYPES
            media = self._media_type() or "application/json"
        else:
            return None
        if media in accepted:
            return None
        return ApiError(
            415,
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )

    def send_json(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(obj))

    def send_error_status(self, e: ApiError) -> None:
        self.send_json(e.status(), e.code)

    def body_json(self) -> Any:
        """The request body, decoded as its (already checked) media type says."""
        if not self.request.body:
            return None
        try:
            return json.loads(self.request.body)
        except ValueError as e:
            if self._media_type() != "application/yaml":
                raise ApiError(400, f"the request body is not valid JSON: {e}") from None
        try:
            # Refuses anchors and aliases: nested aliases ("billion laughs") would expand for
            # minutes inside the event loop that serves every client.
            return yaml_reader.safe_load(self.request.body, "request body")
        except yaml_reader.DocumentError as e:
            raise ApiError(400, f"the request body is not valid YAML: {e}") from None

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        err = ApiError(status_code, self._reason or "error")
        self.finish(json.dumps(err.status()))


class NotFoundHandler(BaseHandler):
    """Any other path: a 404 Status, but only past the door, as the real API server answers."""

    def get(self, *args: Any) -> None:
        self.send_error_status(ApiError(404, "the server could not find the requested resource"))

    post = put = patch = delete = get
