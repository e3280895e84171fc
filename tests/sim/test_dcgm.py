"""The simulated DCGM exporter (issue 17): ``GET /sim/v1/dcgm/metrics`` and the utilization knob
``/sim/v1/namespaces/NS/pods/NAME/gpu-utilization``.

Every check reads the page over HTTPS with the cluster's token, as a scraper would, and parses it
with prometheus_client's parser. The expected GPUs come from the cluster file's numbers, and which
GPUs a pod holds from what the pod itself sees: its ``NVIDIA_VISIBLE_DEVICES``, printed to its log.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import tornado.httpclient
from prom import Target, by, token_and_ca_file
from prom import running as prometheus
from prometheus_client.parser import text_string_to_metric_families
from waiting import async_wait_for

from jupyter_gpupool.sim import ClusterSpec, SimCluster, parse_cluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

METRICS = "/sim/v1/dcgm/metrics"
ANNOTATION = "sim.gpupool.jupyter.org/gpu-utilization"
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
}
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
POD_LABELS = ("container", "namespace", "pod")

# Two GPU nodes, one of them with no product label, and a CPU node.
SMALL = """
nodes:
  - name: n1
    gpu: {count: 4, type: A100-80G, product: NVIDIA-A100-SXM4-80GB, memory: 81920}
  - name: n2
    gpu: {count: 2, type: L4-24G}
  - name: cpu
"""


async def call(
    cluster: SimCluster,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = "cluster's",
) -> tuple[int, dict[str, str], Any]:
    """One HTTPS request as curl would make it: (code, headers, parsed JSON or text)."""
    headers = {"Content-Type": "application/json"}
    if token == "cluster's":
        headers.update(cluster.auth_headers)
    elif token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else body if isinstance(body, str) else json.dumps(body)
    resp = await tornado.httpclient.AsyncHTTPClient().fetch(
        cluster.url + path,
        method=method,
        body=data,
        headers=headers,
        raise_error=False,
        allow_nonstandard_methods=True,
        ssl_options=cluster.ssl_context,
    )
    text = resp.body.decode() if resp.body else ""
    try:
        return resp.code, dict(resp.headers), json.loads(text)
    except ValueError:
        return resp.code, dict(resp.headers), text


def series(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample of an exposition."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            yield s.name, dict(s.labels), s.value


async def scrape(cluster: SimCluster, node: str | None = None) -> list[tuple[str, dict, float]]:
    code, headers, text = await call(cluster, "GET", METRICS + (f"?node={node}" if node else ""))
    assert code == 200, text
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers
    return list(series(text))


def util_by_gpu(samples: list[tuple[str, dict, float]]) -> dict[tuple[str, str], dict]:
    """``{(Hostname, gpu): labels + {"value": utilization}}`` from DCGM_FI_DEV_GPU_UTIL."""
    return {
        (labels["Hostname"], labels["gpu"]): {**labels, "value": value}
        for name, labels, value in samples
        if name == "DCGM_FI_DEV_GPU_UTIL"
    }


def gpu_pod(
    name: str,
    gpus: int,
    node: str,
    annotation: str | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """A pod with one container ``main`` asking for ``gpus`` GPUs, pinned to ``node``."""
    container: dict[str, Any] = {"name": "main", "image": "python"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if command:
        container["command"] = command
    md: dict[str, Any] = {"name": name}
    if annotation is not None:
        md["annotations"] = {ANNOTATION: annotation}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [container]},
    }


# Prints the GPUs the container was given, then waits to be stopped.
SHOW_GPUS = [
    sys.executable,
    "-c",
    "import os, time; print('GPUS=' + os.environ.get('NVIDIA_VISIBLE_DEVICES', ''), flush=True);"
    " time.sleep(120)",
]


async def create(cluster: SimCluster, pod: dict[str, Any]) -> None:
    code, _, body = await call(cluster, "POST", "/api/v1/namespaces/default/pods", pod)
    assert code == 201, body


async def running(cluster: SimCluster, *names: str) -> None:
    async def all_running() -> bool:
        for name in names:
            code, _, pod = await call(cluster, "GET", f"/api/v1/namespaces/default/pods/{name}")
            if code != 200 or pod["status"].get("phase") != "Running":
                return False
        return True

    await async_wait_for(all_running, what=f"pods {names} to run", timeout=15)


async def visible_devices(cluster: SimCluster, name: str) -> set[str]:
    """The UUIDs in the pod's NVIDIA_VISIBLE_DEVICES, as its process printed them."""
    return set(await visible_in_order(cluster, name))


