"""The API server's pod proxy, ``GET /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH``: the
simulated DCGM exporter's pods answer ``/metrics`` with their node's GPUs, every other pod as
kube-apiserver answers when nothing listens there.

The refusals are checked on both clusters (tests/clusters.py), the same requests through the
Kubernetes client: a pod that does not exist, one without an IP, a malformed pod name. One answer
differs on purpose: the simulator's kubelet (``sim.remote`` too) gives pods loopback addresses,
which the real API server refuses to proxy to (``400 address not allowed``), where the simulator
dials them (an exporter pod answers; any other is ``503 … connection refused``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import tornado.httpclient
from clusters import Cluster, open_cluster
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families
from service_kit import exporter_pod
from waiting import async_wait_for

OPERATOR_NS = "gpu-operator"
PROM_TEXT = "text/plain; version=0.0.4"

pytestmark = pytest.mark.timeout(120)


async def create_running(cluster: Cluster, namespace: str, body: dict[str, Any]) -> dict:
    """Create a pod through the API and wait until it runs (bound and started by the kubelet)."""
    with contextlib.suppress(client.ApiException):  # already there
        await cluster.call(cluster.v1.create_namespace, {"metadata": {"name": namespace}})
    name = body["metadata"]["name"]
    await cluster.create_pod(namespace, body)

    async def running() -> dict | None:
        pod = await cluster.pod(namespace, name)
        return pod if (pod or {}).get("status", {}).get("phase") == "Running" else None

    return await async_wait_for(running, what=f"pod {namespace}/{name} to run", timeout=30)


async def proxy_get(cluster: Cluster, path: str) -> tuple[int, str, str]:
    """``GET path`` with the cluster's credentials: (status, content type, body)."""
    resp = await cluster.api.call_api(
        path,
        "GET",
        header_params={"Accept": "*/*"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=20,
    )
    try:
        body = (await resp.read()).decode()
    finally:
        resp.release()
    return int(resp.status), resp.headers.get("Content-Type", ""), body


def status_of(body: str) -> tuple[int, str, str]:
    """(code, reason, message) of a ``Status`` answer."""
    st = json.loads(body)
    assert st["kind"] == "Status", st
    return st["code"], st["reason"], st["message"]


def proxy(namespace: str, pod: str, path: str = "metrics") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{pod}/proxy/{path}"


async def test_the_pod_proxy_refuses_as_the_real_api_server_does(cluster: Cluster) -> None:
    """Unknown pod or namespace, a pod without an IP, a malformed name: the same status, reason
    and message on both clusters. A running pod's answer is the one known difference."""
    plain = await create_running(cluster, "default", exporter_pod("gpu-node-2", exporter=False))
    await create_running(cluster, OPERATOR_NS, exporter_pod("gpu-node-1"))
    pending = exporter_pod("nowhere")
    pending["metadata"]["name"] = "pending-exporter"
    del pending["spec"]["nodeName"]
    pending["spec"]["nodeSelector"] = {"example.org/no-such-node": "true"}
    await cluster.create_pod(OPERATOR_NS, pending)

    answers = {}
    for what, path in {
        "unknown pod": proxy(OPERATOR_NS, "nope:9400"),
        "unknown namespace": proxy("no-such-namespace", "nope:9400"),
        "pod without an IP": proxy(OPERATOR_NS, "pending-exporter:9400"),
        "malformed name": proxy(OPERATOR_NS, "a:b:c:d"),
        "unknown scheme": proxy(OPERATOR_NS, "ftp:nvidia-dcgm-exporter-gpu-node-1:9400"),
    }.items():
        code, _, body = await proxy_get(cluster, path)
        answers[what] = (code, *status_of(body)[1:])
    assert answers == {
        "unknown pod": (404, "NotFound", 'pods "nope" not found'),
        "unknown namespace": (404, "NotFound", 'pods "nope" not found'),
        "pod without an IP": (400, "BadRequest", "address not allowed"),
        "malformed name": (400, "BadRequest", 'invalid pod request "a:b:c:d"'),
        "unknown scheme": (
            400,
            "BadRequest",
            'invalid pod request "ftp:nvidia-dcgm-exporter-gpu-node-1:9400"',
        ),
    }

    exporter = await proxy_get(cluster, proxy(OPERATOR_NS, "nvidia-dcgm-exporter-gpu-node-1:9400"))
    other = await proxy_get(cluster, proxy("default", "nvidia-dcgm-exporter-gpu-node-2:9400"))
    if cluster.real:
        # the simulator's kubelet gives pods loopback IPs: the real API server will not dial them
        assert status_of(exporter[2]) == (400, "BadRequest", "address not allowed")
        assert status_of(other[2]) == (400, "BadRequest", "address not allowed")
    else:
        assert exporter[0] == 200 and exporter[1].startswith(PROM_TEXT), exporter
        ip = plain["status"]["podIP"]
        assert status_of(other[2]) == (
            503,
            "ServiceUnavailable",
            f"error trying to reach service: dial tcp {ip}:9400: connect: connection refused",
        )


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


async def test_an_exporter_pod_serves_its_nodes_gpus_at_metrics() -> None:
    """On the simulated cluster: the exporter pod of gpu-node-1 serves that node's page (the
    same as ``/sim/v1/dcgm/metrics?node=gpu-node-1``), with the utilization set for a pod
    there; other paths, ports and pods answer as nothing listening would."""
    async with open_cluster("simulated") as cluster:
        sim = cluster.sim
        assert sim is not None
        await create_running(cluster, OPERATOR_NS, exporter_pod("gpu-node-1"))
        train = {
            "metadata": {"name": "train"},
            "spec": {
                "nodeName": "gpu-node-1",
                "containers": [
                    {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}
                ],
            },
        }
        await create_running(cluster, "default", train)
        put = await tornado.httpclient.AsyncHTTPClient().fetch(
            sim.url + "/sim/v1/namespaces/default/pods/train/gpu-utilization",
            method="PUT",
            body=json.dumps({"percent": 80}),
            headers={**sim.auth_headers, "Content-Type": "application/json"},
            ssl_options=sim.ssl_context,
        )
        assert put.code == 200

        name = "nvidia-dcgm-exporter-gpu-node-1"
        code, ctype, page = await proxy_get(cluster, proxy(OPERATOR_NS, f"{name}:9400"))
        assert code == 200 and ctype.startswith(PROM_TEXT), (code, ctype, page)
        util = [(labels, v) for n, labels, v in samples(page) if n == "DCGM_FI_DEV_GPU_UTIL"]
        assert {labels["Hostname"] for labels, _ in util} == {"gpu-node-1"}
        assert len(util) == 8  # the node's GPUs, and no other node's
        held = sorted(v for labels, v in util if labels.get("pod") == "train")
        assert held == [80.0, 80.0]
        assert page == sim.dcgm_metrics("gpu-node-1")
        # without a port: the pod's first declared containerPort (9400), as the API server does
        assert (await proxy_get(cluster, proxy(OPERATOR_NS, name)))[2] == page

        code, ctype, body = await proxy_get(cluster, proxy(OPERATOR_NS, f"{name}:9400", "health"))
        assert (code, ctype, body) == (404, "text/plain; charset=utf-8", "404 page not found\n")
        ip = (await cluster.pod(OPERATOR_NS, name) or {})["status"]["podIP"]
        code, _, body = await proxy_get(cluster, proxy(OPERATOR_NS, f"{name}:9401"))
        assert status_of(body) == (
            503,
            "ServiceUnavailable",
            f"error trying to reach service: dial tcp {ip}:9401: connect: connection refused",
        )
        # ".../proxy" without its slash: redirected, as by the real API server
        moved = await tornado.httpclient.AsyncHTTPClient().fetch(
            sim.url + f"/api/v1/namespaces/{OPERATOR_NS}/pods/{name}:9400/proxy",
            headers=sim.auth_headers,
            ssl_options=sim.ssl_context,
            follow_redirects=False,
            raise_error=False,
        )
        assert (moved.code, moved.headers["Location"]) == (
            301,
            f"/api/v1/namespaces/{OPERATOR_NS}/pods/{name}:9400/proxy/",
        )
        # the door: no token, no page
        anonymous = await tornado.httpclient.AsyncHTTPClient().fetch(
            sim.url + proxy(OPERATOR_NS, f"{name}:9400"),
            ssl_options=sim.ssl_context,
            raise_error=False,
        )
        assert anonymous.code == 401

        # the exporter pod deleted: the API server no longer knows it
        await cluster.delete_pod(OPERATOR_NS, name, grace=0)
        await cluster.wait_gone(OPERATOR_NS, name)
        code, _, body = await proxy_get(cluster, proxy(OPERATOR_NS, f"{name}:9400"))
        assert status_of(body) == (404, "NotFound", f'pods "{name}" not found')
