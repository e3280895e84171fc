"""The ages on the service's pages: rendered by the server (the ``age`` filter) and refreshed in
the browser (``static/gpupool.js``), both kubectl's, so a refresh never changes how an age reads.

The browser side is run in Node against the same kubectl table as the core's own tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from needs import need

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core"))
from test_formatting import KUBECTL

from jupyter_gpupool.core.words.tables import age
from jupyter_gpupool.service.web.pages.templating import make_environment

NODE = shutil.which("node")
need(NODE, "node (runs the pages' script)")

SCRIPT = Path(__file__).resolve().parents[4] / "jupyter_gpupool/service/web/pages/static/gpupool.js"

# Pull age() out of the page script and call it with a clock moved to each case.
RUNNER = r"""
const src = require("fs").readFileSync(process.argv[1], "utf8");
const start = src.indexOf("  function age(iso)");
const end = src.indexOf("\n  }\n", start) + 4;
const age = new Function("return (" + src.slice(start, end).trim().replace(/^function age/, "function") + ")")();
const T = Date.parse("2030-01-01T00:00:00Z");
const out = JSON.parse(process.argv[2]).map((secs) => {
  Date.now = () => T + secs * 1000;
  return age("2030-01-01T00:00:00Z");
});
console.log(JSON.stringify(out));
"""


def test_the_pages_script_ages_as_kubectl():
    # a browser clock counts whole milliseconds: leave out cases finer than that
    cases = [(s, want) for s, want in KUBECTL if abs(s * 1000 - round(s * 1000)) < 1e-6]
    seconds = json.dumps([s for s, _ in cases])
    run = subprocess.run(
        [NODE or "node", "-e", RUNNER, str(SCRIPT), seconds],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(run.stdout) == [want for _, want in cases]


def test_the_age_filter_is_the_core_age():
    age_filter = make_environment().filters["age"]
    then = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (2 * 3600 + 59 * 60)))
    assert age_filter(then) == "179m"  # was "2h" before the ages were kubectl's
    assert age_filter(None) == age(None, 0.0) == "-"


# Pull stamp() out of the page script and call it with a page of one [data-updated] element
# and the browser's clock at 05:06:12 UTC, in a time zone far from UTC (as a reader's may be).
STAMP = r"""
const src = require("fs").readFileSync(process.argv[1], "utf8");
const start = src.indexOf("  function stamp(error)");
const end = src.indexOf("\n  }\n", start) + 4;
const el = { textContent: "" };
const root = { classList: { toggle() {} }, querySelector: () => el };
const stamp = new Function("root", "return (" + src.slice(start, end).trim() + ")")(root);
const T = Date.parse("2030-01-01T05:06:12Z");
Date.now = () => T;
const RealDate = Date;
global.Date = class extends RealDate { constructor(...a) { super(...(a.length ? a : [T])); } };
stamp(null);
console.log(JSON.stringify(el.textContent));
"""


def test_the_refresh_time_reads_as_the_rendered_one():
    """The live pages say when they were last refreshed: rendered by the server and refreshed
    by the script alike, 24-hour UTC (``05:06:12 UTC``), not the reader's locale
    (``5:06:11 AM``) beside the server's clock."""
    run = subprocess.run(
        [NODE or "node", "-e", STAMP, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "TZ": "America/Los_Angeles", "LANG": "en_US.UTF-8"},
    )
    assert json.loads(run.stdout) == "05:06:12 UTC"


async def test_the_page_is_rendered_at_a_utc_time(service):
    from test_pages import Browser  # the pages' own helper

    page = Browser(service, service.hub.user("alice", [], ["custom:gpupool:use"]))
    try:
        before = time.gmtime()
        status, html, _ = await page.get("")
        assert status == 200
        found = re.search(r"<span data-updated>(\d\d):(\d\d):(\d\d) UTC</span>", html)
        assert found is not None, html[-500:]
        assert int(found.group(1)) == before.tm_hour or before.tm_min == 59
    finally:
        page.http.close()