async def visible_in_order(cluster: SimCluster, name: str) -> list[str]:
    """The UUIDs of the pod's NVIDIA_VISIBLE_DEVICES in their order, as its process printed them."""

    async def printed() -> str | None:
        code, _, log = await call(cluster, "GET", f"/api/v1/namespaces/default/pods/{name}/log")
        return log if code == 200 and "GPUS=" in log else None

    log = await async_wait_for(printed, what=f"pod {name} to print its GPUs", timeout=15)
    value = log.split("GPUS=", 1)[1].splitlines()[0]
    return value.split(",") if value else []


def gpu_nodes(spec: ClusterSpec) -> dict[str, int]:
    """The cluster file's nodes of whole GPUs and their GPU counts (a MIG node's and a shared
    GPU's series are tests/sim/test_partitioned_nodes.py's)."""
    return {
        n.name: n.gpu.count
        for n in spec.nodes
        if n.gpu.count and n.gpu.device_plugin and n.gpu.layout() is None
    }


@pytest.fixture
async def processes() -> Any:
    """The small cluster, its kubelet running pods' commands as processes."""
    async with SimCluster(parse_cluster(SMALL), run_processes=True) as c:
        yield c


# ---- the page --------------------------------------------------------------------------------


async def test_one_series_per_gpu_of_every_gpu_node_in_the_exporters_format(sim_cluster):
    spec = example_cluster_spec()
    expected = {(node, str(i)) for node, count in gpu_nodes(spec).items() for i in range(count)}
    assert len(expected) == 8 + 8 + 4 + 4 + 4 + 4  # examples/cluster.yaml's whole GPUs
    whole = {node for node, _ in expected}
    products = {n.name: n.gpu.product for n in spec.nodes}
    memory = {n.name: n.gpu.memory_mib for n in spec.nodes}

    code, headers, text = await call(sim_cluster, "GET", METRICS)
    assert code == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # the MIG node's instances report DCGM_FI_PROF_GR_ENGINE_ACTIVE
    assert set(families) == {*FIELDS, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    for name, help_text in FIELDS.items():
        family = families[name]
        assert (family.type, family.documentation) == ("gauge", help_text)
        samples = [s for s in family.samples if s.labels["Hostname"] in whole]
        got = {(s.labels["Hostname"], s.labels["gpu"]) for s in samples}
        assert got == expected and len(samples) == len(expected), name
    uuids = set()
    for name, labels, value in series(text):
        node, gpu = labels["Hostname"], labels["gpu"]
        if node not in whole:
            continue
        assert labels["device"] == f"nvidia{gpu}"
        assert labels["modelName"] == products[node]
        assert UUID.match(labels["UUID"]), labels
        assert not set(POD_LABELS) & set(labels), labels  # no pod: no pod labels at all
        want = {"DCGM_FI_DEV_GPU_UTIL": 0, "DCGM_FI_DEV_FB_USED": 0}.get(name, memory[node])
        assert value == want, (name, labels)
        if name == "DCGM_FI_DEV_GPU_UTIL":
            uuids.add(labels["UUID"])
    assert len(uuids) == len(expected)  # every GPU its own UUID
    # The same GPUs keep their UUIDs in another simulator with the same nodes.
    async with SimCluster(spec) as again:
        again_util = util_by_gpu(await scrape(again)).values()
        assert {g["UUID"] for g in again_util if g["Hostname"] in whole} == uuids


async def test_node_filter_gives_that_nodes_gpus_and_404_for_no_such_node(sim_cluster):
    one = util_by_gpu(await scrape(sim_cluster, "gpu-node-3"))
    assert set(one) == {("gpu-node-3", str(i)) for i in range(4)}
    code, _, text = await call(sim_cluster, "GET", METRICS + "?node=cpu-node-1")
    assert code == 200 and list(series(text)) == []
    assert {f.name for f in text_string_to_metric_families(text)} == set(FIELDS)
    code, _, body = await call(sim_cluster, "GET", METRICS + "?node=nope")
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'nodes "nope" not found')


