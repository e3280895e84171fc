"""Whatever a client sends, the answer is a 4xx with a reason, never a 500 and never half a
change. Bodies are generated: valid requests with one field broken at a time, and junk."""

from __future__ import annotations

import json
import random
from pathlib import Path

from jupyter_gpupool.client import GPUPoolError

VALID_ADMISSION = {"user": "dave", "pools": ["dev-pool"], "gpus": 1, "gpu_type": None}
VALID_POOL = {
    "kind": "pool",
    "version": "v0.1",
    "pool": {"name": "fuzz-pool"},
    "nodes": {"node-6": {"gpu-type": "T4-16G"}},
    "quota": {"user-default": {"guaranteed": 0, "limit": 2}},
    "limits": {"max-gpus": 2},
}
VALID_LABELS = {"labels": {"example.org/x": "y"}, "overwrite": True}

JUNK = [
    None,
    True,
    -1,
    0.5,
    10**30,
    -(10**30),
    float("1e308"),
    "",
    "x" * 300,
    "bad value!",
    [],
    [1, "a"],
    {},
    {"nested": {"deep": [None]}},
    "\u2603",
]


def mutations(valid: dict, rng: random.Random, n: int) -> list[object]:
    """``valid`` with one value (at any depth) replaced, a key dropped or added; and junk."""
    out: list[object] = []
    paths: list[tuple] = []

    def walk(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                paths.append((*path, k))
                walk(v, (*path, k))

    walk(valid, ())
    for _ in range(n):
        body = json.loads(json.dumps(valid))
        path = rng.choice(paths)
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        roll = rng.random()
        if roll < 0.6:
            parent[path[-1]] = rng.choice(JUNK)
        elif roll < 0.8:
            del parent[path[-1]]
        else:
            parent[rng.choice(["gpu", "bogus", "gpu_type ", "Kind"])] = rng.choice(JUNK)
        out.append(body)
    out += JUNK
    return out


def snapshot(service, pools_dir: Path):
    node = service.cluster.store.get("nodes", None, "node-6")["metadata"]["labels"]
    files = {p.name: p.read_text() for p in sorted(pools_dir.iterdir())}
    return dict(node), files, service.ctx.state.registry


async def test_generated_bad_input_is_refused_cleanly(service, pools_dir):
    admin = service.admin()
    rng = random.Random(20241121)
    before = snapshot(service, pools_dir)
    statuses: dict[int, int] = {}
    routes = [
        ("POST", "api/v1/admissions", VALID_ADMISSION, 120),
        ("POST", "api/v1/pools", VALID_POOL, 120),
        ("PUT", "api/v1/quotas", None, 0),
        ("PATCH", "api/v1/nodes/node-6/labels", VALID_LABELS, 60),
    ]
    for method, path, valid, n in routes:
        bodies = mutations(valid, rng, n) if valid else list(JUNK)
        # and raw bytes that are not JSON or YAML at all
        raw = [b"{", b"\xff\xfe\x00", b"- - -\n  : :", b"kind: [", b"\x00" * 10, b"[" * 5000]
        raw.append(b"[" * 3000 + b"]" * 3000)  # deep enough to exhaust a recursive parser
        for body in bodies + raw:
            text = body.decode("latin-1") if isinstance(body, bytes) else json.dumps(body)
            try:
                resp = await admin.request(method, path, text=text, content_type="application/json")
                status = resp.code
            except GPUPoolError as e:
                status = e.status
                assert e.message, (path, body)
            statuses[status] = statuses.get(status, 0) + 1
            assert 200 <= status < 500 and status != 0, (method, path, body, status)
            if path.endswith("admissions") and status == 201:
                await admin.release(json.loads(resp.body)["id"])
            if status >= 300:
                continue
            # a mutation that is still valid may be applied: undo it to keep comparing
            if path.endswith("pools"):
                await admin.delete_pool(json.loads(text)["pool"]["name"])
            elif path.endswith("labels"):
                for key in json.loads(text)["labels"]:
                    await admin.label_node("node-6", {key: before[0].get(key)}, overwrite=True)
    assert statuses.get(400, 0) > 200
    after = snapshot(service, pools_dir)
    assert after[0] == before[0]
    assert after[1] == before[1]
    assert after[2] == before[2]
