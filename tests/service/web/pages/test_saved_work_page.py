"""*My GPUs* says what a user's lab saved before each stop (issue 31): "3 notebooks saved before
the stop" where the lab reported it (``POST api/v1/servers/saved``), "no lab open: nothing to
save" for a stop by the service that no lab reported, nothing for a user's own stop; only the
user's own servers."""

from __future__ import annotations

from service_kit import delete_pod, start_pod
from test_pages import Browser, text
from test_records import until
from test_report_pages import table_rows

from jupyter_gpupool.service.web.auth import USE_SCOPE


async def run(service, url: str, user: str, server: str, pod: str) -> None:
    admission = await service.admin().admit(user=user, pools=["dev-pool"], gpus=1, server=server)
    await start_pod(service.cluster, admission, pod)
    await until(
        url,
        f"SELECT pod FROM server_sessions WHERE pod = '{pod}' AND stopped IS NULL",
        bool,
        f"{pod}'s session open",
    )


async def stop(service, url: str, pod: str, culled: bool) -> None:
    if culled:  # as the idle watch does before it asks the hub to stop the server
        service.ctx.records.ledger.culled(service.ctx.state.index.server("default", pod))
    await delete_pod(service.cluster, pod)
    await until(
        url,
        f"SELECT ended FROM server_sessions WHERE pod = '{pod}' AND stopped IS NOT NULL",
        bool,
        f"{pod}'s session closed",
    )


async def test_my_gpus_says_what_was_saved_before_each_stop(start_service, tmp_path):
    url = f"sqlite:///{tmp_path / 'gpupool.sqlite'}"
    service = await start_service(db_url=url, history_interval=0.2)
    # one at a time: alice may hold 2 GPUs in dev-pool
    await run(service, url, "alice", "big", "alice-big")
    answer = await service.user("alice").request(
        "POST",
        "api/v1/servers/saved",
        json_body={"server": "big", "count": 3, "paths": ["a.ipynb", "b.ipynb", "c/d.ipynb"]},
    )
    assert answer.code == 200, answer.body
    await stop(service, url, "alice-big", culled=True)
    for server, pod, culled in (("small", "alice-small", True), ("mine", "alice-mine", False)):
        await run(service, url, "alice", server, pod)
        await stop(service, url, pod, culled)
    await run(service, url, "bob", "", "bob-nb")
    await stop(service, url, "bob-nb", culled=True)

    browser = Browser(service, service.hub.user("alice", [], [USE_SCOPE]))
    try:
        status, html, _ = await browser.get("")
    finally:
        browser.http.close()
    assert status == 200
    shown = sorted(
        (text(c["server"]).strip(), text(c["how"]).strip(), text(c["saved"]).strip())
        for c in table_rows(html, "my-stops").values()
    )
    idle = "stopped by the service: its GPUs stayed idle"
    assert shown == [
        ("big", idle, "3 notebooks saved before the stop"),
        ("mine", "stopped (by you, an admin, or unseen)", ""),
        ("small", idle, "no lab open: nothing to save"),
    ], shown  # bob's is not hers
    # the paths are in the cell's title
    assert 'title="a.ipynb, b.ipynb, c/d.ipynb"' in html
