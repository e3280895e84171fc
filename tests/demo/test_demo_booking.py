"""The booking scenario of issue 30 in `gpupool demo`, in real time: a booking for group ml-ops
of 2 GPUs of dev-pool starting in 60 s; alice borrows them, is warned 30 s before (the demo's
``booking_warning``) and stopped at the start; carol (ml-ops) is then admitted within the
booking; all within two minutes.

dev-pool is one node of 4 RTX4090-24G, open to everyone with a limit of 4 and no guarantee
(examples/pools/quotas.yaml): alice's 4-GPU server borrows them all. Truth from outside the
service's rules: the hub's server models, the cluster's pods through the Kubernetes API, and
the time on the test's own clock. Run on the simulator only (the same code paths as the queue
scenario on the real control plane; the real tier would add two minutes of CI).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from clusters import open_demo
from demo_hub import DemoHub
from waiting import async_wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVICE = "/services/gpupool/api/v1"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DemoHub]:
    state = tmp_path_factory.mktemp("gpupool-demo-booking")
    async with open_demo("simulated", state) as (cluster, demo):
        hub = DemoHub(cluster, demo)
        for user in ("alice", "carol"):
            await hub.api("POST", f"/hub/api/users/{user}", {})
        try:
            yield hub
        finally:
            hub.http.close()


def local(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


async def alice_row(hub: DemoHub) -> dict[str, Any] | None:
    code, answer = await hub.api("GET", f"{SERVICE}/servers?pool=dev-pool")
    assert code == 200, answer
    return next((r for r in answer["servers"] if r["user"] == "alice"), None)


async def test_the_issue_scenario_alice_is_warned_then_stopped_and_carol_admitted_within(hub):
    code, _ = await hub.api(
        "POST", "/hub/api/users/alice/server", {"pools": ["dev-pool"], "gpus": 4}
    )
    assert code in (201, 202)
    await hub.wait_ready("alice")

    made = time.time()
    start = float(int(made) + 60)
    booking = {
        "kind": "booking",
        "version": "v0.1",
        "booking": {"name": "ml-ops-lab", "description": "the demo's booking scenario"},
        "pool": "dev-pool",
        "gpus": 2,
        "groups": ["ml-ops"],
        "window": {"once": {"start": local(start), "end": local(start + 600)}, "timezone": "UTC"},
    }
    code, answer = await hub.api("POST", f"{SERVICE}/bookings", booking)
    assert code == 201, answer

    # nothing is said before the warning, then the notice names the booking and its start
    row = await alice_row(hub)
    assert row is not None and (row.get("notice") or {}).get("kind") != "booking"

    async def warned() -> dict[str, Any] | None:
        row = await alice_row(hub)
        notice = (row or {}).get("notice") or {}
        return notice if notice.get("kind") == "booking" else None

    notice = await async_wait_for(warned, what="alice's booking notice", timeout=70, interval=0.5)
    warned_at = time.time()
    assert 25 <= start - warned_at <= 31, f"warned {start - warned_at:.1f} s before the start"
    assert notice["deadline"] == start and notice["action"] == "stop"
    assert "ml-ops-lab" in notice["words"]
    assert await hub.pod("alice") is not None  # warned, not stopped

    async def alice_gone() -> bool:
        return await hub.pod("alice") is None and not await hub.server("alice")

    await async_wait_for(alice_gone, what="alice's server stopped", timeout=60, interval=0.2)
    stopped_at = time.time()
    assert start <= stopped_at <= start + 15, f"stopped {stopped_at - start:.1f} s after the start"

    code, _ = await hub.api(
        "POST", "/hub/api/users/carol/server", {"pools": ["dev-pool"], "gpus": 2}
    )
    assert code in (201, 202)
    server = await hub.wait_ready("carol")
    done = time.time()
    assert server["user_options"]["pool"] == "dev-pool"
    pod = await hub.pod("carol")
    assert pod is not None
    assert pod["metadata"]["annotations"]["gpupool.jupyter.org/charged"] == "booking:ml-ops-lab"
    print(
        f"booking made; alice warned {start - warned_at:.1f} s before its start, stopped "
        f"{stopped_at - start:.1f} s after it; carol ready {done - made:.1f} s after the booking"
    )
    assert done - made < 120, f"the scenario took {done - made:.1f} s"
