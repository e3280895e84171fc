"""What the browser tests share: Debian's Chromium, its flags, playwright, and where screenshots go.

Importing this skips the importing test module, with the reason, when the ``playwright`` package
or Chromium is missing (``scripts/test.sh`` installs both).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need the playwright package"
)
CHROMIUM = os.environ.get("GPUPOOL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(
        "the browser tests need Chromium (apt-get install chromium; scripts/test.sh does)",
        allow_module_level=True,
    )

expect = sync_api.expect
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
