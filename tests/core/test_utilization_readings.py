"""Reading GPU utilization (issue 17): a DCGM exporter page as the exporter writes it, and
Prometheus' query answers, per pod. The pages and answers are written here by hand."""

from __future__ import annotations

import pytest

from jupyter_gpupool.core.usage.utilization import (
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
        # carol's MIG instance: an exporter that writes DCGM_FI_DEV_GPU_UTIL 0 for it
        "util": vector(("jupyter-alice", 50), ("jupyter-bob", 0), ("jupyter-carol", 0)),
        "util_max": vector(("jupyter-alice", 90), ("jupyter-bob", 0), ("jupyter-carol", 0)),
        "mem_used": vector(("jupyter-alice", 31000)),
        "mem_free": vector(("jupyter-alice", 131000)),
        "mig_util": vector(("jupyter-carol", 35), ("jupyter-erin", 60)),
        "mig_util_max": vector(("jupyter-carol", 35), ("jupyter-erin", 70)),
        "shared": vector(("jupyter-bob", 1)),
    }
    assert set(answers) == set(DEFAULT_QUERIES)
    pods = from_prometheus(answers, at=5.0)
    alice, bob = pods[("jhub", "jupyter-alice")], pods[("jhub", "jupyter-bob")]
    assert (alice.util, alice.util_max, alice.mem_used, alice.mem_total) == (50, 90, 31000, 162000)
    assert (bob.util, bob.mem_used, bob.mem_total) == (0, None, None)
    assert (alice.shared, alice.mig, bob.shared, bob.mig) == (False, False, True, False)
    carol, erin = pods[("jhub", "jupyter-carol")], pods[("jhub", "jupyter-erin")]
    assert (carol.util, carol.mig, carol.field) == (35, True, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert (erin.util, erin.util_max, erin.shared) == (60, 70, False)
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
    from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

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


def mig_series(metric: str, gpu: int, gi: int, value: float, pod: str = "") -> str:
    """A MIG instance's series as dcgm-exporter's gpuMetricsFormat writes it: the GPU's labels,
    then GPU_I_PROFILE and GPU_I_ID before Hostname."""
    labels = (
        f'gpu="{gpu}",UUID="GPU-n3-{gpu}",device="nvidia{gpu}",modelName="NVIDIA A100",'
        f'GPU_I_PROFILE="1g.10gb",GPU_I_ID="{gi}",Hostname="n3"'
    )
    if pod:
        labels += f',container="notebook",namespace="jhub",pod="{pod}"'
    return f"{metric}{{{labels}}} {value}"


def shared_series(metric: str, value: float, pod: str, vgpu: str = "") -> str:
    labels = LABELS.format(node="n4", gpu=0) + f',container="notebook",namespace="jhub",pod="{pod}"'
    if vgpu:
        labels += f',vgpu="{vgpu}"'
    return f"{metric}{{{labels}}} {value}"


def test_a_mig_instance_is_read_from_its_engine_activity_and_its_own_memory():
    page = "\n".join(
        [
            # two instances of GPU 0 held by two pods; an exporter that writes GPU_UTIL 0 for them
            mig_series("DCGM_FI_DEV_GPU_UTIL", 0, 1, 0, "jupyter-carol"),
            mig_series("DCGM_FI_DEV_GPU_UTIL", 0, 2, 0, "jupyter-dan"),
            mig_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, 1, 0.35, "jupyter-carol"),
            mig_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, 2, 0.9, "jupyter-dan"),
            mig_series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, 3, 0),  # a free instance
            mig_series("DCGM_FI_DEV_FB_USED", 0, 1, 2000, "jupyter-carol"),
            mig_series("DCGM_FI_DEV_FB_FREE", 0, 1, 7856, "jupyter-carol"),
            # carol's parent GPU, if an exporter gives it to her: left out beside her instance
            series("DCGM_FI_DEV_GPU_UTIL", "n3", 0, 0, "jupyter-carol"),
            # a whole GPU with both fields keeps DCGM_FI_DEV_GPU_UTIL; with only the ratio, it
            series("DCGM_FI_DEV_GPU_UTIL", "n1", 0, 40, "jupyter-alice"),
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "n1", 0, 0.1, "jupyter-alice"),
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "n2", 0, 0.25, "jupyter-bob"),
            "",
        ]
    )
    pods = by_pod(parse_exporter(page), at=1.0)
    carol, dan = pods[("jhub", "jupyter-carol")], pods[("jhub", "jupyter-dan")]
    assert (carol.util, carol.gpus, carol.mig, carol.shared) == (35.0, 1, True, False)
    assert (carol.mem_used, carol.mem_total) == (2000, 9856)
    assert carol.as_json()["gpu_utilization_field"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert (dan.util, dan.util_max, dan.mem_used) == (90.0, 90.0, None)
    alice, bob = pods[("jhub", "jupyter-alice")], pods[("jhub", "jupyter-bob")]
    assert (alice.util, alice.mig, alice.field) == (40.0, False, "DCGM_FI_DEV_GPU_UTIL")
    assert (bob.util, bob.mig) == (25.0, False)


def test_a_shared_gpus_pods_each_read_the_whole_gpu_marked_shared():
    # with the exporter's KUBERNETES_VIRTUAL_GPUS: a copy per pod, each with its replica
    page = "\n".join(
        [
            shared_series("DCGM_FI_DEV_GPU_UTIL", 41, "jupyter-erin", vgpu="0"),
            shared_series("DCGM_FI_DEV_GPU_UTIL", 41, "jupyter-finn", vgpu="1"),
            series("DCGM_FI_DEV_GPU_UTIL", "n1", 0, 41, "jupyter-alice"),
            "",
        ]
    )
    pods = by_pod(parse_exporter(page), at=1.0)
    erin, finn = pods[("jhub", "jupyter-erin")], pods[("jhub", "jupyter-finn")]
    assert (erin.util, erin.shared, finn.util, finn.shared) == (41.0, True, 41.0, True)
    assert erin.as_json()["gpu_utilization_shared"] is True
    assert pods[("jhub", "jupyter-alice")].shared is False
    # one GPU's series naming two pods without a vgpu label is shared too
    two = "\n".join([shared_series("DCGM_FI_DEV_GPU_UTIL", 7, p) for p in ("a", "b")])
    assert {k[1]: v.shared for k, v in by_pod(parse_exporter(two), at=1.0).items()} == {
        "a": True,
        "b": True,
    }
