"""Hostile input through the API: a key given twice and a number of 5,000 digits, in every body
and argument the service reads. Each is a 400 that names the field (and for a key given twice its
line), never a 500 and never the last value silently; nothing changes."""

from __future__ import annotations

import pytest
from yaml_attacks import QUOTA_TWICE

from jupyter_gpupool.client import GPUPoolError

HUGE = "9" * 5000


async def refused(client, method, path, text=None, content_type="application/json") -> str:
    with pytest.raises(GPUPoolError) as e:
        await client.request(method, path, text=text, content_type=content_type)
    assert e.value.status == 400, e.value.body
    return str(e.value.body["message"])


async def test_a_json_key_given_twice_is_refused_with_its_line(service):
    admin = service.admin()
    body = '{"user": "dave", "pools": ["dev-pool"],\n "gpus": 1, "gpus": 9999}'
    message = await refused(admin, "POST", "api/v1/admissions", body)
    assert message == (
        'the request body is refused: the key "gpus" is given twice in one object '
        "(line 2, column 13); give each key once"
    )
    body = '{"labels": {"example.org/x": "y", "example.org/x": null}}'
    message = await refused(admin, "PATCH", "api/v1/nodes/node-6/labels", body)
    assert '"example.org/x" is given twice in one object (line 1, column 35)' in message
    assert len(service.ctx.state.reservations) == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "api/v1/admissions", f'{{"pools": ["dev-pool"], "gpus": {HUGE}}}', "gpus"),
        ("POST", "api/v1/admissions", f'{{"gpus": 1, "queue": {HUGE}}}', "queue"),
        ("POST", "api/v1/admissions", f'{{"user": {HUGE}}}', "user"),
        ("PATCH", "api/v1/nodes/node-6/labels", f'{{"labels": {{"a": {HUGE}}}}}', "labels.a"),
        (
            "PATCH",
            "api/v1/nodes/node-6/labels",
            f'{{"labels": {{}}, "overwrite": {HUGE}}}',
            "labels",
        ),
        (
            "PATCH",
            "api/v1/nodes/node-6/labels",
            f'{{"labels": {{"a": "b"}}, "overwrite": -{HUGE}}}',
            "overwrite",
        ),
    ],
    ids=["gpus", "queue", "user", "label value", "labels", "overwrite"],
)
async def test_a_number_of_5000_digits_in_a_body_is_a_400_naming_the_field(
    service, method, path, body, field
):
    message = await refused(service.admin(), method, path, body)
    assert message.startswith(field + " "), message
    assert "5,000 digits" in message or field == "labels", message


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (f"api/v1/servers?limit={HUGE}", "limit"),
        (f"api/v1/servers?offset={HUGE}", "offset"),
        ("api/v1/servers?offset=%C2%B2", "offset"),  # "²": isdigit() says yes, int() no
        (f"api/v1/nodes?limit={HUGE}", "limit"),
        (f"api/v1/idle?days={HUGE}", "days"),
        (f"api/v1/reports/gpu-hours?since={HUGE}d", "since"),
        (f"api/v1/launch-options?user=dave&groups=[{HUGE}]", "groups"),
        ('api/v1/launch-options?user=dave&groups=[{"a":1,"a":2}]', "groups"),
    ],
    ids=[
        "limit",
        "offset",
        "offset ²",
        "nodes limit",
        "idle days",
        "since",
        "groups",
        "groups twice",
    ],
)
async def test_a_huge_or_odd_number_in_a_query_is_a_400_naming_it(service, path, field):
    message = await refused(service.admin(), "GET", path)
    assert message.split()[0].startswith(field), message


@pytest.mark.parametrize(
    ("method", "path", "body", "problem"),
    [
        (
            "PUT",
            "api/v1/quotas",
            QUOTA_TWICE,
            "<request>:7: pools.dev-pool: the key 'dev-pool' is given twice in this mapping "
            "(first at line 5); give each key once",
        ),
        (
            "POST",
            "api/v1/pools",
            "kind: pool\nversion: v0.1\npool:\n  name: a-pool\n  name: b-pool\n",
            "<request>:5: pool.name: the key 'name' is given twice in this mapping (first at "
            "line 4); give each key once",
        ),
        (
            "POST",
            "api/v1/pools",
            '{"kind": "pool", "version": "v0.1", "pool": {"name": "j"},\n "pool": {"name": "k"}}',
            "<request>:2: pool: the key 'pool' is given twice in this mapping (first at line 1); "
            "give each key once",
        ),
        (
            "POST",
            "api/v1/pools",
            f"kind: pool\nversion: v0.1\npool: {{name: h}}\nlimits: {{max-gpus: {HUGE}}}\n",
            "<request>:4: limits.max-gpus: a whole number of 5,000 digits is not accepted "
            "(at most 100)",
        ),
    ],
    ids=["quota twice", "pool name twice", "json key twice", "huge max-gpus"],
)
async def test_pool_and_quota_documents_refuse_it_at_their_line(
    service, pools_dir, method, path, body, problem
):
    files = {p.name: p.read_text() for p in pools_dir.iterdir()}
    registry = service.ctx.state.registry
    with pytest.raises(GPUPoolError) as e:
        await service.admin().request(method, path, text=body, content_type="application/yaml")
    assert e.value.status == 400
    assert e.value.body["problems"] == [problem]
    assert {p.name: p.read_text() for p in pools_dir.iterdir()} == files
    assert service.ctx.state.registry is registry
