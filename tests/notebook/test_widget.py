"""LaunchPanel without a kernel: a dummy comm stands in for the frontend (as ipywidgets' own
tests do), the hub and service are scripted (fakehub.py)."""

from __future__ import annotations

import asyncio
import time

import ipywidgets as widgets
import pytest
from fakehub import FAILING_GPUS, LAUNCH_OPTIONS, REFUSAL, REFUSED_GPUS, WAITING_GPUS
from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm
from waiting import async_wait_for

from jupyter_gpupool.notebook import session as session_module
from jupyter_gpupool.notebook.widgets import LaunchPanel
from jupyter_gpupool.notebook.widgets.panel import (
    FAILED,
    IDLE,
    LAUNCHING,
    QUEUE_WORDS,
    READY,
)


@pytest.fixture(autouse=True)
def dummy_comm():
    setup_test_comm()
    yield
    teardown_test_comm()


@pytest.fixture
async def panel(hub_env):
    panel = LaunchPanel()
    await panel.refresh()
    yield panel
    panel.close()


def bars(panel):
    return {
        bar.name: (bar._bar.value, bar._bar.max, bar._words.value)
        for bar in panel._pool_box.children
    }


def test_a_new_panel_is_idle_and_says_where_this_server_runs(hub_env):
    panel = LaunchPanel()
    assert panel.state == IDLE and panel.pools == [] and panel.order == []
    assert "this server: 2 \u00d7 A100-80G · training-pool" in panel._title.value
    assert panel._stop.disabled and not panel._launch.disabled
    panel.close()


async def test_refresh_shows_pools_as_bars_and_takes_the_default_order(panel):
    assert [p["name"] for p in panel.pools] == [p["name"] for p in LAUNCH_OPTIONS["pools"]]
    assert bars(panel) == {
        "compute-pool": (0, 1, "no quota · CPU only"),
        "dev-pool": (
            1,
            4,
            "3 of 4 GPUs free · 0 within quota, 4 with borrowing · borrowing possible (may be reclaimed)",
        ),
        "training-pool": (6, 16, "10 of 16 GPUs free · 4 GPUs within quota · free"),
    }
    assert panel.order == ["training-pool", "dev-pool"]
    assert panel._picker.value == ["training-pool", "dev-pool"]
    # listed as the spawn form lists them (the service's order): the default order first
    assert list(bars(panel)) == ["training-pool", "dev-pool", "compute-pool"]
    assert panel._picker.allowed_tags == ["training-pool", "dev-pool", "compute-pool"]
    assert list(panel._gpus.options) == list(range(0, 9))
    assert [v for _, v in panel._gpu_type.options] == ["", "A100-80G", "RTX4090-24G"]
    assert panel._name.placeholder == "training-pool-1gpu"


async def test_a_second_refresh_updates_the_bars_in_place(panel):
    before = panel._pool_box.children
    await panel.refresh()
    assert panel._pool_box.children == before  # the same widgets, not new ones
    panel.pools = [p for p in panel.pools if p["name"] != "compute-pool"]
    assert list(bars(panel)) == ["training-pool", "dev-pool"]
    gone = next(bar for bar in before if bar.name == "compute-pool")
    assert gone.comm is None  # compute-pool's bar was closed, not leaked


async def test_the_children_change_the_traits(panel):
    panel._picker.value = ["dev-pool", "compute-pool"]
    panel._gpus.value = 2
    panel._gpu_type.value = "RTX4090-24G"
    panel._name.value = "  mine "
    assert panel.order == ["dev-pool", "compute-pool"]
    assert (panel.gpus, panel.gpu_type, panel.server_name) == (2, "RTX4090-24G", "mine")
    assert panel.user_options() == {
        "pools": ["dev-pool", "compute-pool"],
        "gpus": 2,
        "gpu_type": "RTX4090-24G",
    }
    # and the traits change the children
    panel.order = ["training-pool"]
    panel.gpus = 4
    assert panel._picker.value == ["training-pool"] and panel._gpus.value == 4
    panel.server_name = ""
    assert panel._name.placeholder == "training-pool-4gpu"


async def test_launch_click_follows_the_progress_and_links_the_server(panel, hub_env):
    panel._picker.value = ["dev-pool"]
    panel._name.value = "small"
    seen = []
    panel.observe(lambda c: seen.append(c["new"]), "progress")
    shown = []  # every status line the frontend is sent
    panel._status.observe(lambda c: shown.append(c["new"]), "value")
    panel._launch.click()
    assert panel._launch.disabled  # while it starts
    await panel.wait()
    assert hub_env.started == [("small", {"pools": ["dev-pool"], "gpus": 1})]
    assert seen == [10, 50, 100]
    assert (panel.state, panel.launched, panel.url) == (READY, "small", "/user/alice/small/")
    # where it went, in the service's words: alice has no guaranteed GPUs in dev-pool
    assert panel.message == "ready in dev-pool, over quota: may be reclaimed"
    assert (
        "href='/user/alice/small/'" in panel._status.value and "Open small" in panel._status.value
    )
    assert panel._bar.value == 100 and panel._bar.bar_style == "success"
    assert not panel._stop.disabled
    # never "ready in …" without the link (a browser reading it then would find no link)
    assert [w for w in shown if w.startswith("ready in")]
    assert all("Open small" in w for w in shown if w.startswith("ready in")), shown
    panel._stop.click()
    await panel.wait()
    assert hub_env.stopped == ["small"]
    assert (panel.state, panel.launched, panel.message) == (IDLE, "", "server 'small' stopped")
    assert panel._stop.disabled


