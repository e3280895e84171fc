"""An admin token (or whoever holds one) posting a 500-byte "billion laughs" document to the pool or
quota API gets a 400 naming the line, at once; admissions go on and nothing changes."""

from __future__ import annotations

import asyncio

import pytest
from yaml_attacks import laughs

from jupyter_gpupool.client import GPUPoolError


def quota_laughs() -> str:
    return laughs(head="kind: quota\nquota: {name: q}\n")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "api/v1/pools", laughs), ("PUT", "api/v1/quotas", quota_laughs)],
)
async def test_laughs_are_refused_at_their_line_and_admissions_go_on(
    service, pools_dir, method, path, body
):
    admin = service.admin()
    files = {p.name: p.read_text() for p in pools_dir.iterdir()}
    registry = service.ctx.state.registry

    async def bomb() -> GPUPoolError:
        with pytest.raises(GPUPoolError) as e:
            await admin.request(method, path, text=body(), content_type="application/yaml")
        return e.value

    async def admit() -> dict:
        return await service.user("dave").admit(pools=["dev-pool"], gpus=1)

    error, admitted = await asyncio.gather(bomb(), admit())
    assert error.status == 400
    assert error.body["problems"] == [
        "<request>:3: (yaml): YAML anchors (&l0) are not accepted; write the value out"
    ]
    assert admitted["pool"] == "dev-pool"
    assert {p.name: p.read_text() for p in pools_dir.iterdir()} == files
    assert service.ctx.state.registry is registry
