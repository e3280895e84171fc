"""`gpupool sim` as a user runs it, driven by kubectl (issue 2's "done means")."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from needs import need
from waiting import wait_for

from jupyter_gpupool.demo.testing import SimProcess
from jupyter_gpupool.sim import sim_auth_headers, sim_ssl_context

need(shutil.which("kubectl"), "kubectl not installed (Debian: apt-get install kubernetes-client)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster.yaml"


@pytest.fixture
def sim(tmp_path):
    """Run `gpupool sim` in a subprocess; yield a kubectl runner bound to its kubeconfig."""
    with SimProcess.start(EXAMPLE, tmp_path / "kubeconfig") as process:

        def kubectl(*args, check=True):
            env = {**os.environ, "KUBECONFIG": str(process.kubeconfig)}
            result = subprocess.run(
                ["kubectl", *args], capture_output=True, text=True, env=env, timeout=60
            )
            if check:
                assert result.returncode == 0, result.stderr
            return result

        kubectl.url = process.url
        kubectl.kubeconfig = process.kubeconfig
        kubectl.proc = process.proc
        kubectl.tmp = tmp_path
        yield kubectl


def test_sim_writes_a_kubeconfig_and_kubectl_lists_10_nodes(sim):
    out = sim("get", "nodes", "-L", "runwhere.ai/pool").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "POOL"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert len(rows) == 10
    assert rows["gpu-node-1"][1] == "Ready" and rows["gpu-node-1"][-1] == "training-pool"
    assert len(rows["node-6"]) == 5  # no pool label
    assert sim("version", "-o", "json").returncode == 0


def test_kubectl_sends_the_kubeconfig_token_and_is_refused_without_it(sim):
    """kubectl only sends a kubeconfig's token over HTTPS: the cluster must serve HTTPS, and a
    kubeconfig with another token gets refused."""
    import yaml

    doc = yaml.safe_load(sim.kubeconfig.read_text())
    assert doc["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    doc["users"][0]["user"] = {"token": "guessed"}
    other = sim.tmp / "other-kubeconfig"
    other.write_text(yaml.safe_dump(doc))
    result = sim("--kubeconfig", str(other), "get", "pods", check=False)
    assert result.returncode == 1 and "(Forbidden)" in result.stderr, result.stderr
    assert sim("get", "pods").returncode == 0


def test_gpu_pods_run_in_their_pool_or_stay_pending_with_a_reason(sim):
    for name, gpus in (("two", 2), ("sixteen", 16)):
        manifest = sim.tmp / f"{name}.yaml"
        manifest.write_text(
            textwrap.dedent(
                f"""\
                apiVersion: v1
                kind: Pod
                metadata: {{name: {name}}}
                spec:
                  nodeSelector: {{runwhere.ai/pool: training-pool}}
                  containers:
                  - name: main
                    image: busybox
                    resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}
                """
            )
        )
        sim("create", "-f", str(manifest))
    two = wait_for(
        lambda: (
            (p := json.loads(sim("get", "pod", "two", "-o", "json").stdout))["status"]["phase"]
            == "Running"
            and p
        ),
        what="pod two to run",
    )
    assert two["spec"]["nodeName"] in ("gpu-node-1", "gpu-node-2")

    # the scheduler works in passes of its own: that two runs says nothing about sixteen yet
    def described_with_failed_scheduling():
        described = sim("describe", "pod", "sixteen").stdout
        return described if "FailedScheduling" in described else None

    described = wait_for(
        described_with_failed_scheduling, what="a FailedScheduling event for pod sixteen"
    )
    status = sim("get", "pod", "sixteen", "-o", "jsonpath={.status.phase}").stdout
    assert status == "Pending"
    assert (
        "0/10 nodes are available: 10 Insufficient nvidia.com/gpu, "
        "7 node(s) didn't match Pod's node affinity/selector. preemption: 0/10 nodes are available: "
        "3 No preemption victims found for incoming pod, "
        "7 Preemption is not helpful for scheduling." in described
    )
    events = sim("get", "events", "--field-selector", "reason=FailedScheduling").stdout
    assert "pod/sixteen" in events


def test_kubectl_label_moves_a_node_between_pools(sim):
    assert (
        sim("label", "node", "node-6", "runwhere.ai/pool=training-pool").stdout.strip()
        == "node/node-6 labeled"
    )
    refused = sim("label", "node", "node-6", "runwhere.ai/pool=inference-pool", check=False)
    assert refused.returncode != 0 and "--overwrite is false" in refused.stderr
    sim("label", "node", "node-6", "runwhere.ai/pool=inference-pool", "--overwrite")
    pools = sim(
        "get", "nodes", "-l", "runwhere.ai/pool=inference-pool", "-o", "name"
    ).stdout.split()
    assert pools == ["node/gpu-node-3", "node/gpu-node-4", "node/gpu-node-shared-1", "node/node-6"]
    sim("label", "node", "node-6", "runwhere.ai/pool-")
    assert (
        sim("get", "node", "node-6", "-o", "jsonpath={.metadata.labels.runwhere\\.ai/pool}").stdout
        == ""
    )


def test_kubectl_run_describe_cordon_delete(sim):
    sim("run", "tmp", "--image=busybox", "--restart=Never", "--", "sleep", "1")
    wait_for(lambda: "Running" in sim("get", "pod", "tmp").stdout, what="pod tmp to run")
    assert "Successfully assigned default/tmp to" in sim("describe", "pod", "tmp").stdout
    sim("cordon", "gpu-node-5")
    assert "SchedulingDisabled" in sim("get", "node", "gpu-node-5").stdout
    node = sim("describe", "node", "gpu-node-5").stdout
    assert "Unschedulable:      true" in node and "nvidia.com/gpu:  4" in node
    sim("uncordon", "gpu-node-5")
    sim("delete", "pod", "tmp")
    assert "tmp" not in sim("get", "pods").stdout


def test_sim_exits_0_on_sigterm_and_sigint(sim):
    sim.proc.send_signal(signal.SIGINT)
    assert sim.proc.wait(timeout=10) == 0


def test_bad_cluster_file_exits_1_naming_line_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - name: a\n    gpu: {cont: 4}\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_gpupool",
            "sim",
            "--cluster",
            str(bad),
            "--kubeconfig",
            str(tmp_path / "kc"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"{bad}:3: nodes[0].gpu.cont: unknown key 'cont'; did you mean 'count'?" in result.stderr


def control(sim, method, path, body=None):
    import urllib.request

    req = urllib.request.Request(
        f"{sim.url}/sim/v1/{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **sim_auth_headers(sim.kubeconfig)},
    )
    context = sim_ssl_context(sim.kubeconfig)
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:
        return json.loads(resp.read() or b"null")


def test_control_endpoints_change_the_running_cluster(sim):
    control(
        sim,
        "POST",
        "nodes",
        {
            "name": "gpu-node-7",
            "labels": {"runwhere.ai/pool": "dev-pool"},
            "gpu": {"count": 2, "type": "L4-24G"},
        },
    )
    assert (
        "gpu-node-7" in sim("get", "nodes", "-l", "runwhere.ai/pool=dev-pool", "-o", "name").stdout
    )
    control(sim, "PUT", "nodes/gpu-node-7/cordon", {"unschedulable": True})
    control(sim, "PUT", "nodes/gpu-node-7/conditions", {"Ready": False})
    assert "NotReady,SchedulingDisabled" in sim("get", "node", "gpu-node-7").stdout
    control(sim, "DELETE", "nodes/gpu-node-7")
    assert "gpu-node-7" not in sim("get", "nodes").stdout
    control(sim, "PUT", "faults", {"error_rate": 1.0, "paths": ["/namespaces"]})
    failed = sim("get", "namespaces", check=False)
    assert failed.returncode != 0 and "injected fault" in failed.stderr
    control(sim, "PUT", "faults", {"error_rate": 0})
    assert "kube-system" in sim("get", "namespaces").stdout
