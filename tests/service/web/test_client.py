"""The shared client: typed answers, and errors that carry the status and the service's words."""

import pytest

from jupyter_gpupool.client import (
    AdmissionForbidden,
    AdmissionRejected,
    GPUPoolClient,
    GPUPoolError,
)
from jupyter_gpupool.demo.run import free_port


async def test_no_answer_is_status_0():
    client = GPUPoolClient(f"http://127.0.0.1:{free_port()}/services/gpupool", "t")
    with pytest.raises(GPUPoolError) as e:
        await client.pools()
    assert e.value.status == 0 and "no answer from the gpupool service" in e.value.message
    await client.close()


async def test_errors_carry_status_message_and_body(service):
    async with service.client("not-a-token") as anonymous:
        with pytest.raises(GPUPoolError) as e:
            await anonymous.pools()
        assert e.value.status == 401 and "JupyterHub API token" in e.value.message
        assert e.value.body["status"] == 401
    admin = service.admin()
    with pytest.raises(AdmissionRejected) as e:
        await admin.admit(user="dave", pools=["dev-pool"], gpus=4)
    assert e.value.skipped[0]["pool"] == "dev-pool" and e.value.reclaimed == []
    dave = service.user("dave")
    with pytest.raises(AdmissionForbidden):
        await dave.admit(user="alice", pools=["dev-pool"], gpus=1)
    # a 403 outside admissions is a plain GPUPoolError
    with pytest.raises(GPUPoolError) as e:
        await dave.nodes()
    assert type(e.value) is GPUPoolError and e.value.status == 403
    with pytest.raises(GPUPoolError) as e:
        await dave.release("0123456789abcdef", missing_ok=False)
    assert e.value.status == 404
    assert await dave.release("0123456789abcdef") is False


async def test_pools_as_json_documents_and_info(service):
    admin = service.admin()
    info = await admin.info()
    assert info["admin"] is True and info["kind"] == "service"
    result = await admin.apply_pools(
        {"kind": "pool", "version": "v0.1", "pool": {"name": "json-pool"}, "nodes": {}}
    )
    assert result["created"] == ["json-pool"]
    again = await admin.apply_pools(
        {"kind": "pool", "version": "v0.1", "pool": {"name": "json-pool"}, "nodes": {}}
    )
    assert again["replaced"] == ["json-pool"]
    dave = service.user("dave")
    me = await dave.info()
    assert me == {**me, "name": "dave", "admin": False, "kind": "user", "groups": []}
