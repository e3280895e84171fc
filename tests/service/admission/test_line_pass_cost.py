"""A pass's cost follows the entries that can move (issue 39): once no pool of the line can take
another request, the entries behind are not looked at, however many wait.

The truth is what the API answers (who was admitted, the line's places as ``GET api/v1/queue``
lists them); the looks are the line's calls of :meth:`Pass.worth_deciding
<jupyter_gpupool.core.admission.queue.Pass.worth_deciding>`, its first look at an entry.
"""

from __future__ import annotations

from typing import Any

import pytest
from service_kit import delete_pod, start_pod
from waiting import async_wait_for

from jupyter_gpupool.core.admission.queue import Pass, PlaceCount

WAITING = 40


async def test_one_gpu_free_for_a_long_line_looks_at_its_head_only(
    start_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dev-pool's 4 GPUs are taken and 40 users wait for one each; one server stops: the pass
    admits the first in line, looks at no one behind it, and the 39 keep their order, each a
    place ahead."""
    service = await start_service()
    admin = service.admin()
    for i in range(4):
        a = await admin.admit(user=f"owner{i}", groups=[], pools=["dev-pool"], gpus=1)
        await start_pod(service.cluster, a, f"owner{i}-nb")
    ids = []
    for i in range(WAITING):
        queued = await admin.admit(user=f"u{i}", groups=[], pools=["dev-pool"], gpus=1, queue=True)
        assert queued["queued"], queued
        ids.append(queued["id"])
    looks = []
    real = Pass.worth_deciding

    def counted(self: Pass, w: Any, s: Any, may_reclaim: Any) -> bool:
        looks.append(w.id)
        return real(self, w, s, may_reclaim)

    monkeypatch.setattr(Pass, "worth_deciding", counted)
    await delete_pod(service.cluster, "owner0-nb")
    line = service.ctx.desk.line
    await async_wait_for(lambda: ids[0] not in line.waiting, what="the head admitted", timeout=10)
    assert (await admin.admission(ids[0]))["state"] == "admitted"
    assert looks == [ids[0]], "the pass looked behind the head of a full pool"
    listed = (await admin.queue())["queue"]
    assert [(r["id"], r["position"]) for r in listed] == [
        (aid, n) for n, aid in enumerate(ids[1:], start=1)
    ]


async def test_a_request_joining_behind_a_long_line_is_placed_without_counting_the_line_again(
    start_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dev-pool's 4 GPUs are taken and 40 users wait; a 41st joins behind them: its place (41)
    is counted on from the last count, one request counted, not the 41 of the line; nobody
    else's place moved, so questions held about the others are not woken; the line lists the
    places a count of the whole line gives."""
    service = await start_service()
    admin = service.admin()
    for i in range(4):
        a = await admin.admit(user=f"owner{i}", groups=[], pools=["dev-pool"], gpus=1)
        await start_pod(service.cluster, a, f"owner{i}-nb")
    ids = []
    for i in range(WAITING):
        queued = await admin.admit(user=f"u{i}", groups=[], pools=["dev-pool"], gpus=1, queue=True)
        ids.append(queued["id"])
    line = service.ctx.desk.line
    line.places  # noqa: B018 - counted
    counted = []
    real = PlaceCount.add

    def add(self: PlaceCount, request: Any, state: Any) -> int:
        counted.append(request.user)
        return real(self, request, state)

    monkeypatch.setattr(PlaceCount, "add", add)
    move = line.next_move()
    last = await admin.admit(user="late", groups=[], pools=["dev-pool"], gpus=1, queue=True)
    assert last["position"] == WAITING + 1, last
    assert counted == ["late"], "the line was counted again for a request joining behind it"
    assert line.next_move() is move, "questions about the others were woken"
    ids.append(last["id"])
    listed = (await admin.queue())["queue"]
    assert [(r["id"], r["position"]) for r in listed] == [
        (aid, n) for n, aid in enumerate(ids, start=1)
    ]
