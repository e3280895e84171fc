"""What the browser tests share: Debian's Chromium, its flags, playwright, where screenshots go,
and the steps every browser test takes (launch Chromium, log in to the hub, take a screenshot).

Importing this skips the importing test module, with the reason, when the ``playwright`` package
or Chromium is missing (``scripts/test.sh`` installs both); under CI that fails it (tests/needs.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from needs import need, need_module

sync_api = need_module("playwright.sync_api", "the browser tests need the playwright package")
CHROMIUM = os.environ.get("GPUPOOL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
need(
    os.path.exists(CHROMIUM),
    "the browser tests need Chromium (apt-get install chromium; scripts/test.sh does)",
)

expect = sync_api.expect
# An expectation waits up to 5 s by default: the time a page takes to show something (JupyterLab
# loading its extensions, above all) grows past that on a busy machine, and the tests run in
# parallel. Waiting longer costs nothing when the page is quick: it returns as soon as it holds.
expect.set_options(timeout=30_000)
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
# This machine's network is closed: without the background-networking flags Chromium keeps
# trying to reach Google's hosts.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Headless Debian Chromium driven by playwright, closed on the way out."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, timeout: float = 20_000) -> Any:
    """A page in a context of its own (its own cookies: one user), sized like a laptop screen."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(timeout)
    return context.new_page()


def log_in(page: Any, hub_url: str, user: str) -> None:
    """Log in on the hub's login page as a person does (the demo takes any password), and wait
    until the hub has sent the browser on (home, the spawn form, or a server)."""
    page.goto(hub_url + "/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", "any password")
    page.click("#login_submit")
    page.wait_for_url(re.compile(r".*/hub/(home|spawn).*|.*/user/[^/]+/.*"))


def shoot(page: Any, name: str) -> Path:
    """A screenshot of the whole of ``page`` in tests/artifacts/NAME.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
