"""Reading GPU utilization (issue 17): a DCGM exporter page as the exporter writes it, and
Prometheus' query answers, per pod. The pages and answers are written here by hand."""

from __future__ import annotations

import pytest

from jupyter_gpupool.core.utilization import (
    DEFAULT_QUERIES,
    by_pod,
    from_prometheus,
    parse_exporter,
)

LABELS = 'gpu="{gpu}",UUID="GPU-{node}-{gpu}",device="nvidia{gpu}",modelName="NVIDIA A100",Hostname="{node}"'


def series(metric: str, node: str, gpu: int, value: float, pod: str = "") -> str:
    labels = LABELS.format(node=node, gpu=gpu)
    if pod:
        labels += f',container="notebook",namespace="jhub",pod="{pod}"'
    return f"{metric}{{{labels}}} {value}"


PAGE = "\n".join(
    [
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        series("DCGM_FI_DEV_GPU_UTIL", "n1", 0, 90, "jupyter-alice"),
        series("DCGM_FI_DEV_GPU_UTIL", "n1", 1, 10, "jupyter-alice"),
        series("DCGM_FI_DEV_GPU_UTIL", "n1", 2, 0),
        series("DCGM_FI_DEV_GPU_UTIL", "n2", 0, 0, "jupyter-bob"),
        "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).",
        "# TYPE DCGM_FI_DEV_FB_USED gauge",
        series("DCGM_FI_DEV_FB_USED", "n1", 0, 30000, "jupyter-alice"),
        series("DCGM_FI_DEV_FB_USED", "n1", 1, 1000, "jupyter-alice"),
        series("DCGM_FI_DEV_FB_USED", "n1", 2, 0),
        series("DCGM_FI_DEV_FB_USED", "n2", 0, 0, "jupyter-bob"),
        "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).",
        "# TYPE DCGM_FI_DEV_FB_FREE gauge",
        series("DCGM_FI_DEV_FB_FREE", "n1", 0, 51000, "jupyter-alice"),
        series("DCGM_FI_DEV_FB_FREE", "n1", 1, 80000, "jupyter-alice"),
        series("DCGM_FI_DEV_FB_FREE", "n1", 2, 81000),
        "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).",
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge",
        series("DCGM_FI_DEV_SM_CLOCK", "n1", 0, 1410, "jupyter-alice"),
        "",
    ]
)


def test_an_exporter_page_gives_each_pods_gpus():
    readings = parse_exporter(PAGE)
    assert len(readings) == 4  # one per GPU, whatever the number of metrics
    pods = by_pod(readings, at=100.0)
    assert set(pods) == {("jhub", "jupyter-alice"), ("jhub", "jupyter-bob")}  # n1's GPU 2: free
    alice = pods[("jhub", "jupyter-alice")]
    assert (alice.gpus, alice.util, alice.util_max) == (2, 50.0, 90.0)
    assert (alice.mem_used, alice.mem_total, alice.at) == (31000, 162000, 100.0)
    bob = pods[("jhub", "jupyter-bob")]
    assert (bob.gpus, bob.util, bob.mem_used, bob.mem_total) == (1, 0.0, 0, None)  # no FB_FREE
    assert alice.as_json()["gpu_utilization"] == 50.0


def test_a_page_that_is_not_prometheus_text_is_refused():
    with pytest.raises(ValueError, match="not Prometheus' text format"):
        parse_exporter("<html>502 Bad Gateway</html>\nDCGM_FI_DEV_GPU_UTIL{gpu=0} 1 2 3\n")
    assert parse_exporter("") == []


def vector(*items: tuple[str, float]) -> dict:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"namespace": "jhub", "pod": pod}, "value": [1700000000.0, str(v)]}
                for pod, v in items
            ],
        },
    }


def test_prometheus_answers_per_pod():
    answers = {
        "util": vector(("jupyter-alice", 50), ("jupyter-bob", 0)),
        "util_max": vector(("jupyter-alice", 90), ("jupyter-bob", 0)),
        "mem_used": vector(("jupyter-alice", 31000)),
        "mem_free": vector(("jupyter-alice", 131000)),
    }
    assert set(answers) == set(DEFAULT_QUERIES)
    pods = from_prometheus(answers, at=5.0)
    alice, bob = pods[("jhub", "jupyter-alice")], pods[("jhub", "jupyter-bob")]
    assert (alice.util, alice.util_max, alice.mem_used, alice.mem_total) == (50, 90, 31000, 162000)
    assert (bob.util, bob.mem_used, bob.mem_total) == (0, None, None)
    # a site's own query answers the mean only
    only = from_prometheus({"util": vector(("jupyter-alice", 12.5))}, at=5.0)
    assert only[("jhub", "jupyter-alice")].util_max == 12.5
    with pytest.raises(ValueError, match="not a vector answer: parse error"):
        from_prometheus({"util": {"status": "error", "error": "parse error"}}, at=5.0)


def test_the_readings_are_prometheus_clients_own_on_the_simulators_page():
    """The line reader agrees with prometheus_client's general parser (the truth here) on a
    page the simulated exporter wrote, escapes and all."""
    from prometheus_client.parser import text_string_to_metric_families

    from jupyter_gpupool.sim import SimCluster
    from jupyter_gpupool.sim.spec import example_cluster_spec

    cluster = SimCluster(example_cluster_spec())
    text = cluster.dcgm_metrics()
    text += (
        'DCGM_FI_DEV_GPU_UTIL{gpu="9",Hostname="odd \\"node\\"\\\\x",pod="p\\nq",'
        'namespace="ns"} 7 1700000000000\n'
    )
    mine = {(r.node, r.gpu): (r.pod, r.util, r.mem_used, r.mem_free) for r in parse_exporter(text)}
    theirs: dict = {}
    fields = {"DCGM_FI_DEV_GPU_UTIL": 1, "DCGM_FI_DEV_FB_USED": 2, "DCGM_FI_DEV_FB_FREE": 3}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in fields:
                key = (sample.labels.get("Hostname", ""), sample.labels.get("gpu", ""))
                row = theirs.setdefault(key, [sample.labels.get("pod", ""), None, None, None])
                row[fields[sample.name]] = sample.value
    assert mine == {k: tuple(v) for k, v in theirs.items()}
    assert mine[('odd "node"\\x', "9")] == ("p\nq", 7.0, None, None)
    assert len(mine) > 20  # every GPU of the example cluster
