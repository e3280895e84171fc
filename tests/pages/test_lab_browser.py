"""The JupyterLab status item in a real browser: alice's demo server (a real
jupyterhub-singleuser with JupyterLab and the jupyter-gpupool extension) shows where it runs in
the status bar, in line with the bar's other items; a click opens the side panel with the pools
and her servers, which fits a 250px sidebar and scrolls when its tables cannot fit. The item
says what her GPUs do as the demo's DCGM source measures them (set through the simulated
cluster) and, idle under a pool's idle policy, when the server will be stopped.
Screenshots go to tests/artifacts/ (lab-status.png, lab-panel.png, lab-panel-large-font.png,
lab-status-idle.png).

The servers load the extension built in this work tree (jupyter_gpupool/labextension/, through
``JUPYTER_PATH``), not a copy an earlier install left in the environment.

Needs Debian's ``chromium`` and the ``playwright`` package: skipped with the reason otherwise,
and failed instead under CI (``browser_setup`` through tests/needs.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser_setup import chromium, expect, log_in, new_page, shoot
from service_kit import set_utilization

from jupyter_gpupool.demo.testing import DemoProcess

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "jupyter_gpupool" / "labextension"
INFERENCE_POOL = ROOT / "examples" / "pools" / "inference-pool.yaml"
#: The status item's label before what the GPUs do (the demo measures them: `· 0%` follows).
HERE = "1 \u00d7 A10-24G · inference-pool"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    # JUPYTER_PATH comes first among the places JupyterLab looks for extensions; the demo's
    # pods (local processes) inherit it
    data = tmp_path_factory.mktemp("jupyter-data")
    (data / "labextensions").mkdir()
    (data / "labextensions" / "jupyter-gpupool").symlink_to(BUILT, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(data))
        with DemoProcess.start(tmp_path_factory.mktemp("lab-demo")) as demo:
            yield demo


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def alice(demo):
    """alice's default server, borrowing in inference-pool (no guaranteed GPUs there for her):
    over quota."""
    demo.api("POST", "/hub/api/users/alice")
    status, body = demo.api(
        "POST",
        "/hub/api/users/alice/server",
        {"user_options": {"pools": ["inference-pool"], "gpus": 1}},
    )
    assert status in (201, 202), body
    demo.start_server("alice")
    yield demo
    demo.api("DELETE", "/hub/api/users/alice/server")


@pytest.fixture
def lab(browser, alice):
    """alice's JupyterLab in a page of its own, once the status item shows her pool."""
    page = new_page(browser, timeout=60_000)
    try:
        log_in(page, alice.url, "alice")
        page.goto(alice.url + "/user/alice/lab")
        expect(page.locator("#jp-gpupool-status")).to_have_text(
            re.compile("^" + re.escape(HERE) + r"($| · )")
        )
        yield page
    finally:
        page.context.close()


def test_the_status_item_shows_the_pool_and_opens_the_panel(lab):
    item = lab.locator("#jp-gpupool-status")
    expect(item).to_have_class(re.compile(r"\bjp-gpupool-warning\b"))
    assert "may be stopped (reclaimed)" in (item.get_attribute("title") or "")
    shoot(lab, "lab-status")
    item.click()
    panel = lab.locator("#jp-gpupool-panel")
    expect(panel).to_be_visible()
    expect(panel.locator("table").first).to_contain_text("training-pool")
    expect(panel.locator("table").nth(1)).to_contain_text("inference-pool")
    expect(panel.locator("table").nth(1)).to_contain_text("(this one)")
    expect(panel.locator("table").nth(1)).to_contain_text("running, over quota")
    shoot(lab, "lab-panel")


#: Where an item's text is drawn (the box of its letters, not of its element), its box and
#: its padding, for every status bar item that is shown.
ITEMS_JS = """() => [...document.querySelectorAll('.jp-StatusBar-Item')]
  .filter(e => e.offsetParent !== null && e.textContent.trim())
  .map(e => {
    const text = document.createRange();
    text.selectNodeContents(e);
    const t = text.getBoundingClientRect(), box = e.getBoundingClientRect();
    const style = getComputedStyle(e);
    return {
      id: e.id, text: e.textContent.trim(),
      top: box.top, bottom: box.bottom,
      textMiddle: (t.top + t.bottom) / 2,
      fontSize: getComputedStyle(e.querySelector('*') || e).fontSize,
      padding: [style.paddingLeft, style.paddingRight],
    };
  })"""


def test_the_status_item_lines_up_with_its_neighbours(lab):
    items = lab.evaluate(ITEMS_JS)
    ours = next(i for i in items if i["id"] == "jp-gpupool-status")
    others = [i for i in items if i["id"] != "jp-gpupool-status"]
    # JupyterLab's own items beside ours: the running sessions' count, "Launcher"...
    assert len(others) >= 2, items
    for other in others:
        what = f"{ours['text']!r} beside {other['text']!r}: {ours} {other}"
        assert (ours["top"], ours["bottom"]) == (other["top"], other["bottom"]), what
        assert abs(ours["textMiddle"] - other["textMiddle"]) <= 1, what
        assert ours["padding"] == other["padding"], what
        assert ours["fontSize"] == other["fontSize"], what


