"""The simulator's API server and scheduler against kube_cases.py's tables, and the same tables
against a real control plane (``../shared/realk8s``: kube-apiserver, scheduler, etcd; about 10 s
to start), so that where the two differ the simulator is found wrong.

Each check creates real pods through the sync ``kubernetes`` client and reads the answer: 201 or
a 422 Invalid with its causes (validation), bound to the tainted node or not (matching).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import realk8s
from kube_cases import (
    GPU_TAINT,
    LABEL_KEYS,
    LABEL_VALUES,
    TOLERATION_CHECKS,
    TOLERATION_MATCHES,
    pod,
)
from kubernetes.client.exceptions import ApiException

from jupyter_gpupool.sim import ClusterSpec, parse_cluster

NODE = "gpu-1"

Answer = tuple[int, list[tuple[str, str]]]


def _answer(core: Any, body: dict[str, Any]) -> Answer:
    """``(201, [])`` or the refusal's status and ``(field, message)`` causes."""
    try:
        core.create_namespaced_pod("default", body)
    except ApiException as e:
        details = json.loads(e.body).get("details") or {}
        return e.status, [(c.get("field", ""), c.get("message", "")) for c in details["causes"]]
    return 201, []


def validation_mismatches(core: Any) -> list[str]:
    """Every toleration and label case whose answer is not the table's."""
    out = []
    for i, (toleration, causes) in enumerate(TOLERATION_CHECKS):
        status, got = _answer(core, pod(f"tol-{i}", [toleration]))
        want = [f"spec.tolerations[0].{f}" for f, _ in causes]
        ok = status == (422 if causes else 201) and [f for f, _ in got] == want
        ok = ok and all(m.startswith(s) for (_, m), (_, s) in zip(got, causes, strict=True))
        if not ok:
            out.append(f"{toleration}: {status} {got}")
    for what, table in (("key", LABEL_KEYS), ("value", LABEL_VALUES)):
        for i, (text, valid) in enumerate(table):
            labels = {text: "v"} if what == "key" else {"k": text}
            status, got = _answer(core, pod(f"label-{what}-{i}", labels=labels))
            fields = {f for f, _ in got}
            if status != (201 if valid else 422) or not (valid or fields == {"metadata.labels"}):
                out.append(f"label {what} {text!r}: {status} {got}")
    return out


def matching_mismatches(core: Any, timeout: float = 20.0) -> list[str]:
    """Every matching case whose pod the scheduler places (or refuses) against the table."""
    for i, (toleration, _) in enumerate(TOLERATION_MATCHES):
        core.create_namespaced_pod("default", pod(f"match-{i}", [toleration]))
    placed: dict[int, bool] = {}
    deadline = time.monotonic() + timeout
    while len(placed) < len(TOLERATION_MATCHES) and time.monotonic() < deadline:
        for i in range(len(TOLERATION_MATCHES)):
            p = core.read_namespaced_pod(f"match-{i}", "default")
            if p.spec.node_name:
                placed[i] = True
            elif any(
                c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or []
            ):
                placed[i] = False
        time.sleep(0.1)
    return [
        f"{toleration}: placed={placed.get(i)}"
        for i, (toleration, expected) in enumerate(TOLERATION_MATCHES)
        if placed.get(i) is not expected
    ]


# --- the simulator -------------------------------------------------------------------------------


@pytest.fixture
def sim_cluster_spec() -> ClusterSpec:
    taint = "{{key: {key}, value: {value}, effect: {effect}}}".format(**GPU_TAINT)
    return parse_cluster(f"nodes:\n  - {{name: {NODE}, gpu: {{count: 8}}, taints: [{taint}]}}\n")


@pytest.fixture
def sim_core(sim_cluster):
    api = kubernetes.config.new_client_from_config(config_file=sim_cluster.kubeconfig)
    yield kubernetes.client.CoreV1Api(api)
    api.close()


async def test_sim_refuses_what_kube_apiserver_refuses(sim_core):
    # The simulator serves from this test's event loop: the blocking client runs in a thread.
    assert await asyncio.to_thread(validation_mismatches, sim_core) == []


async def test_sim_scheduler_tolerates_what_kube_scheduler_tolerates(sim_core):
    assert await asyncio.to_thread(matching_mismatches, sim_core) == []


async def test_a_pod_with_an_unknown_toleration_operator_is_422_invalid(sim_core):
    body = pod("gt", [{"key": "nvidia.com/gpu", "operator": "Gt", "value": "5"}])
    with pytest.raises(ApiException) as err:
        await asyncio.to_thread(sim_core.create_namespaced_pod, "default", body)
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    # kube-apiserver v1.25's words for the same pod:
    assert status["message"] == (
        'Pod "gt" is invalid: spec.tolerations[0].operator: Unsupported value: "Gt": '
        'supported values: "Equal", "Exists"'
    )


# --- the real control plane ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # a control plane of its own: the matching checks need the tainted node to be the only one
    where, unpacked = tmp_path_factory.mktemp("realk8s") / "cp", realk8s.binaries(tmp_path_factory)
    for kubeconfig in realk8s.start(where, unpacked=unpacked):
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        realk8s.register_node(kubernetes.client.CoreV1Api(api), NODE, taints=[GPU_TAINT])
        yield kubernetes.client.CoreV1Api(api)
        api.close()


@pytest.mark.realk8s
def test_kube_apiserver_refuses_what_the_tables_say(real_core):
    assert validation_mismatches(real_core) == []


@pytest.mark.realk8s
def test_kube_scheduler_tolerates_what_the_tables_say(real_core):
    assert matching_mismatches(real_core) == []
