"""The test fakes of the service answer like the service: same keys, same types.

The spawner tests (``tests/spawner/spawner_fakes.py``) and the notebook tests
(``tests/notebook/fakehub.py``) talk to stand-ins that build their answers with the service's own
view functions (``tests/real_answers.py``). This asks the running service and each fake the same
requests and compares the shape of every answer, so that what the handlers add around a view
(error bodies, list wrappers, a changed view) cannot drift from what the fakes say. The values
differ: each side has its own pools and usage.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

TESTS = Path(__file__).resolve().parents[1]


def fake_module(folder: str, name: str) -> ModuleType:
    """A fake's module, by path: pytest puts its folder on sys.path only for that folder's tests."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TESTS / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the same module the folder's own tests import by this name
    spec.loader.exec_module(module)
    return module


def shape_differences(fake: Any, real: Any, path: str = "answer") -> list[str]:
    """Where ``fake`` differs from ``real`` in keys or in the types of values present in both.

    A null on either side says nothing about the type (``gpu_type`` is null for CPU pools), and
    every item of a fake list must be shaped as some item of the real one (a list may hold items
    of several shapes: node affinity's ``DoesNotExist`` has no ``values``, ``Lt`` has); when none
    is, its differences from the closest are shown.
    """
    if fake is None or real is None:
        return []
    if isinstance(real, dict) and isinstance(fake, dict):
        out = []
        if missing := sorted(real.keys() - fake.keys()):
            out.append(f"{path}: the fake lacks {missing}")
        if extra := sorted(fake.keys() - real.keys()):
            out.append(f"{path}: the fake has {extra}, the service does not")
        for key in sorted(real.keys() & fake.keys()):
            out += shape_differences(fake[key], real[key], f"{path}.{key}")
        return out
    if isinstance(real, list) and isinstance(fake, list):
        out = []
        for i, item in enumerate(fake):
            each = [shape_differences(item, r, f"{path}[{i}]") for r in real]
            if each and all(each):
                out += [d for d in min(each, key=len) if d not in out]
        return out
    if type(fake) is not type(real):
        return [f"{path}: the fake has {type(fake).__name__}, the service {type(real).__name__}"]
    return []


def test_shape_differences_sees_keys_and_types():
    real = {"a": 1, "b": [{"c": "x", "d": None}], "e": None}
    assert shape_differences({"a": 2, "b": [{"c": "y", "d": 3}], "e": "z"}, real) == []
    assert shape_differences({"a": "2", "b": [{"c": "y"}], "e": None, "f": 0}, real) == [
        "answer: the fake has ['f'], the service does not",
        "answer.a: the fake has str, the service int",
        "answer.b[0]: the fake lacks ['d']",
    ]
    # an item shaped as any item of the real list is alike
    mixed = {"b": [{"k": "x"}, {"k": "y", "v": ["1"]}]}
    assert shape_differences({"b": [{"k": "z", "v": ["2"]}, {"k": "w"}]}, mixed) == []
    assert shape_differences({"b": [{"k": 1}]}, mixed) == [
        "answer.b[0].k: the fake has int, the service str"
    ]


async def call(
    base: str, token: str, method: str, path: str, body: Any = None, **query: str
) -> tuple[int, Any]:
    url = base + path + (f"?{urlencode(query)}" if query else "")
    request = HTTPRequest(
        url,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        body=None if body is None else json.dumps(body),
        allow_nonstandard_methods=True,
        request_timeout=30,
    )
    response = await AsyncHTTPClient().fetch(request, raise_error=False)
    return response.code, json.loads(response.body)


def assert_alike(fake: tuple[int, Any], real: tuple[int, Any], what: str) -> None:
    assert fake[0] == real[0], f"{what}: the fake answers {fake[0]}, the service {real[0]}"
    differences = shape_differences(fake[1], real[1])
    assert not differences, f"{what}:\n" + "\n".join(differences)


ALICE = {"user": "alice", "groups": ["ml-research"]}