async def test_a_node_whose_exporter_is_unreachable_answers_503_and_leaves_the_page(sim_cluster):
    """Its own page is a 503 saying so; the cluster's page has every GPU but its own, as a
    Prometheus target that is down; back when reachable again; bad bodies and nodes refused."""
    knob = "/sim/v1/dcgm/nodes/gpu-node-3"
    before = {gpu[0] for gpu in util_by_gpu(await scrape(sim_cluster))}
    assert "gpu-node-3" in before
    code, _, body = await call(sim_cluster, "PUT", knob, {"reachable": False})
    assert (code, body) == (200, {"node": "gpu-node-3", "reachable": False})
    code, _, body = await call(sim_cluster, "GET", METRICS + "?node=gpu-node-3")
    assert (code, body["reason"]) == (503, "ServiceUnavailable")
    assert "the DCGM exporter of node gpu-node-3 is not answering" in body["message"]
    assert {gpu[0] for gpu in util_by_gpu(await scrape(sim_cluster))} == before - {"gpu-node-3"}
    assert await scrape(sim_cluster, "gpu-node-1")  # the others answer
    code, _, _ = await call(sim_cluster, "PUT", knob, {"reachable": True})
    assert code == 200
    assert {gpu[0] for gpu in util_by_gpu(await scrape(sim_cluster))} == before
    for bad in ({"reachable": "no"}, {}, {"reachable": False, "x": 1}):
        code, _, body = await call(sim_cluster, "PUT", knob, bad)
        assert code == 400 and "reachable" in body["message"], (bad, body)
    code, _, body = await call(sim_cluster, "PUT", "/sim/v1/dcgm/nodes/nope", {"reachable": False})
    assert (code, body["message"]) == (404, 'nodes "nope" not found')


async def test_the_page_and_the_knob_need_the_token(sim_cluster):
    await create(sim_cluster, gpu_pod("p", 1, "gpu-node-1"))
    code, _, body = await call(sim_cluster, "GET", METRICS, token=None)
    assert (code, body["reason"]) == (401, "Unauthorized")
    code, _, body = await call(sim_cluster, "GET", METRICS, token="guessed")
    assert (code, body["reason"]) == (403, "Forbidden")
    path = "/sim/v1/namespaces/default/pods/p/gpu-utilization"
    code, _, body = await call(sim_cluster, "PUT", path, {"percent": 90}, token=None)
    assert (code, body["reason"]) == (401, "Unauthorized")
    code, _, body = await call(sim_cluster, "GET", path)
    assert (code, body["percent"], body["source"]) == (200, 0, "default")


# ---- which GPUs a pod holds --------------------------------------------------------------------


async def test_a_pods_series_are_exactly_the_gpus_its_container_sees(processes):
    await create(processes, gpu_pod("a", 2, "n1", command=SHOW_GPUS))
    await running(processes, "a")
    await create(processes, gpu_pod("b", 1, "n1", command=SHOW_GPUS))
    await create(processes, gpu_pod("c", 2, "n2", command=SHOW_GPUS))
    await create(processes, gpu_pod("none", 0, "n1", command=SHOW_GPUS))
    await running(processes, "b", "c", "none")
    seen = {name: await visible_devices(processes, name) for name in ("a", "b", "c", "none")}
    assert [len(seen[n]) for n in ("a", "b", "c", "none")] == [2, 1, 2, 0]  # as requested

    gpus = util_by_gpu(await scrape(processes))
    for name in ("a", "b", "c"):
        mine = [g for g in gpus.values() if g.get("pod") == name]
        assert {g["UUID"] for g in mine} == seen[name], name
        assert {(g["namespace"], g["container"]) for g in mine} == {("default", "main")}
    # in order of binding, the lowest free indices of the node
    held = {k: g.get("pod") for k, g in gpus.items()}
    assert held == {
        ("n1", "0"): "a",
        ("n1", "1"): "a",
        ("n1", "2"): "b",
        ("n1", "3"): None,
        ("n2", "0"): "c",
        ("n2", "1"): "c",
    }
    free = gpus[("n1", "3")]
    assert not set(POD_LABELS) & set(free), free


