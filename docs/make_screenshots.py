"""Regenerate the README's screenshots: `python docs/make_screenshots.py` (needs chromium and
playwright, as the browser tests do: it launches and logs in through tests/pages/browser_setup).

Starts `gpupool demo` in a temporary state dir, starts a 4-GPU server for bob and one on a MIG
1g.10gb instance for carol so the pages have something to show, then photographs, at a laptop's
1,024 px, alice's spawn form and the admin's pools page.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

# browser_setup, and tests/needs.py that it imports
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "pages"))

from browser_setup import chromium, log_in

from jupyter_gpupool.demo.testing import DemoProcess

OUT = Path(__file__).resolve().parent / "images"


def main() -> int:
    with DemoProcess.start(Path(tempfile.mkdtemp(prefix="gpupool-shots-"))) as demo:
        for user, options in (
            ("bob", {"pools": ["training-pool"], "gpus": 4}),
            ("carol", {"pools": [{"pool": "training-pool", "shape": "mig-1g.10gb"}], "gpus": 1}),
        ):
            status, body = demo.api("POST", f"/hub/api/users/{user}/server", options)
            if status not in (201, 202):
                raise SystemExit(f"cannot start {user}'s server: {status} {body!r}")
        time.sleep(3)
        OUT.mkdir(exist_ok=True)
        with chromium() as browser:
            for user, path, name in (
                ("alice", "/hub/spawn", "spawn-form.png"),
                ("admin", "/services/gpupool/pools", "pools-page.png"),
            ):
                page = browser.new_page(viewport={"width": 1024, "height": 820})
                log_in(page, demo.url, user)
                page.goto(demo.url + path)
                page.wait_for_timeout(1500)
                page.screenshot(path=str(OUT / name), full_page=True)
                page.close()
    print(f"wrote {OUT / 'spawn-form.png'} and {OUT / 'pools-page.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
