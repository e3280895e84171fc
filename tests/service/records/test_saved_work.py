"""Work saved before a stop (issue 31): ``POST api/v1/servers/saved`` keeps what a user's lab
saved on the server's open session in the ledger, durably (the answer comes after the commit),
on SQLite and PostgreSQL; only the server's own user or an admin may record it; bad input is a
400 that says what is wrong.

The truth is read from the database with the test's own SQL connection.
"""

from __future__ import annotations

import json

import pytest
from service_kit import delete_pod, start_pod
from sqlrows import sql
from waiting import async_wait_for

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.service import clock
from jupyter_gpupool.sim import SimCluster
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec

FAST = {"history_interval": 0.2}
SAVED = "api/v1/servers/saved"
T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def saved_rows(url: str) -> list[tuple]:
    return sql(
        url,
        'SELECT pod, "user", server, saved, saved_at, saved_paths, stopped, ended '
        "FROM server_sessions ORDER BY pod",
    )


async def running_session(service, url: str, user: str, server: str, pod: str) -> None:
    admission = await service.admin().admit(user=user, pools=["dev-pool"], gpus=1, server=server)
    await start_pod(service.cluster, admission, pod)

    async def opened() -> bool:
        return any(r[0] == pod and r[6] is None for r in saved_rows(url))

    await async_wait_for(opened, what=f"the ledger's session of {pod}", timeout=15)


async def post(client, body) -> tuple[int, dict]:
    try:
        answer = await client.request("POST", SAVED, json_body=body)
    except GPUPoolError as e:
        return e.status, dict(e.body or {"message": e.message})
    return answer.code, answer.json()


async def test_what_a_lab_saved_is_kept_on_the_servers_session(db_url, start_service, hub):
    service = await start_service(db_url=db_url, **FAST)
    await running_session(service, db_url, "alice", "big", "alice-big")
    alice = service.user("alice")
    paths = ["analysis.ipynb", "work/train.ipynb", "notes.md"]
    status, answer = await post(
        alice,
        {"server": "big", "count": 3, "paths": paths, "notice": {"kind": "idle", "deadline": 1}},
    )
    assert status == 200, answer
    assert (answer["user"], answer["server"], answer["pod"], answer["saved"]) == (
        "alice",
        "big",
        "alice-big",
        3,
    )
    # in the database when the answer came: no wait
    [row] = saved_rows(db_url)
    assert row[:4] == ("alice-big", "alice", "big", 3)
    assert row[4] == pytest.approx(answer["saved_at"])
    assert json.loads(row[5]) == paths
    assert row[6] is None  # still running

    # the stop closes the session; what was saved stays on it
    await delete_pod(service.cluster, "alice-big")

    async def closed() -> tuple | None:
        [r] = saved_rows(db_url)
        return r if r[6] is not None else None

    row = await async_wait_for(closed, what="the session closed", timeout=15)
    assert row[3] == 3 and json.loads(row[5]) == paths


async def test_only_the_servers_user_or_an_admin_records_it(db_url, start_service, hub):
    service = await start_service(db_url=db_url, **FAST)
    await running_session(service, db_url, "alice", "", "alice-nb")
    bob = service.user("bob")
    # bob may not speak for alice's server, and has none of his own running
    status, answer = await post(bob, {"user": "alice", "server": "", "count": 1})
    assert status == 403, answer
    assert "own servers only" in answer["message"]
    status, answer = await post(bob, {"server": "", "count": 1})
    assert status == 404, answer
    assert answer["message"] == "bob has no default server running"
    assert [r[3] for r in saved_rows(db_url)] == [None]
    # an admin names the user
    status, answer = await post(
        service.admin(), {"user": "alice", "server": "", "count": 1, "paths": ["a.ipynb"]}
    )
    assert status == 200, answer
    assert [r[3] for r in saved_rows(db_url)] == [1]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"server": "", "count": -1}, "count is the number of documents saved"),
        ({"server": "", "count": "3"}, "count is the number of documents saved"),
        ({"server": "", "count": True}, "count is the number of documents saved"),
        ({"server": ""}, "count is the number of documents saved"),
        ({"server": "", "count": 1, "paths": "a.ipynb"}, "paths is a list"),
        ({"server": "", "count": 1, "paths": ["a.ipynb", "b.ipynb"]}, "2 paths for 1 documents"),
        ({"server": 3, "count": 1}, "server is a server's name"),
        ({"server": "", "count": 1, "saved": 1}, "unknown fields: saved"),
        ([1, 2], "the body is a JSON object"),
    ],
)
async def test_bad_reports_are_refused_with_the_reason(start_service, hub, tmp_path, body, words):
    url = f"sqlite:///{tmp_path / 'gpupool.sqlite'}"
    service = await start_service(db_url=url, **FAST)
    await running_session(service, url, "alice", "", "alice-nb")
    status, answer = await post(service.user("alice"), body)
    assert status == 400, answer
    assert words in answer["message"]
    assert [r[3] for r in saved_rows(url)] == [None]


async def test_a_report_lands_on_the_server_it_names_not_the_users_newest(
    db_url, start_service, hub, monkeypatch
):
    """alice runs her default server, then a named one ten minutes later (the simulator's clock
    and the service's moved, so their starts differ for sure): what her default server's lab
    saved is kept on that server's session, and the named server's on its own."""
    t = [T0]
    monkeypatch.setattr(clock, "now", lambda: t[0])
    async with SimCluster(example_cluster_spec(), clock=lambda: t[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, **FAST)
        await running_session(service, db_url, "alice", "", "alice-nb")
        t[0] = T0 + 600
        await running_session(service, db_url, "alice", "big", "alice-big")
        alice = service.user("alice")
        notice = {"kind": "idle", "deadline": T0 + 900}
        status, answer = await post(
            alice, {"server": "", "count": 2, "paths": ["a.ipynb", "b.ipynb"], "notice": notice}
        )
        assert (status, answer["pod"]) == (200, "alice-nb"), answer
        rows = {r[0]: r for r in saved_rows(db_url)}
        assert (rows["alice-nb"][3], rows["alice-big"][3]) == (2, None)
        status, answer = await post(
            alice, {"server": "big", "count": 1, "paths": ["c.ipynb"], "notice": notice}
        )
        assert (status, answer["pod"]) == (200, "alice-big"), answer
        rows = {r[0]: r for r in saved_rows(db_url)}
        assert (rows["alice-nb"][3], rows["alice-big"][3]) == (2, 1)