async def test_a_deleted_pods_gpus_are_free_again_and_go_to_the_next_pod(processes):
    await create(processes, gpu_pod("a", 2, "n1", command=SHOW_GPUS))
    await running(processes, "a")
    await create(processes, gpu_pod("b", 1, "n1", command=SHOW_GPUS))
    await running(processes, "b")
    a_uuids = await visible_devices(processes, "a")
    code, _, _ = await call(processes, "DELETE", "/api/v1/namespaces/default/pods/a")
    assert code == 200

    async def gone() -> bool:
        code, _, _ = await call(processes, "GET", "/api/v1/namespaces/default/pods/a")
        return code == 404

    await async_wait_for(gone, what="pod a to be gone", timeout=15)
    gpus = util_by_gpu(await scrape(processes, "n1"))
    assert {k[1]: g.get("pod") for k, g in gpus.items()} == {
        "0": None,
        "1": None,
        "2": "b",
        "3": None,
    }
    await create(processes, gpu_pod("d", 1, "n1", command=SHOW_GPUS))
    await running(processes, "d")
    d_uuids = await visible_devices(processes, "d")
    gpus = util_by_gpu(await scrape(processes, "n1"))
    assert gpus[("n1", "0")]["pod"] == "d"  # the lowest free index
    assert d_uuids == {gpus[("n1", "0")]["UUID"]} and d_uuids < a_uuids


# ---- utilization -------------------------------------------------------------------------------