async def run_pod(cluster: Any, overrides: dict[str, Any], name: str) -> None:
    """The admitted server's pod, as the spawner makes it, bound to a node by the scheduler.

    (conftest.py has one too; ``from conftest import`` finds another folder's conftest.py when
    several test folders run together.)
    """
    container = {"name": "notebook", "image": "x", "resources": overrides["resources"]}
    pod = {
        "metadata": {
            "name": name,
            "labels": overrides["labels"],
            "annotations": overrides["annotations"],
        },
        "spec": {
            "containers": [container],
            "nodeSelector": overrides["nodeSelector"],
            "tolerations": overrides["tolerations"],
        },
    }
    cluster.store.create("pods", "default", pod)
    await cluster.wait_for(
        lambda: (cluster.pod("default", name) or {}).get("spec", {}).get("nodeName")
    )


@pytest.fixture
async def spawner_fake():
    fakes = fake_module("spawner", "spawner_fakes")
    fake = await fakes.FakeService().start()
    yield fakes, fake
    await fake.stop()


async def test_the_spawner_fake_answers_like_the_service(service, spawner_fake):
    fakes, fake = spawner_fake
    admin = service.hub.admin()

    async def fake_asks(method, path, body=None, **query):
        return await call(fake.url, fakes.TOKEN, method, path, body, **query)

    async def service_asks(method, path, body=None, **query):
        return await call(service.url, admin, method, path, body, **query)

    groups = json.dumps(ALICE["groups"])
    options = "api/v1/launch-options"
    real = await service_asks("GET", options, user="alice", groups=groups)
    assert real[1]["pools"] and real[1]["default_pools"]  # so that rows are compared
    assert_alike(await fake_asks("GET", options, user="alice", groups=groups), real, "options")

    # admitted after skipping a pool: compute-pool has no GPUs, on both sides
    body = {**ALICE, "pools": ["compute-pool", "dev-pool"], "gpus": 1, "server": "big"}
    real = await service_asks("POST", "api/v1/admissions", body)
    assert real[0] == 201 and real[1]["skipped"] and real[1]["overrides"]["labels"]
    admitted = await fake_asks("POST", "api/v1/admissions", body)
    assert_alike(admitted, real, "admission")

    fake_id, real_id = admitted[1]["id"], real[1]["id"]
    for what in ("release", "release of a released admission"):
        real = await service_asks("DELETE", f"api/v1/admissions/{real_id}")
        assert_alike(await fake_asks("DELETE", f"api/v1/admissions/{fake_id}"), real, what)

    # refused: the fake because the test calls the pool full, the service for want of GPUs
    fake.full = {"training-pool"}
    refused = await fake_asks("POST", "api/v1/admissions", {**ALICE, "pools": ["training-pool"]})
    real = await service_asks(
        "POST", "api/v1/admissions", {**ALICE, "pools": ["compute-pool"], "gpus": 1}
    )
    assert real[0] == 409 and real[1]["skipped"]
    assert_alike(refused, real, "refused admission")

    unknown = {**ALICE, "pools": ["nope"]}
    real = await service_asks("POST", "api/v1/admissions", unknown)
    assert_alike(await fake_asks("POST", "api/v1/admissions", unknown), real, "unknown pool")


async def test_the_notebook_fake_answers_like_the_service(service):
    fakehub = fake_module("notebook", "fakehub")
    hub = fakehub.FakeHub().start()
    try:
        alice = service.hub.user("alice", ALICE["groups"])
        base = "/services/gpupool/"

        async def both(what, path):
            f = await call(hub.url + base, fakehub.TOKEN, "GET", path)
            r = await call(service.url, alice, "GET", path)
            assert_alike(f, r, what)
            return r[1]

        real = await both("launch options", "api/v1/launch-options")
        assert real["pools"]
        # alice runs a server, so that the rows of the list are compared too
        admitted = await service.admin().admit(**ALICE, pools=["training-pool"], gpus=2)
        await run_pod(service.cluster, admitted["overrides"], "jupyter-alice")
        await service.settled()
        real = await both("servers", "api/v1/servers")
        assert real["servers"]
    finally:
        hub.stop()
