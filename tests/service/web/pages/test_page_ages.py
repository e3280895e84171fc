"""The ages on the service's pages: rendered by the server (the ``age`` filter) and refreshed in
the browser (``static/gpupool.js``), both kubectl's, so a refresh never changes how an age reads.

The browser side is run in Node against the same kubectl table as the core's own tests.
"""

from __future__ import annotations

import json
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
