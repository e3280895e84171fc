"""Regenerate the README's screenshots: `python docs/make_screenshots.py` (needs chromium).

Starts `gpupool demo` in a temporary state dir, starts a 4-GPU server for bob so the pages have
something to show, then photographs alice's spawn form and the admin's pools page.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

from jupyter_gpupool.demo.run import free_port

OUT = Path(__file__).resolve().parent / "images"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main() -> int:
    state = Path(tempfile.mkdtemp(prefix="gpupool-shots-"))
    port = free_port()
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_gpupool",
            "demo",
            "--port",
            str(port),
            "--state-dir",
            str(state),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stdout is not None
        url = next(line.split()[1] for line in demo.stdout if line.startswith("ready "))
        token = (state / "admin-token").read_text().strip()

        def api(method: str, path: str, body: object = None) -> None:
            req = urllib.request.Request(
                url + path,
                method=method,
                data=json.dumps(body).encode() if body is not None else None,
                headers={"Authorization": f"token {token}"},
            )
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except urllib.error.HTTPError as e:
                raise SystemExit(f"{method} {path}: {e.code} {e.read().decode()}") from None

        api("POST", "/hub/api/users/bob/server", {"pools": ["training-pool"], "gpus": 4})
        time.sleep(3)
        OUT.mkdir(exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for user, path, name in (
                ("alice", "/hub/spawn", "spawn-form.png"),
                ("admin", "/services/gpupool/pools", "pools-page.png"),
            ):
                page = browser.new_page(viewport={"width": 1280, "height": 820})
                page.goto(url + "/hub/login")
                page.fill("#username_input", user)
                page.fill("#password_input", "any password")
                page.click("#login_submit")
                page.goto(url + path)
                page.wait_for_timeout(1500)
                page.screenshot(path=str(OUT / name), full_page=True)
                page.close()
            browser.close()
    finally:
        demo.terminate()
        demo.wait(timeout=60)
    print(f"wrote {OUT / 'spawn-form.png'} and {OUT / 'pools-page.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
