"""Issue 40: the pages fit 1,024 px (and 1,400 px) with a MIG slice running, in headless Chromium
against a running ``gpupool demo``: alice's server on a 1g.10gb instance (its GPUs in words, the
widest a servers table gets), bob's on whole GPUs.

On each page touched (My GPUs, a pool's page, the nodes page with every node's labels open,
the health page, the other admin pages for their navigation, and the spawn form) no table is
wider than its box (its ``scrollWidth`` against its container's ``clientWidth``), the page never
scrolls sideways, and the hub's navigation bar keeps one line. Beyond that: the admin's Stop
button is on the screen, a label breaks only between its parts, the nodes page is a row per node,
and the spawn form is one line per shape, with what isolation means said once.
"""

from __future__ import annotations

import re

import pytest
from browser_setup import chromium, expect, log_in, shoot
from test_browser import SVC, gpu_pod, kube
from waiting import wait_for

from jupyter_gpupool.demo.testing import DemoProcess

WIDTHS = (1024, 1400)
SLICE = {"pool": "training-pool", "shape": "mig-1g.10gb"}

#: Every visible table against its container, the page's width, and the nav bar's lines.
FIT = """() => {
  const inner = window.innerWidth, problems = [];
  for (const t of document.querySelectorAll('table')) {
    if (!t.checkVisibility()) continue;
    const box = t.parentElement, r = t.getBoundingClientRect();
    const name = t.id || t.closest('[id]').id;
    if (t.scrollWidth > box.clientWidth + 1)
      problems.push(`${name}: ${t.scrollWidth} px in a ${box.clientWidth} px box`);
    if (r.right > inner + 0.5) problems.push(`${name}: ends at ${Math.round(r.right)} px`);
  }
  const tops = [...document.querySelectorAll('nav.navbar .nav-link, nav.navbar .btn')]
    .filter((e) => e.checkVisibility()).map((e) => e.getBoundingClientRect().top);
  return {page: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
          inner, problems, navLines: tops.length ? Math.max(...tops) - Math.min(...tops) : 0};
}"""

#: The parts of the labels (the text between two <wbr>s) that a line break cuts.
CUT_LABELS = """() => {
  const cut = [];
  for (const chip of document.querySelectorAll('.gpupool-label')) {
    for (const part of chip.childNodes) {
      if (part.nodeType !== Node.TEXT_NODE || !part.textContent) continue;
      const range = document.createRange();
      range.selectNodeContents(part);
      if (range.getClientRects().length > 1) cut.push(part.textContent);
    }
  }
  return cut;
}"""


#: How many lines an element's text takes (its line boxes' distinct tops).
LINES = """(e) => {
  const range = document.createRange();
  range.selectNodeContents(e);
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("fit-demo")) as demo:
        api = kube(demo)
        api.create_namespaced_pod("default", gpu_pod(demo, "alice", SLICE, 1))
        api.create_namespaced_pod("default", gpu_pod(demo, "bob", "dev-pool", 2))
        api.api_client.close()
        wait_for(
            lambda: (
                len(
                    [
                        s
                        for s in demo.api("GET", SVC + "api/v1/servers")[1]["servers"]
                        if s["state"] == "running"
                    ]
                )
                == 2
            ),
            timeout=60,
            interval=0.5,
            what="alice's slice and bob's server running",
        )
        yield demo


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def visit(page, demo, path):
    page.goto(demo.url + path)
    if path.startswith(SVC):  # the first visit goes through the hub's OAuth and comes back
        page.wait_for_url(re.compile(re.escape(demo.url + SVC) + ".*"))
    page.wait_for_load_state("load")
    return page.evaluate(FIT)


def fits(found, what, width):
    assert found["inner"] == width
    assert found["page"] <= width, f"{what} is {found['page']} px wide at {width} px"
    assert found["problems"] == [], f"{what} at {width} px"
    assert found["navLines"] < 10, f"{what}: the nav bar wraps at {width} px"


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_touched_fits_with_a_slice_running(browser, demo, width):
    pages = {}
    for user in ("alice", "admin"):
        context = browser.new_context(viewport={"width": width, "height": 800})
        context.set_default_timeout(20_000)
        pages[user] = context.new_page()
        log_in(pages[user], demo.url, user)
    alice, admin = pages["alice"], pages["admin"]
    try:
        # My GPUs, with the slice in its servers table
        fits(visit(alice, demo, SVC), "My GPUs", width)
        expect(alice.locator("#my-servers")).to_contain_text("1g.10gb")
        shoot(alice, f"fit-my-gpus-{width}")

        # the pool's page: the admin's Stop button on the screen, beside the slice
        fits(visit(admin, demo, SVC + "pools/training-pool"), "training-pool's page", width)
        stop = admin.locator('#servers tr[data-key="default/jupyter-alice-gpu"] button')
        expect(stop).to_have_text("Stop")
        box = stop.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        shoot(admin, f"fit-pool-{width}")

        # the nodes page: a row per node, and with every node's labels open, still in its box,
        # each label cut only between its parts
        found = visit(admin, demo, SVC + "nodes")
        fits(found, "the nodes page", width)
        rows = admin.locator("#node-table tbody tr").count()
        assert rows == 10 and found["height"] <= 1200, found["height"]
        for summary in admin.locator("#node-table details > summary").all():
            summary.click()
        expect(admin.locator("#node-table details[open]")).to_have_count(rows)
        fits(admin.evaluate(FIT), "the nodes page, labels open", width)
        assert admin.evaluate(CUT_LABELS) == []
        shoot(admin, f"fit-nodes-{width}")

        # the health page and every other admin page: in their boxes, the nav bar one line
        for path in ("health", "pools", "quotas", "idle", "reports", "bookings", "admin"):
            fits(visit(admin, demo, SVC + path), path, width)
        shoot(admin, f"fit-admin-{width}")
        fits(visit(admin, demo, SVC + "health"), "health", width)
        expect(admin.locator("#health")).to_contain_text("watch pods")
        shoot(admin, f"fit-health-{width}")

        # the spawn form: one line per shape, its free count in it; isolation said once, folded
        found = visit(alice, demo, "/hub/spawn")
        fits(found, "the spawn form", width)
        shapes = alice.locator("#gpupool-pools .gpupool-shape label")
        assert shapes.count() >= 5
        for label in shapes.all():
            assert re.search(r"\d+ free", label.inner_text()), label.inner_text()
            lines = label.evaluate(LINES)
            assert lines == 1, f"{label.inner_text()!r} takes {lines} lines at {width} px"
        isolation = alice.locator("#gpupool-isolation")
        expect(isolation).to_have_count(1)
        expect(isolation.locator("li").first).to_be_hidden()  # on demand
        isolation.locator("summary").click()
        expect(isolation.locator("li", has_text="A MIG instance isolates")).to_be_visible()
        assert alice.get_by_text("isolates memory and faults").count() == 1
        shoot(alice, f"fit-spawn-form-{width}")
        assert found["height"] <= 2000, found["height"]
    finally:
        for page in pages.values():
            page.context.close()