#: Each table cell's box, and the panel's visible box (its client area: no scrollbar).
CELLS_JS = """panel => {
  const p = panel.getBoundingClientRect();
  return {
    panel: {left: p.left + panel.clientLeft, right: p.left + panel.clientLeft + panel.clientWidth},
    scrollWidth: panel.scrollWidth, clientWidth: panel.clientWidth,
    overflowX: getComputedStyle(panel).overflowX,
    cells: [...panel.querySelectorAll('td, th')].map(c => {
      const r = c.getBoundingClientRect();
      return {tag: c.tagName, text: c.textContent, left: r.left, right: r.right};
    }),
  };
}"""


def resize_sidebar(page: Any, panel: Any, width: float) -> None:
    """Drag the handle left of the right sidebar, as a person would, until ``panel`` is
    ``width`` pixels wide."""
    box = panel.bounding_box()
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle:not(.lm-mod-hidden)")
    right = max((h.bounding_box() for h in handle.all()), key=lambda b: b["x"] if b else -1)
    assert right is not None and abs(right["x"] + right["width"] - box["x"]) <= 2, (right, box)
    x, y = right["x"] + right["width"] / 2, right["y"] + right["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + box["width"] - width, y, steps=5)
    page.mouse.up()
    page.wait_for_function(
        "([id, w]) => Math.abs(document.getElementById(id).offsetWidth - w) <= 1",
        arg=[panel.get_attribute("id"), width],
    )


def test_the_panel_fits_a_250px_sidebar_and_scrolls_when_it_cannot(lab):
    lab.locator("#jp-gpupool-status").click()
    panel = lab.locator("#jp-gpupool-panel")
    expect(panel.locator("table").nth(1)).to_contain_text("(this one)")
    resize_sidebar(lab, panel, 250)
    seen = panel.evaluate(CELLS_JS)
    left, right = seen["panel"]["left"], seen["panel"]["right"]
    # the columns the issue found cut off are there, and every cell is in sight
    headers = " ".join(c["text"] for c in seen["cells"] if c["tag"] == "TH")
    assert "quota" in headers and "state" in headers, headers
    assert len(seen["cells"]) >= 2 * 6, seen  # the header and five pools, at least
    for cell in seen["cells"]:
        assert left - 0.5 <= cell["left"] and cell["right"] <= right + 0.5, (cell, left, right)
    assert seen["scrollWidth"] <= seen["clientWidth"], seen
    shoot(lab, "lab-panel")

    # JupyterLab keeps its sidebars at least 250px wide (--jp-sidebar-min-width); what makes
    # the tables wider than the panel is a larger UI font, as Settings > Theme > Increase UI
    # Font Size sets it (on the document's style): a scrollbar then, not columns cut off
    lab.evaluate("document.documentElement.style.setProperty('--jp-ui-font-size1', '26px')")
    panel.evaluate("p => new Promise(done => requestAnimationFrame(() => done()))")
    seen = panel.evaluate(CELLS_JS)
    assert seen["scrollWidth"] > seen["clientWidth"], seen
    assert seen["overflowX"] in ("auto", "scroll"), seen
    panel.evaluate("p => { p.scrollLeft = p.scrollWidth; }")
    assert panel.evaluate("p => p.scrollLeft") > 0
    shoot(lab, "lab-panel-large-font")


NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "panel",
            "metadata": {},
            "outputs": [],
            "source": (
                "from jupyter_gpupool.widgets import LaunchPanel\n"
                "panel = LaunchPanel()\n"
                "await panel.refresh()\n"
                "panel"
            ),
        }
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

#: The LaunchPanel's parts that show words, each with whether its words are cut (wider than
#: its box: an ellipsis or hidden) and its box; and the output area's box.
WIDGET_JS = """area => {
  const a = area.getBoundingClientRect();
  const parts = [...area.querySelectorAll(
    '.widget-label, .widget-html-content, .widget-button, .widget-dropdown, '
    + '.widget-text, .widget-tagsinput, .widget-progress, .widget-checkbox, '
    + '.widget-label-basic')];
  return {
    area: {left: a.left, right: a.right},
    parts: parts.filter(e => e.offsetParent !== null).map(e => {
      const r = e.getBoundingClientRect();
      return {cls: e.className, text: e.textContent.trim().slice(0, 60),
              cut: e.scrollWidth > e.clientWidth + 1, left: r.left, right: r.right};
    }),
  };
}"""