async def test_a_launch_within_quota_says_so(panel):
    # ml-research is guaranteed 10 GPUs of training-pool, of which alice and bob use 6
    panel.order, panel.gpus, panel.server_name = ["training-pool"], 2, "mine"
    await panel.launch()
    assert panel.message == "ready in training-pool, within quota"


async def test_the_queue_checkbox_asks_to_wait_in_line(panel):
    """The checkbox (the spawn form's words) and the ``queue`` trait follow each other; when
    ticked, the launch's user_options ask to wait in line."""
    assert panel._queue.description == "wait in line if no pool can take it now"
    assert not panel.queue and "queue" not in panel.user_options()
    panel._queue.value = True
    assert panel.queue
    assert panel.user_options() == {
        "pools": ["training-pool", "dev-pool"],
        "gpus": 1,
        "queue": True,
    }
    panel.queue = False
    assert panel._queue.value is False and "queue" not in panel.user_options()


async def test_a_launch_waiting_in_line_shows_its_place_then_the_server(panel, hub_env):
    """Ticked, a launch no pool can take now waits in line: the status line says its place in
    the hub's words, at each change, then the start goes on to ready as any other."""
    panel._picker.value = ["dev-pool"]
    panel._gpus.value = 2
    panel._name.value = "patient"
    panel._queue.value = True
    shown = []  # every status line the frontend is sent
    panel._status.observe(lambda c: shown.append(c["new"]), "value")
    await panel.launch()
    assert hub_env.started == [("patient", {"pools": ["dev-pool"], "gpus": 2, "queue": True})]
    waiting = [w for w in shown if w.startswith("waiting for")]
    assert waiting == [
        "waiting for 2 GPUs: position 2 in line for dev-pool",
        "waiting for 2 GPUs: position 1 in line for dev-pool",
    ]
    # then admitted, and ready as any launch
    assert shown.index(waiting[-1]) < shown.index("admitted to dev-pool within quota (1 GPU)")
    assert (panel.state, panel.launched) == (READY, "patient")
    assert panel.message == "ready in dev-pool, over quota: may be reclaimed"


async def test_stop_takes_a_launch_out_of_the_line(panel, hub_env):
    """While a launch waits in line Stop is enabled for it (Launch is not); Stop stops the
    pending start, which leaves the line, and the panel says it stopped (not that the start
    failed)."""
    panel.order, panel.gpus, panel.server_name = ["training-pool"], WAITING_GPUS, "patient"
    panel.queue = True
    panel._launch.click()

    def waiting() -> bool:
        return (
            panel.message
            == f"waiting for {WAITING_GPUS} GPUs: position 1 in line for training-pool"
        )

    await async_wait_for(waiting, what="the launch waiting in line", timeout=10)
    assert panel.state == LAUNCHING and "patient" in hub_env.line
    assert panel._launch.disabled and not panel._stop.disabled
    assert panel._stop.tooltip == "stop patient (it leaves the line if it waits)"
    panel._stop.click()
    await panel.wait()
    assert hub_env.stopped == ["patient"] and hub_env.line == {} and hub_env.admitted == []
    assert (panel.state, panel.message) == (IDLE, "server 'patient' stopped")
    assert not panel._launch.disabled and panel._stop.disabled
    assert panel.launched == ""


async def test_a_launch_waiting_in_line_is_followed_as_long_as_it_waits(
    panel, hub_env, monkeypatch
):
    """A start in line may wait far longer than a start is followed (the spawner's start
    timeout ends it, which the docs advise to make long): with a short follow for starts
    that do not wait, a launch waiting longer than that is still followed to ready."""
    monkeypatch.setattr(session_module, "FOLLOW_TIMEOUT", 0.3)
    panel.order, panel.gpus, panel.server_name = ["dev-pool"], WAITING_GPUS, "patient"
    panel.queue = True
    began = time.monotonic()
    panel._launch.click()
    await async_wait_for(
        lambda: (
            panel.state != LAUNCHING  # it ended: the asserts below say how
            or (
                panel.message.startswith("waiting for")
                and time.monotonic() > began + 3 * session_module.FOLLOW_TIMEOUT
            )
        ),
        what="the launch in line for longer than a start that does not wait is followed",
        timeout=10,
    )
    assert (panel.state, panel.message) == (
        LAUNCHING,
        f"waiting for {WAITING_GPUS} GPUs: position 1 in line for dev-pool",
    )
    hub_env.admit("patient")  # GPUs came free
    await panel.wait()
    assert (panel.state, panel.launched, hub_env.admitted) == (READY, "patient", ["patient"])


