"""The kubelet in process mode: pods run as local processes on their own loopback address."""

import sys

import pytest
import tornado.httpclient
from waiting import async_wait_for

from jupyter_gpupool.sim import SimCluster, parse_cluster

CLUSTER = "nodes:\n  - {name: n1, gpu: {count: 4}}\n"


def server_pod(name, port=8000, env=None):
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": "python",
                    "command": [sys.executable, "-m", "http.server"],
                    "args": ["--bind", "0.0.0.0", str(port)],
                    "env": env or [],
                }
            ]
        },
    }


@pytest.fixture
async def cluster():
    async with SimCluster(parse_cluster(CLUSTER), run_processes=True) as c:
        yield c


def running(cluster, name):
    pod = cluster.pod("default", name)
    return pod if pod and pod["status"]["phase"] == "Running" else None


async def fetch(url, timeout=10, **kwargs):
    """The answer of ``url`` once the pod's server listens (it starts after the pod runs)."""
    http = tornado.httpclient.AsyncHTTPClient()
    return await async_wait_for(
        lambda: http.fetch(url, request_timeout=2, **kwargs),
        ignore=(ConnectionError, OSError, tornado.httpclient.HTTPClientError),
        timeout=timeout,
        interval=0.1,
        what=f"{url} to answer",
    )


async def test_two_servers_on_the_same_port_run_side_by_side(cluster):
    cluster.store.create("pods", "default", server_pod("a"))
    cluster.store.create("pods", "default", server_pod("b"))
    a = await cluster.wait_for(lambda: running(cluster, "a"))
    b = await cluster.wait_for(lambda: running(cluster, "b"))
    assert a["status"]["podIP"] != b["status"]["podIP"]
    assert a["status"]["podIP"].startswith("127.")
    for pod in (a, b):
        resp = await fetch(f"http://{pod['status']['podIP']}:8000/")
        assert resp.code == 200
    cluster.store.delete("pods", "default", "a", grace_period=5)
    await cluster.wait_for(lambda: cluster.pod("default", "a") is None)


async def test_env_comes_from_values_fields_and_secrets_and_exit_code_is_the_phase(cluster):
    cluster.store.create(
        "secrets", "default", {"metadata": {"name": "s"}, "stringData": {"token": "t0k"}}
    )
    script = "import os,sys; print(os.environ['A'], os.environ['TOKEN'], os.environ['NAME'], os.environ['IP']); sys.exit(int(os.environ['CODE']))"
    for name, code in (("ok", "0"), ("bad", "3")):
        cluster.store.create(
            "pods",
            "default",
            {
                "metadata": {"name": name},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "python",
                            "command": [sys.executable, "-c", script],
                            "env": [
                                {"name": "A", "value": "hello"},
                                {"name": "CODE", "value": code},
                                {
                                    "name": "TOKEN",
                                    "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}},
                                },
                                {
                                    "name": "NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                                {
                                    "name": "IP",
                                    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                },
                            ],
                        }
                    ],
                },
            },
        )
    ok = await cluster.wait_for(
        lambda: (p := cluster.pod("default", "ok")) and p["status"]["phase"] == "Succeeded" and p
    )
    bad = await cluster.wait_for(
        lambda: (p := cluster.pod("default", "bad")) and p["status"]["phase"] == "Failed" and p
    )
    assert bad["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    log = cluster.kubelet.read_log(ok)
    assert log.split() == ["hello", "t0k", "ok", ok["status"]["podIP"]]


async def test_a_finished_pod_frees_its_gpus(cluster):
    pod = {
        "metadata": {"name": "job"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "python",
                    "command": [sys.executable, "-c", "pass"],
                    "resources": {"limits": {"nvidia.com/gpu": "4"}},
                }
            ]
        },
    }
    cluster.store.create("pods", "default", pod)
    waiting = server_pod("waiting")
    waiting["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    await cluster.wait_for(lambda: cluster.pod("default", "job")["status"]["phase"] == "Succeeded")
    cluster.store.create("pods", "default", waiting)
    await cluster.wait_for(lambda: running(cluster, "waiting"))


async def test_log_is_served_by_the_api(cluster):
    cluster.store.create(
        "pods",
        "default",
        {
            "metadata": {"name": "echo"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "python",
                        "command": [sys.executable, "-c", "print('from the pod')"],
                    }
                ]
            },
        },
    )
    await cluster.wait_for(lambda: cluster.pod("default", "echo")["status"]["phase"] == "Succeeded")
    resp = await fetch(
        f"{cluster.url}/api/v1/namespaces/default/pods/echo/log",
        headers=cluster.auth_headers,
        ssl_options=cluster.ssl_context,
    )
    assert resp.body.decode().strip() == "from the pod"


async def test_pod_without_command_keeps_running_as_its_image_would(cluster):
    # Kubernetes runs the image's default command; the simulator has no images, so the container
    # runs without a process (as without run_processes) until the pod is deleted.
    cluster.store.create(
        "pods",
        "default",
        {
            "metadata": {"name": "nocmd"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    pod = await cluster.wait_for(
        lambda: (
            (p := cluster.pod("default", "nocmd")) and p["status"].get("phase") != "Pending" and p
        )
    )
    # a pod whose command ends at once, started after it, has ended: by then a process run for
    # "nocmd" (with no command to run, it would fail at once) would have ended too
    quick = server_pod("quick")
    quick["spec"]["containers"][0].update(command=[sys.executable, "-c", "pass"], args=[])
    cluster.store.create("pods", "default", quick)
    await cluster.wait_for(
        lambda: (
            (cluster.pod("default", "quick") or {}).get("status", {}).get("phase") == "Succeeded"
        )
    )
    pod = cluster.pod("default", "nocmd")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["state"].keys() == {"running"}
    cluster.store.delete("pods", "default", "nocmd")
    await cluster.wait_for(lambda: cluster.pod("default", "nocmd") is None)


def test_gpupool_sim_pod_nets_picks_the_pods_network(monkeypatch):
    from jupyter_gpupool.sim.nodes.kubelet import POD_NETS_ENV, IPAllocator

    monkeypatch.setenv(POD_NETS_ENV, "77-77")
    ips = IPAllocator()
    assert [ips.allocate() for _ in range(2)] == ["127.77.0.2", "127.77.0.3"]
    for bad in ("77", "0-10", "10-255", "9-8", "a-b"):
        monkeypatch.setenv(POD_NETS_ENV, bad)
        with pytest.raises(ValueError, match=f"GPUPOOL_SIM_POD_NETS={bad!r}: expected LOW-HIGH"):
            IPAllocator()