def test_the_launch_panel_is_not_cut_in_a_narrow_notebook(lab, alice):
    # the notebook, written through the server's contents API as the page itself would
    lab.evaluate(
        """async nb => {
          const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
          const r = await fetch('/user/alice/api/contents/narrow.ipynb', {
            method: 'PUT', headers: {'Content-Type': 'application/json', 'X-XSRFToken': xsrf},
            body: JSON.stringify({type: 'notebook', format: 'json', content: nb})});
          if (!r.ok) throw new Error('PUT narrow.ipynb: ' + r.status);
        }""",
        NOTEBOOK,
    )
    # a narrow window, the file browser closed: the notebook is about 400px wide
    lab.set_viewport_size({"width": 480, "height": 900})
    lab.goto(alice.url + "/user/alice/lab/tree/narrow.ipynb?reset")
    lab.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    expect(lab.locator(".jp-StatusBar-Widget")).to_contain_text("Idle", timeout=60_000)
    lab.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first.click()
    lab.keyboard.press("Shift+Enter")
    area = lab.locator(".jp-Notebook .jp-OutputArea-output").first
    # the panel, once the kernel has started and the panel has the pools
    expect(area).to_contain_text("GPUs free", timeout=60_000)
    assert_nothing_cut(
        area,
        "Server name",
        "GPU type",
        "GPUs",
        "within quota",
        "wait in line if no pool can take it now",
        "Launch",
        "Stop",
    )

    # a launch from the panel, in the browser: it says where the server went, as the service
    # counts it, and Stop stops the server whose name is typed
    stop = area.get_by_role("button", name="Stop")
    expect(stop).to_be_disabled()
    area.get_by_label("Server name").fill("narrow")
    area.get_by_role("button", name="Launch").click()
    try:
        expect(area).to_contain_text(re.compile(r"ready in \S+-pool, "), timeout=60_000)
        expect(area).to_contain_text("Open narrow")
        expect(stop).to_be_enabled()
        assert_nothing_cut(area, "ready in", "Open narrow")
        shoot(lab, "lab-launch-panel-narrow")
        row = next(
            r
            for r in alice.api("GET", "/services/gpupool/api/v1/servers?user=alice")[1]["servers"]
            if r["server"] == "narrow"
        )
        words = "over quota: may be reclaimed" if row["over_quota"] else "within quota"
        expect(area).to_contain_text(f"ready in {row['pool']}, {words}")
        stop.click()
        expect(area).to_contain_text("server 'narrow' stopped", timeout=60_000)
        expect(stop).to_be_disabled()
    finally:
        alice.api("DELETE", "/hub/api/users/alice/servers/narrow")


def assert_nothing_cut(area: Any, *words: str) -> None:
    """Every part of the widget in ``area`` shows all its words inside the output area."""
    seen = area.evaluate(WIDGET_JS)
    assert seen["area"]["right"] - seen["area"]["left"] < 460, seen["area"]
    shown = " ".join(p["text"] for p in seen["parts"])
    for expected in words:
        assert expected in shown, shown
    for part in seen["parts"]:
        assert not part["cut"], part
        left, right = seen["area"]["left"], seen["area"]["right"]
        assert left - 0.5 <= part["left"] and part["right"] <= right + 0.5, (part, seen["area"])


def apply_inference_pool(demo: DemoProcess, **extra: Any) -> None:
    code, answer = demo.api(
        "POST",
        "/services/gpupool/api/v1/pools",
        {**yaml.safe_load(INFERENCE_POOL.read_text()), **extra},
    )
    assert code in (200, 201), answer


def test_the_status_item_shows_gpu_utilization_and_the_idle_stop(lab, alice):
    """80% on alice's GPU shows as ``· 80%``; at 0% under a stop policy the item warns with
    the time left (its own class beside the warning colour) and the tooltip says when."""
    code, answer = alice.api("GET", "/services/gpupool/api/v1/servers?user=alice")
    assert code == 200, answer
    [pod] = [r for r in answer["servers"] if r["server"] == ""]
    item = lab.locator("#jp-gpupool-status")
    try:
        set_utilization(alice.state / "kubeconfig", pod["namespace"], pod["name"], 80)
        # the service polls DCGM every 5 s, the item the server every 10 s
        expect(item).to_have_text(f"{HERE} · 80%", timeout=30_000)
        expect(item).not_to_have_class(re.compile(r"\bjp-gpupool-idle\b"))
        assert "GPU utilization 80%" in (item.get_attribute("title") or "")

        # idle for 10 minutes is stopped, warned at once (warn: 10m)
        policy = {"below_percent": 5, "after": "10m", "warn": "10m", "action": "stop"}
        apply_inference_pool(alice, idle=policy)
        set_utilization(alice.state / "kubeconfig", pod["namespace"], pod["name"], 0)
        expect(item).to_have_text(
            re.compile("^" + re.escape(f"{HERE} · 0% · idle, stops in ") + r"(10m|9m\d\ds)$"),
            timeout=30_000,
        )
        expect(item).to_have_class(re.compile(r"\bjp-gpupool-idle\b"))
        expect(item).to_have_class(re.compile(r"\bjp-gpupool-warning\b"))
        title = item.get_attribute("title") or ""
        assert re.search(
            # a stop after midnight says its date too
            r"GPUs idle since \d\d:\d\d UTC; will be stopped at (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC "
            r"\(in (10m|9m\d\ds)\)",
            title,
        ), title
        shoot(lab, "lab-status-idle")
    finally:
        # as the module's other tests found it: no policy, busy
        apply_inference_pool(alice)
        set_utilization(alice.state / "kubeconfig", pod["namespace"], pod["name"], 80)
