"""The JupyterLab status item in a real browser: alice's demo server (a real
jupyterhub-singleuser with JupyterLab and the installed jupyter-gpupool extension) shows where
it runs in the status bar; a click opens the side panel with the pools and her servers.
Screenshots go to tests/artifacts/ (lab-status.png, lab-panel.png).

Needs Debian's ``chromium`` and the ``playwright`` package (skipped with the reason otherwise).
"""

from __future__ import annotations

import re

import pytest
from browser_setup import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, expect, sync_api

from jupyter_gpupool.demo.testing import DemoProcess


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with DemoProcess.start(tmp_path_factory.mktemp("lab-demo")) as demo:
        yield demo


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def shoot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


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
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        page.goto(demo.url + "/hub/login")
        page.fill("#username_input", "alice")
        page.fill("#password_input", "any password")
        page.click("#login_submit")
        page.wait_for_url(re.compile(r".*/hub/(home|spawn|spawn-pending).*|.*/user/alice/.*"))
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
        context.close()
        demo.api("DELETE", "/hub/api/users/alice/server")