async def test_stop_is_enabled_when_the_typed_name_is_a_running_server(panel, hub_env):
    assert panel.running == []  # the hub runs only this server, which Stop never stops
    panel._name.value = ""
    assert panel._stop.disabled
    panel._name.value = "small"
    assert panel._stop.disabled and panel._stop.tooltip == "small is not running"
    await panel.launch()
    assert not panel._stop.disabled and panel._stop.tooltip == "stop small"
    panel._name.value = "other"
    assert panel._stop.disabled
    # a server started elsewhere (another notebook, the hub's home page) once the hub says so
    hub_env.servers["elsewhere"] = {"name": "elsewhere", "ready": True}
    panel._name.value = "elsewhere"
    assert panel._stop.disabled
    await panel.refresh()
    assert panel.running == ["elsewhere", "small"]
    assert not panel._stop.disabled
    panel._stop.click()
    await panel.wait()
    assert hub_env.stopped == ["elsewhere"]
    assert panel.running == ["small"] and panel._stop.disabled
    assert panel.launched == "small"  # the launched server is still there to open
    panel._name.value = ""  # no name: the server launched last
    assert not panel._stop.disabled and panel._stop.tooltip == "stop small"


def test_no_part_of_the_panel_is_cut_in_a_narrow_notebook(hub_env):
    panel = LaunchPanel()
    panel.pools = LAUNCH_OPTIONS["pools"]

    def tree(widget):
        yield widget
        for child in getattr(widget, "children", ()):
            yield from tree(child)

    parts = list(tree(panel))
    # Labels end in an ellipsis where they do not fit; the panel's words are HTML, which wraps
    assert not [w for w in parts if isinstance(w, widgets.Label)]
    # descriptions as wide as their words, not cut at the default 80px
    described = [
        w
        for w in parts
        if getattr(w, "description", "")
        and hasattr(w.style, "description_width")
        and not isinstance(w, widgets.Checkbox)
    ]
    assert {w.description for w in described} == {"GPUs", "GPU type", "Server name"}
    assert {w.style.description_width for w in described} == {"initial"}
    # the checkbox's words beside its box, not after an indent, as wide as the panel (a
    # Checkbox is 300px wide by default)
    [queue] = [w for w in parts if isinstance(w, widgets.Checkbox)]
    assert (queue.description, queue.indent, queue.layout.width) == (QUEUE_WORDS, False, "auto")
    # rows of several parts wrap instead of running past the edge
    rows = [w for w in parts if isinstance(w, widgets.HBox)]
    assert rows and {w.layout.flex_flow for w in rows} == {"row wrap"}
    panel.close()


async def test_a_refused_launch_shows_why(panel, hub_env):
    panel.pools = [dict(p, largest_node_gpus=128) for p in panel.pools]
    panel.gpus = REFUSED_GPUS
    result = await panel.launch()
    assert not result.ready
    assert (panel.state, panel.message) == (FAILED, REFUSAL)
    assert panel._bar.bar_style == "danger"
    assert not panel._launch.disabled


async def test_a_failed_start(panel):
    panel.pools = [dict(p, largest_node_gpus=128) for p in panel.pools]
    panel.gpus = FAILING_GPUS
    await panel.launch()
    assert (panel.state, panel.message) == (FAILED, "Spawn failed: no luck")


async def test_it_refreshes_while_shown(panel, hub_env):
    panel.refresh_interval = 0.05
    asked = lambda: sum(1 for r in hub_env.requests if r[1].endswith("launch-options"))  # noqa: E731
    before = asked()
    panel._view_count = 1  # a frontend shows it
    refresher = panel._refresher
    await async_wait_for(
        lambda: asked() >= before + 3, what="three refreshes while the panel is shown"
    )
    panel._view_count = 0  # and no longer
    # nothing is left that could refresh: the loop is cancelled, and no other one runs
    assert panel._refresher is None and refresher is not None
    await asyncio.wait({refresher}, timeout=10)
    assert refresher.cancelled()
    loops = [t for t in asyncio.all_tasks() if "_refresh_loop" in repr(t.get_coro())]
    assert loops == []
    # a request of ours reaches the hub after any the loop had sent before it was stopped;
    # from then on only ours count
    await panel.refresh()
    stopped = asked()
    await panel.refresh()
    assert asked() == stopped + 1


async def test_without_the_service_the_message_says_so(hub_env, monkeypatch):
    monkeypatch.delenv("GPUPOOL_SERVICE_URL")
    panel = LaunchPanel()
    await panel.refresh()
    assert "GPUPOOL_SERVICE_URL is not set" in panel.message
    panel.close()


def test_gpus_must_not_be_negative(hub_env):
    panel = LaunchPanel()
    with pytest.raises(ValueError, match="must not be negative"):
        panel.gpus = -1
    panel.close()