async def test_put_utilization_shows_on_that_pods_gpus_only(sim_cluster):
    await create(sim_cluster, gpu_pod("a", 2, "gpu-node-1"))
    await create(sim_cluster, gpu_pod("b", 1, "gpu-node-1"))
    await running(sim_cluster, "a", "b")
    path = "/sim/v1/namespaces/default/pods/a/gpu-utilization"
    code, _, body = await call(sim_cluster, "PUT", path, {"percent": 80})
    assert code == 200, body
    assert (body["percent"], body["source"], body["node"]) == (80, "put", "gpu-node-1")
    assert len(body["gpus"]) == 2
    code, _, got = await call(sim_cluster, "GET", path)
    assert (code, got) == (200, body)

    samples = await scrape(sim_cluster)
    total = next(n.gpu.memory_mib for n in example_cluster_spec().nodes if n.name == "gpu-node-1")
    values: dict[str | None, set[tuple[str, float]]] = {}
    for name, labels, value in samples:
        values.setdefault(labels.get("pod"), set()).add((name, value))
    assert values["a"] == {
        ("DCGM_FI_DEV_GPU_UTIL", 80),
        ("DCGM_FI_DEV_FB_USED", total * 80 // 100),
        ("DCGM_FI_DEV_FB_FREE", total - total * 80 // 100),
    }
    assert ("DCGM_FI_DEV_GPU_UTIL", 0) in values["b"] and len(values["b"]) == 3  # no setting: 0
    assert {v for n, v in values[None] if n == "DCGM_FI_DEV_GPU_UTIL"} == {0}  # free GPUs
    a_uuids = {g["UUID"] for g in body["gpus"]}
    assert a_uuids == {s[1]["UUID"] for s in samples if s[1].get("pod") == "a"}

    # The Python API: the same setting, the same page.
    assert sim_cluster.set_gpu_utilization("default", "a", 15)["percent"] == 15
    code, _, text = await call(sim_cluster, "GET", METRICS)
    assert text == sim_cluster.dcgm_metrics()
    assert {v for _, labels, v in series(text) if labels.get("pod") == "a"} >= {15}


async def test_utilization_per_gpu_follows_the_order_of_nvidia_visible_devices(processes):
    """``{"percent": [..]}`` sets each GPU of the pod, in the order its process sees them; a list
    of the wrong length or with a bad value is refused; one number sets them all again."""
    await create(processes, gpu_pod("first", 1, "n1"))  # holds index 0: "p" gets 1, 2, 3
    await running(processes, "first")
    await create(processes, gpu_pod("p", 3, "n1", command=SHOW_GPUS))
    await running(processes, "p")
    order = await visible_in_order(processes, "p")
    path = "/sim/v1/namespaces/default/pods/p/gpu-utilization"
    code, _, body = await call(processes, "PUT", path, {"percent": [10, 0, 70]})
    assert code == 200, body
    assert body["percent"] == [10, 0, 70]
    assert [(g["UUID"], g["percent"]) for g in body["gpus"]] == list(
        zip(order, [10, 0, 70], strict=True)
    )

    def reported(samples: list[tuple[str, dict, float]], field: str) -> list[float]:
        mine = {
            labels["UUID"]: v
            for name, labels, v in samples
            if labels.get("pod") == "p" and name == field
        }
        return [mine[u] for u in order]

    samples = await scrape(processes, "n1")
    assert reported(samples, "DCGM_FI_DEV_GPU_UTIL") == [10, 0, 70]
    assert reported(samples, "DCGM_FI_DEV_FB_USED") == [81920 * p // 100 for p in (10, 0, 70)]
    assert {g["value"] for g in util_by_gpu(samples).values() if g.get("pod") != "p"} == {0}

    for bad, message in (
        ([10, 70], "percent has 2 values but pod default/p asks for 3 GPUs"),
        ([10, 70, 101], "percent[2] must be a whole number from 0 to 100, not 101"),
        ([10, "70", 0], 'percent[1] must be a whole number from 0 to 100, not "70" (a string)'),
    ):
        code, _, status = await call(processes, "PUT", path, {"percent": bad})
        assert (code, status["reason"]) == (400, "BadRequest"), status
        assert status["message"].startswith(message), status["message"]
    assert reported(await scrape(processes, "n1"), "DCGM_FI_DEV_GPU_UTIL") == [10, 0, 70]

    # the Python API takes a list too; one number sets every GPU again
    assert processes.set_gpu_utilization("default", "p", (0, 0, 5))["percent"] == [0, 0, 5]
    assert reported(await scrape(processes, "n1"), "DCGM_FI_DEV_GPU_UTIL") == [0, 0, 5]
    code, _, body = await call(processes, "PUT", path, {"percent": 50})
    assert (code, body["percent"], [g["percent"] for g in body["gpus"]]) == (200, 50, [50] * 3)
    assert reported(await scrape(processes, "n1"), "DCGM_FI_DEV_GPU_UTIL") == [50] * 3


async def test_the_annotation_sets_a_pods_first_utilization(sim_cluster, caplog):
    caplog.set_level(logging.WARNING, logger="jupyter_gpupool.sim.nodes.dcgm")
    await create(sim_cluster, gpu_pod("hot", 1, "gpu-node-3", annotation="65"))
    await create(sim_cluster, gpu_pod("odd", 1, "gpu-node-3", annotation="lots"))
    await running(sim_cluster, "hot", "odd")  # a bad value does not stop the pod
    utils = {g.get("pod"): g["value"] for g in util_by_gpu(await scrape(sim_cluster)).values()}
    assert (utils["hot"], utils["odd"]) == (65, 0)

    path = "/sim/v1/namespaces/default/pods/odd/gpu-utilization"
    code, _, body = await call(sim_cluster, "GET", path)
    assert (code, body["percent"], body["source"]) == (200, 0, "default")
    why = f"annotation {ANNOTATION} must be a whole number from 0 to 100, not 'lots': ignored"
    assert body["annotationProblem"] == why
    assert f"pod default/odd: {why}" in caplog.messages

    # Changing the annotation later changes the setting too (the latest write wins).
    code, _, _ = await call(
        sim_cluster, "PUT", "/sim/v1/namespaces/default/pods/hot/gpu-utilization", {"percent": 5}
    )
    assert code == 200
    resp = await tornado.httpclient.AsyncHTTPClient().fetch(
        sim_cluster.url + "/api/v1/namespaces/default/pods/hot",
        method="PATCH",
        body=json.dumps({"metadata": {"annotations": {ANNOTATION: "40"}}}),
        headers={"Content-Type": "application/merge-patch+json", **sim_cluster.auth_headers},
        ssl_options=sim_cluster.ssl_context,
    )
    assert resp.code == 200
    utils = {g.get("pod"): g["value"] for g in util_by_gpu(await scrape(sim_cluster)).values()}
    assert utils["hot"] == 40


BAD_BODIES = {
    "bool": ({"percent": True}, "percent must be a whole number from 0 to 100, not true"),
    "string": (
        {"percent": "80"},
        'percent must be a whole number from 0 to 100, not "80" (a string)',
    ),
    "above 100": ({"percent": 101}, "percent must be a whole number from 0 to 100, not 101"),
    "negative": ({"percent": -1}, "percent must be a whole number from 0 to 100, not -1"),
    "fraction": ({"percent": 37.5}, "percent must be a whole number from 0 to 100, not 37.5"),
    "null": ({"percent": None}, "percent must be a whole number from 0 to 100, not null"),
    "missing": ({}, 'percent is required: {"percent": 0..100}'),
    "other field": (
        {"percent": 50, "pct": 50},
        "unknown field 'pct': the body is {\"percent\": 0..100}",
    ),
    "not an object": ([80], 'the body must be a JSON object: {"percent": 0..100}'),
    "not JSON": ("eighty", "the request body is not valid JSON"),
}


@pytest.mark.parametrize("case", BAD_BODIES)
async def test_a_bad_utilization_body_is_a_400_that_says_why(sim_cluster, case):
    body, message = BAD_BODIES[case]
    await create(sim_cluster, gpu_pod("p", 1, "gpu-node-1", annotation="30"))
    path = "/sim/v1/namespaces/default/pods/p/gpu-utilization"
    code, _, status = await call(sim_cluster, "PUT", path, body)
    assert code == 400, status
    assert (status["kind"], status["reason"]) == ("Status", "BadRequest"), status
    assert status["message"].startswith(message), status["message"]
    code, _, setting = await call(sim_cluster, "GET", path)
    assert (setting["percent"], setting["source"]) == (30, "annotation")  # unchanged


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/sim/v1/namespaces/default/pods/ghost/gpu-utilization", 'pods "ghost" not found'),
        ("/sim/v1/namespaces/nowhere/pods/p/gpu-utilization", 'namespaces "nowhere" not found'),
    ],
)
async def test_utilization_of_an_unknown_pod_is_a_404(sim_cluster, path, message):
    for method, body in (("PUT", {"percent": 10}), ("GET", None)):
        code, _, status = await call(sim_cluster, method, path, body)
        assert (code, status["reason"], status["message"]) == (404, "NotFound", message)


# ---- as Prometheus scrapes it ------------------------------------------------------------------


async def test_prometheus_scrapes_it_with_the_kubeconfigs_token_and_ca(sim_cluster, tmp_path):
    """The scrape config docs/sim.md shows: bearer token and CA file from the kubeconfig."""
    token, ca = token_and_ca_file(sim_cluster.kubeconfig, tmp_path)
    await create(sim_cluster, gpu_pod("p1", 2, "gpu-node-2", annotation="42"))
    await running(sim_cluster, "p1")
    target = Target(sim_cluster.url + METRICS, token=token, ca_file=ca, job="dcgm")
    with prometheus([target]) as prom:
        result = await prom.async_wait_for_series(
            'DCGM_FI_DEV_GPU_UTIL{pod="p1"}', what="p1's GPUs", until=lambda r: len(r) == 2
        )
        assert {float(r["value"][1]) for r in result} == {42.0}
        mean = by(await prom.async_query("avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)"), "pod")
        assert mean[("p1",)] == 42.0
        [health] = [t["health"] for t in await prom.async_targets()]
        assert health == "up"
