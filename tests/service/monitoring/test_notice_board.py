"""The notice board (issue 30): another rule (a booking's reclaim, later) adds its provider with
``ctx.notices.add`` and its notices reach ``GET api/v1/servers`` beside the built-in ones, most
urgent first; a provider that fails is logged and left out, and the list still answers."""

from __future__ import annotations

import logging

from service_kit import start_pod

from jupyter_gpupool.core.time.notices import REPORT, STOP, Notice


async def test_a_provider_added_later_reaches_the_servers_list_most_urgent_first(service, caplog):
    admin = service.admin()
    a = await admin.admit(user="carol", groups=["students"], pools=["dev-pool"], gpus=1)
    await start_pod(service.cluster, a, "carol-nb")
    await service.settled()
    [row] = await admin.servers(pool="dev-pool")
    assert (row["notices"], row["notice"]) == ([], None)

    later = Notice("booking", "a booking starts: this server borrows its GPUs", 2e9, STOP)
    soon = Notice("booking", "a second booking", 1e9, STOP)
    report = Notice("budget", "your budget is 92% spent", 5e8, REPORT)
    service.ctx.notices.add(lambda s, now: later if s.user == "carol" else None)
    service.ctx.notices.add(lambda s, now: report)
    service.ctx.notices.add(lambda s, now: soon)

    def broken(s, now):
        raise RuntimeError("a provider's bug")

    service.ctx.notices.add(broken)
    with caplog.at_level(logging.ERROR):
        [row] = await admin.servers(pool="dev-pool")
    # stops first, by deadline; reports after; the broken provider left out and logged
    assert row["notices"] == [soon.as_json(), later.as_json(), report.as_json()]
    assert row["notice"] == soon.as_json()
    assert "A notice provider failed for default/carol-nb" in caplog.text
    [mine] = await service.user("carol", ["students"]).servers()
    assert mine["notice"] == soon.as_json()
