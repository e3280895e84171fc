"""Every page reads at a laptop's width and at a phone's (issue 28), in headless Chromium against
a running ``gpupool demo`` with servers running, GPU-hours in the ledger and a request waiting in
line (the pools page's "1 waiting" badge, the widest its table gets).

At 1024, 1280 and 1366 px wide the page never scrolls sideways and every table fits whole; at
390 px (a phone) the page still never scrolls sideways, and a table (or the usage chart) too wide
for the screen scrolls sideways in its own box, all its columns reachable there.
"""

from __future__ import annotations

import re

import pytest
from browser_setup import expect, log_in, shoot
from test_browser import SVC, browser, gpu_pod, kube  # noqa: F401 - browser: the fixture
from waiting import wait_for

from jupyter_gpupool.demo.testing import DemoProcess
from jupyter_gpupool.service.web import routes
from jupyter_gpupool.service.web.pages.base import PageHandler

#: Each page of the route table (its pattern), who looks at it and the path visited.
PAGES = {
    "": ("alice", ""),
    "pools": ("admin", "pools"),
    "pools/([^/]+)": ("admin", "pools/dev-pool"),
    "nodes": ("admin", "nodes"),
    "quotas": ("admin", "quotas"),
    "reports": ("admin", "reports?by=user&since=30d"),
    "idle": ("admin", "idle"),
    "bookings": ("admin", "bookings"),
    "admin": ("admin", "admin"),
    "health": ("admin", "health"),
    "admin/pools/([^/]+)/delete": ("admin", "admin/pools/dev-pool/delete"),
}
LAPTOPS, PHONE = (1024, 1280, 1366), 390

#: Where each table and the usage chart is: whole on the screen, or in a box that scrolls
#: sideways (overflow-x auto or scroll) far enough to show all of it.
LAYOUT = """() => {
  const inner = window.innerWidth, problems = [], scrolled = [];
  const name = (e) => e.id || (e.tagName === 'svg' ? 'usage chart' : e.closest('[id]').id);
  for (const e of document.querySelectorAll('table, svg.gpupool-svg')) {
    if (!e.checkVisibility()) continue;
    const r = e.getBoundingClientRect();
    let box = e.parentElement;
    while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    if (r.left >= -0.5 && r.right <= inner + 0.5 && (!box || box.scrollWidth <= box.clientWidth)) continue;
    const b = box && box.getBoundingClientRect();
    if (box && box.scrollWidth > box.clientWidth && b.left >= -0.5 && b.right <= inner + 0.5
        && box.scrollWidth >= Math.floor(r.width)) {
      scrolled.push(name(e));
    } else {
      problems.push(`${name(e)}: ${Math.round(r.left)}..${Math.round(r.right)} px, `
                    + (box ? `its box scrolls ${box.scrollWidth} px in ${box.clientWidth}` : 'in no box that scrolls'));
    }
  }
  return {page: document.documentElement.scrollWidth, inner, problems, scrolled};
}"""


def test_the_width_test_visits_every_page_of_the_route_table():
    pages = {
        pattern.removeprefix(SVC)
        for pattern, handler, _ in routes.route_table(SVC)
        if issubclass(handler, PageHandler) and "get" in vars(handler)
    }
    assert pages - {"pools/usage.svg"} == set(PAGES)  # the chart alone is on the pools page


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo with bob's server filling dev-pool, alice's on training-pool (both counted in
    the ledger) and alice's request for 2 of dev-pool's GPUs waiting in line."""
    with DemoProcess.start(tmp_path_factory.mktemp("widths-demo")) as demo:
        api = kube(demo)
        for user, pool, gpus in (("bob", "dev-pool", 4), ("alice", "training-pool", 1)):
            api.create_namespaced_pod("default", gpu_pod(demo, user, pool, gpus))
        api.api_client.close()
        wait_for(
            lambda: (
                {"alice", "bob"}
                <= {
                    r["subject"]
                    for r in demo.api("GET", SVC + "api/v1/reports/gpu-hours?by=user")[1]["rows"]
                }
            ),
            timeout=60,
            interval=0.5,
            what="alice's and bob's sessions in the ledger",
        )
        keep_waiting(demo)
        yield demo


WAITING: dict[str, str] = {}


def keep_waiting(demo) -> None:
    """alice's request for 2 of dev-pool's GPUs in line: asked for again (an entry nobody asks
    for within the service's queue heartbeat, 60 s, is dropped, and a slow run of the widths
    outlasts it), or put in line again if it was dropped."""
    if "id" in WAITING:
        status, answer = demo.api("GET", SVC + "api/v1/admissions/" + WAITING["id"])
        if status == 200 and answer.get("state") == "queued":
            return
    status, waiting = demo.api(
        "POST",
        SVC + "api/v1/admissions",
        {"user": "alice", "pools": ["dev-pool"], "gpus": 2, "server": "big", "queue": True},
    )
    assert status == 202, waiting
    WAITING["id"] = waiting["id"]


def layout(page, demo, path):
    page.goto(demo.url + SVC + path)
    # the first visit goes through the hub's OAuth and comes back
    page.wait_for_url(re.compile(re.escape(demo.url + SVC) + ".*"))
    page.wait_for_load_state("load")
    return page.evaluate(LAYOUT)


@pytest.mark.parametrize("width", [*LAPTOPS, PHONE])
def test_no_page_scrolls_sideways_and_every_column_can_be_reached(browser, demo, width):  # noqa: F811
    pages = {}
    for user in ("alice", "admin"):
        context = browser.new_context(viewport={"width": width, "height": 800})
        context.set_default_timeout(20_000)
        pages[user] = context.new_page()
        log_in(pages[user], demo.url, user)
    try:
        admin = pages["admin"]
        seen = {}
        for who, path in PAGES.values():
            if path == "pools":
                keep_waiting(demo)
            seen[path] = layout(pages[who], demo, path)
            if path == "pools":  # the widest row: a status with the waiting badge beside it
                badge = admin.locator('#pools tr[data-key="dev-pool"] .gpupool-waiting')
                expect(badge).to_have_text("1 waiting")
                shoot(admin, f"pools-{width}")
        for path, found in seen.items():
            assert found["inner"] == width
            assert found["page"] <= width, f"{path or 'My GPUs'} is {found['page']} px wide"
            assert found["problems"] == [], f"{path or 'My GPUs'}: cut off at {width} px"
            if width in LAPTOPS:
                assert found["scrolled"] == [], f"{path or 'My GPUs'}: scrolls at {width} px"
        if width == PHONE:  # the wide tables are there, scrolled in their box
            assert {"pools", "usage chart"} <= set(seen["pools"]["scrolled"])
            assert "node-table" in seen["nodes"]["scrolled"]
            assert "my-pools" in seen[""]["scrolled"]
    finally:
        for page in pages.values():
            page.context.close()
