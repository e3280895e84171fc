"""The Kubernetes calls the service makes besides watching: node labels, its ConfigMap, pods.

Responses are read as plain JSON dicts (``_preload_content=False``), which is all the service
needs and much cheaper than kubernetes_asyncio's model objects. Calls that are safe to repeat are
retried with backoff (:mod:`.retry`) on 5xx, 429 and connection errors, so a flaky API server
costs time, not a failed admin request. The client configuration is loaded when the service
starts, never at import (docs/architecture.md: kubernetes_asyncio reads ``KUBECONFIG`` at import time).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from .retry import Backoff

log = logging.getLogger(__name__)

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeError(Exception):
    """A Kubernetes API call failed: ``status`` (0 when there was no answer) and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"Kubernetes API: {message}" + (f" ({status})" if status else ""))
        self.status = status
        self.message = message


def kubeconfig_path(kubeconfig: str) -> str:
    """The kubeconfig file to use: the given one, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    return kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def in_cluster(kubeconfig: str) -> bool:
    """In-cluster config is used when no kubeconfig is given and we run in a pod."""
    return not kubeconfig and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


async def make_api_client(kubeconfig: str = "") -> client.ApiClient:
    """An API client from ``kubeconfig``, or the pod's service account inside a cluster."""
    cfg = client.Configuration()
    if in_cluster(kubeconfig):
        config.load_incluster_config(client_configuration=cfg)
    else:
        await config.load_kube_config(
            config_file=kubeconfig_path(kubeconfig), client_configuration=cfg
        )
    return client.ApiClient(configuration=cfg)


def default_namespace(kubeconfig: str = "") -> str:
    """The pod's namespace in a cluster, else the kubeconfig context's, else ``default``."""
    if in_cluster(kubeconfig) and IN_CLUSTER_NAMESPACE.exists():
        return IN_CLUSTER_NAMESPACE.read_text().strip() or "default"
    try:
        _, active = config.list_kube_config_contexts(kubeconfig_path(kubeconfig))
    except Exception:  # no usable kubeconfig: the caller fails later with a clearer message
        return "default"
    return ((active or {}).get("context") or {}).get("namespace") or "default"


def _retryable(status: int) -> bool:
    return status == 0 or status == 429 or status >= 500


async def _answer(resp: Any) -> Any:
    body = await resp.read()
    status = int(resp.status)
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    resp.release()
    if 200 <= status < 300:
        return data
    message = (data or {}).get("message") if isinstance(data, dict) else None
    raise KubeError(status, message or body.decode("utf-8", "replace")[:200] or f"HTTP {status}")


def _status_message(text: str) -> str | None:
    """The ``message`` of a ``Status`` object answered as an error, else None (a proxied page's
    own text, for instance)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("kind") == "Status":
        message = data.get("message")
        return str(message) if message else None
    return None


class Kube:
    """The service's Kubernetes calls, on one API client."""

    def __init__(
        self,
        api: client.ApiClient,
        attempts: int = 6,
        backoff: float = 0.1,
        backoff_cap: float = 4.0,
        *,
        rng: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.api = api
        self.v1 = client.CoreV1Api(api)
        self.attempts = attempts
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self._rng = rng
        self._sleep = sleep

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """One API call as JSON, retried while the failure is the server's, not ours.

        The waits are the watches' policy (:mod:`.retry`); with the defaults, six tries wait at
        most 0.1 + 0.2 + 0.4 + 0.8 + 1.6 = 3.1 seconds in all.
        """
        backoff = Backoff(self.backoff, self.backoff_cap, rng=self._rng, sleep=self._sleep)
        for attempt in range(1, self.attempts + 1):
            try:
                resp = await fn(*args, _preload_content=False, **kwargs)
                return await _answer(resp)
            except KubeError as e:
                if not _retryable(e.status) or attempt == self.attempts:
                    raise
                err: Exception = e
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                if attempt == self.attempts:
                    raise KubeError(0, f"cannot reach the API server: {e}") from e
                err = e
            delay = backoff.next_delay()
            log.debug("Kubernetes call %s failed (%s); retrying in %.2fs", fn.__name__, err, delay)
            await backoff.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- nodes -----------------------------------------------------------------------------------

    async def get_node(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.call(self.v1.read_node, name)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    async def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        data = await self.call(self.v1.list_node, label_selector=label_selector)
        return list(data.get("items") or [])

    async def patch_node_labels(
        self,
        name: str,
        labels: Mapping[str, str | None],
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Set labels (None removes one); with ``resource_version``, only if the node is unchanged."""
        meta: dict[str, Any] = {"labels": dict(labels)}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        return await self.call(self.v1.patch_node, name, {"metadata": meta})

    # --- other paths -----------------------------------------------------------------------------

    async def get_text(self, path: str, timeout: float = 10.0) -> str:
        """The text at ``path`` of the API server, with its credentials (a service proxy such
        as ``/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:9400/proxy/metrics``,
        or the simulator's ``/sim/v1/dcgm/metrics``). Not retried: the next poll is the retry."""
        try:
            resp = await self.api.call_api(
                path,
                "GET",
                header_params={"Accept": "text/plain"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
            body = await resp.read()
            status = int(resp.status)
            resp.release()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            raise KubeError(0, f"cannot reach the API server: {e}") from e
        text = body.decode("utf-8", "replace")
        if not 200 <= status < 300:
            raise KubeError(status, _status_message(text) or text[:200] or f"HTTP {status}")
        return text

    # --- pods ------------------------------------------------------------------------------------

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.call(self.v1.read_namespaced_pod, name, namespace)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    async def list_pods(
        self, namespace: str = "", label_selector: str = ""
    ) -> list[dict[str, Any]]:
        """The pods matching ``label_selector`` in ``namespace`` ("": every namespace), from the
        API server's watch cache (``resourceVersion=0``: cheap to repeat every poll, at most a
        moment behind)."""
        if namespace:
            data = await self.call(
                self.v1.list_namespaced_pod,
                namespace,
                label_selector=label_selector,
                resource_version="0",
            )
        else:
            data = await self.call(
                self.v1.list_pod_for_all_namespaces,
                label_selector=label_selector,
                resource_version="0",
            )
        return list(data.get("items") or [])

    async def delete_pod(self, namespace: str, name: str) -> bool:
        try:
            await self.call(self.v1.delete_namespaced_pod, name, namespace)
        except KubeError as e:
            if e.status == 404:
                return False
            raise
        return True

    # --- config maps -----------------------------------------------------------------------------

    async def read_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.call(self.v1.read_namespaced_config_map, name, namespace)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    async def create_configmap(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.v1.create_namespaced_config_map, namespace, body)

    async def replace_configmap(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        return await self.call(self.v1.replace_namespaced_config_map, name, namespace, body)

    async def close(self) -> None:
        await self.api.close()
