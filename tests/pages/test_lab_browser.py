"""The JupyterLab status item in a real browser: alice's demo server (a real
jupyterhub-singleuser with JupyterLab and the installed jupyter-gpupool extension) shows where
it runs in the status bar; a click opens the side panel with the pools and her servers.
Screenshots go to tests/artifacts/ (lab-status.png, lab-panel.png).

Needs Debian's ``chromium`` and the ``playwright`` package (skipped with the reason otherwise).
"""

from __future__ import annotations

import re

import pytest
from browser_setup import chromium, expect, log_in, new_page, shoot

from jupyter_gpupool.demo.testing import DemoProcess


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("lab-demo")) as demo:
        yield demo


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def test_the_status_item_shows_the_pool_and_opens_the_panel(browser, demo):
    # alice borrows in inference-pool (no guaranteed GPUs there): over quota
    demo.api("POST", "/hub/api/users/alice")
    status, body = demo.api(
        "POST",
        "/hub/api/users/alice/server",
        {"user_options": {"pools": ["inference-pool"], "gpus": 1}},
    )
    assert status in (201, 202), body
    demo.start_server("alice")
    page = new_page(browser, timeout=60_000)
    try:
        log_in(page, demo.url, "alice")
        page.goto(demo.url + "/user/alice/lab")
        item = page.locator("#jp-gpupool-status")
        expect(item).to_have_text("GPU 1\u00d7 A10-24G · inference-pool")
        expect(item).to_have_class(re.compile(r"\bjp-gpupool-warning\b"))
        assert "may be stopped (reclaimed)" in (item.get_attribute("title") or "")
        shoot(page, "lab-status")
        item.click()
        panel = page.locator("#jp-gpupool-panel")
        expect(panel).to_be_visible()
        expect(panel.locator("table").first).to_contain_text("training-pool")
        expect(panel.locator("table").nth(1)).to_contain_text("inference-pool")
        expect(panel.locator("table").nth(1)).to_contain_text("(this one)")
        shoot(page, "lab-panel")
    finally:
        page.context.close()
        demo.api("DELETE", "/hub/api/users/alice/server")
