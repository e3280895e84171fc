"""Pod list pages decoded into only the fields the index reads count exactly as the full JSON."""

from __future__ import annotations

import json

import pytest
from k8s_factories import node, pod

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.service.cluster.podlist import decode_pods


def pods() -> list[dict]:
    sidecar = pod("sidecar", 1, "n1", user="carol")
    sidecar["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "restartPolicy": "Always",
            "resources": {"limits": {"nvidia.com/gpu": 2}},
        },
        {"name": "setup", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
    ]
    kubespawner = pod("jupyter-dan", 1, "n2")  # KubeSpawner's own annotations
    kubespawner["metadata"]["annotations"]["hub.jupyter.org/username"] = "dan"
    return [
        pod("a", 2, "n1", user="alice", charged="group:ml", over_quota=True, admission="adm-1"),
        pod("b", 1, None, user="bob", pool="p2"),
        pod("c", 0, "n1"),
        pod("d", 3, "n2", deleting=True),
        pod("e", 1, "n2", phase="Succeeded", user="erin"),
        pod("f", 0, "n2", init_gpus=4, user="frank", server="big"),
        sidecar,
        kubespawner,
    ]


def index_of(items: list) -> UsageIndex:
    index = UsageIndex()
    for n in ("n1", "n2"):
        index.apply_node("ADDED", node(n, "p1" if n == "n1" else "p2", 8))
    relist = index.relist("pods")
    relist.add(items)
    relist.finish()
    return index


def test_decoded_pages_count_as_the_full_json():
    body = json.dumps(
        {"kind": "PodList", "metadata": {"resourceVersion": "7", "continue": "t"}, "items": pods()}
    ).encode()
    page = decode_pods(body)
    assert page.get("metadata").get("continue") == "t"
    assert page.get("metadata").get("resourceVersion") == "7"
    full, light = index_of(json.loads(body)["items"]), index_of(page.get("items"))
    assert light.servers() == full.servers() and len(light.servers()) == 5
    assert light.nodes() == full.nodes() and light.pools() == full.pools()
    assert light.usage_by_subject() == full.usage_by_subject()
    assert light.admission_state("adm-1") == full.admission_state("adm-1") == "bound"
    assert len(light) == len(full) == 7  # e finished


def test_a_page_that_is_not_a_pod_list_is_refused():
    with pytest.raises(ValueError, match="not a list of pods"):
        decode_pods(b'{"items": "nope"}')
