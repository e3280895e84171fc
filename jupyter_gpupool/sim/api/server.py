"""The simulated cluster's HTTP front: Kubernetes' REST paths for core/v1, plus ``/sim/v1``.

The handlers only translate HTTP to :class:`~jupyter_gpupool.sim.objects.store.Store` calls and back;
all rules live in the store, the scheduler and the kubelet. Every request first passes the door
(:mod:`.door`); the ``/sim/v1`` endpoints are in :mod:`.control`, ``GET`` of a pod's proxy
subresource (``pods/NAME:PORT/proxy/PATH``) in :mod:`.podproxy`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import tornado.web
from tornado.iostream import StreamClosedError

from ..objects.errors import ApiError
from ..objects.resources import (
    RESOURCES,
    SERVER_VERSION,
    api_group_list,
    api_resource_list,
    api_versions,
    openapi_v3_core,
    openapi_v3_root,
)
from ..objects.watches import Watcher
from .control import ControlHandler
from .door import BaseHandler, NotFoundHandler
from .podproxy import ProxyRequest, parse_proxy_path, pod_proxy
from .served import ServedCluster
from .tables import to_table

log = logging.getLogger(__name__)

DEFAULT_WATCH_TIMEOUT = 1800  # seconds; the real API server closes watches after 30-60 min


@dataclass
class Route:
    plural: str
    namespace: str | None
    name: str | None = None
    subresource: str | None = None
    watch_path: bool = False


def parse_path(path: str) -> Route | None:
    """``/namespaces/ns/pods/p/status`` -> Route(pods, ns, p, status); None for ``/``."""
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    if not parts:
        return None
    watch = False
    if parts[0] == "watch":
        watch = True
        parts = parts[1:]
    if not parts:
        raise ApiError(404, "the server could not find the requested resource")
    namespace = None
    if parts[0] == "namespaces" and len(parts) >= 3 and parts[2] not in ("status", "finalize"):
        namespace = parts[1]
        parts = parts[2:]
    plural = parts[0]
    res = RESOURCES.get(plural)
    if res is None:
        raise ApiError(404, f"the server could not find the requested resource ({plural})")
    if namespace is not None and not res.namespaced:
        raise ApiError(404, "the server could not find the requested resource")
    if len(parts) > 3:
        raise ApiError(404, "the server could not find the requested resource")
    return Route(
        plural=plural,
        namespace=namespace,
        name=parts[1] if len(parts) > 1 else None,
        subresource=parts[2] if len(parts) > 2 else None,
        watch_path=watch,
    )


class DiscoveryHandler(BaseHandler):
    def get(self, what: str) -> None:
        docs = {
            "version": SERVER_VERSION,
            "api": api_versions(),
            "api/v1": api_resource_list(),
            "apis": api_group_list(),
            "openapi/v3": openapi_v3_root(),
            "openapi/v3/api/v1": openapi_v3_core(),
        }
        what = what.strip("/")
        if what in ("healthz", "readyz", "livez"):
            self.set_header("Content-Type", "text/plain")
            self.finish("ok")
            return
        if what not in docs:
            self.send_error_status(
                ApiError(404, "the server could not find the requested resource")
            )
            return
        self.send_json(docs[what])


class ApiHandler(BaseHandler):
    SUPPORTED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
    _watcher: Watcher | None = None

    def prepare(self) -> None:
        super().prepare()
        if self._finished:
            return
        if self.cluster.faults.should_fail(self.request.method or "GET", self.request.path):
            self.send_error_status(ApiError(500, "injected fault (gpupool sim)", "InternalError"))

    async def get(self, path: str) -> None:
        try:
            proxied = parse_proxy_path(path or "")
            if proxied is not None:
                self._send_proxied(proxied)
                return
            route = parse_path(path or "")
            if route is None:
                self.send_json(api_resource_list())
                return
            store = self.cluster.store
            if route.name is None:
                if route.watch_path or self.get_argument("watch", "").lower() in ("true", "1"):
                    await self._watch(route)
                    return
                self._send_list(route)
                return
            if route.watch_path:
                raise ApiError(
                    400, "watching a single object: use fieldSelector=metadata.name=NAME"
                )
            obj = store.get(route.plural, route.namespace, route.name)
            if route.subresource == "log" and route.plural == "pods":
                self.set_header("Content-Type", "text/plain")
                self.finish(self.cluster.kubelet.read_log(obj))
                return
            if route.subresource not in (None, "status"):
                raise ApiError(404, "the server could not find the requested resource")
            if self._wants_table():
                self.send_json(
                    to_table(
                        obj["kind"], [obj], obj["metadata"]["resourceVersion"], self._include()
                    )
                )
            else:
                self.send_json(obj)
        except ApiError as e:
            self.send_error_status(e)

    def _send_proxied(self, req: ProxyRequest) -> None:
        """A pod proxy's answer (:mod:`.podproxy`): the pod's own, passed on as it is."""
        answer = pod_proxy(self.cluster.store, self.cluster.dcgm, req)
        self.set_status(answer.code)
        if answer.content_type:
            self.set_header("Content-Type", answer.content_type)
        else:
            self.clear_header("Content-Type")
        if answer.location:
            self.set_header("Location", answer.location)
        self.finish(answer.body)

    def _wants_table(self) -> bool:
        return "as=Table" in self.request.headers.get("Accept", "")

    def _include(self) -> str:
        return self.get_argument("includeObject", "Metadata")

    def _send_list(self, route: Route) -> None:
        res = RESOURCES[route.plural]
        limit = int(self.get_argument("limit", "0") or 0)
        after: tuple[str, str] | None = None
        if cont := self.get_argument("continue", ""):
            try:
                ns, name = json.loads(base64.urlsafe_b64decode(cont.encode()))
                after = (str(ns), str(name))
            except (ValueError, TypeError):
                raise ApiError(400, "invalid continue token") from None
        items, rv, last, remaining = self.cluster.store.list_page(
            route.plural,
            route.namespace,
            self.get_argument("labelSelector", ""),
            self.get_argument("fieldSelector", ""),
            after=after,
            limit=max(0, limit),
        )
        meta: dict[str, Any] = {"resourceVersion": rv}
        if last is not None:
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(list(last)).encode()).decode()
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        if self._wants_table():
            table = to_table(res.kind, items, rv, self._include())
            table["metadata"].update(meta)
            self.send_json(table)
            return
        self.send_json(
            {"kind": f"{res.kind}List", "apiVersion": "v1", "metadata": meta, "items": items}
        )

    async def _watch(self, route: Route) -> None:
        store = self.cluster.store
        timeout = float(self.get_argument("timeoutSeconds", "0") or 0) or DEFAULT_WATCH_TIMEOUT
        self.set_status(200)
        self.set_header("Content-Type", "application/json")
        try:
            w = store.watch(
                route.plural,
                route.namespace,
                self.get_argument("resourceVersion", None),
                self.get_argument("labelSelector", ""),
                self.get_argument("fieldSelector", ""),
            )
        except ApiError as e:
            if e.code != 410:
                raise
            # The real API server answers an expired watch with 200 and one ERROR event.
            self.finish(json.dumps({"type": "ERROR", "object": e.status()}) + "\n")
            return
        self._watcher = w
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await self.flush()
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(w.queue.get(), remaining)
                except asyncio.TimeoutError:
                    break
                if item is None:
                    break
                chunk = [item]
                while not w.queue.empty() and len(chunk) < 500:
                    nxt = w.queue.get_nowait()
                    if nxt is None:
                        w.queue.put_nowait(None)
                        break
                    chunk.append(nxt)
                self.write("".join(json.dumps({"type": t, "object": o}) + "\n" for t, o in chunk))
                await self.flush()
        except StreamClosedError:
            pass
        finally:
            store.stop_watch(w)
            self._watcher = None
        if not self._finished:
            self.finish()

    def on_connection_close(self) -> None:
        if self._watcher is not None:
            self.cluster.store.stop_watch(self._watcher)

    def _dry_run_refused(self) -> None:
        if self.get_argument("dryRun", ""):
            raise ApiError(400, "dryRun is not supported by the gpupool simulated cluster")

    async def post(self, path: str) -> None:
        try:
            self._dry_run_refused()
            route = parse_path(path or "")
            if route is None:
                raise ApiError(405, "method not allowed")
            body = self.body_json()
            if route.name and route.subresource == "binding" and route.plural == "pods":
                target = ((body or {}).get("target") or {}).get("name", "")
                self.cluster.store.bind(route.namespace or "default", route.name, target)
                self.send_json(
                    {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, 201
                )
                return
            if route.name is not None:
                raise ApiError(405, "POST is for collections")
            obj = self.cluster.store.create(route.plural, route.namespace, body)
            self.send_json(obj, 201)
        except ApiError as e:
            self.send_error_status(e)

    async def put(self, path: str) -> None:
        try:
            self._dry_run_refused()
            route = parse_path(path or "")
            if route is None or route.name is None:
                raise ApiError(405, "PUT needs an object name")
            obj = self.cluster.store.replace(
                route.plural, route.namespace, route.name, self.body_json(), route.subresource
            )
            self.send_json(obj)
        except ApiError as e:
            self.send_error_status(e)

    async def patch(self, path: str) -> None:
        try:
            self._dry_run_refused()
            route = parse_path(path or "")
            if route is None or route.name is None:
                raise ApiError(405, "PATCH needs an object name")
            ctype = self.request.headers.get("Content-Type", "").split(";")[0].strip()
            obj = self.cluster.store.patch(
                route.plural,
                route.namespace,
                route.name,
                self.body_json(),
                ctype,
                route.subresource,
            )
            self.send_json(obj)
        except ApiError as e:
            self.send_error_status(e)

    async def delete(self, path: str) -> None:
        try:
            self._dry_run_refused()
            route = parse_path(path or "")
            if route is None:
                raise ApiError(405, "method not allowed")
            opts = self.body_json() or {}
            if not isinstance(opts, dict):
                raise ApiError(400, "DeleteOptions must be an object")
            grace = self.get_argument("gracePeriodSeconds", None)
            grace_s = opts.get("gracePeriodSeconds", int(grace) if grace is not None else None)
            propagation = opts.get("propagationPolicy") or self.get_argument(
                "propagationPolicy", None
            )
            store = self.cluster.store
            if route.name is None:
                gone = store.delete_collection(
                    route.plural,
                    route.namespace,
                    self.get_argument("labelSelector", ""),
                    self.get_argument("fieldSelector", ""),
                )
                res = RESOURCES[route.plural]
                self.send_json(
                    {
                        "kind": f"{res.kind}List",
                        "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(store.rv)},
                        "items": gone,
                    }
                )
                return
            obj = store.delete(
                route.plural,
                route.namespace,
                route.name,
                grace_period=grace_s,
                propagation=propagation,
                preconditions=opts.get("preconditions"),
            )
            self.send_json(obj)
        except ApiError as e:
            self.send_error_status(e)


def make_app(cluster: ServedCluster) -> tornado.web.Application:
    args = {"cluster": cluster}
    return tornado.web.Application(
        [
            (r"/api/v1(/.*)?", ApiHandler, args),
            (r"/sim/v1/(.*)", ControlHandler, args),
            (
                r"/(version|api|apis|healthz|readyz|livez|openapi/v3|openapi/v3/api/v1)/?",
                DiscoveryHandler,
                args,
            ),
        ],
        default_handler_class=NotFoundHandler,
        default_handler_args=args,
        log_function=_log_request,
    )


def _log_request(handler: tornado.web.RequestHandler) -> None:
    status = handler.get_status()
    level = logging.WARNING if status >= 500 else logging.DEBUG
    log.log(
        level,
        "%d %s %.1fms",
        status,
        handler._request_summary(),
        1000 * handler.request.request_time(),
    )
