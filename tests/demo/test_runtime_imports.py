"""The package works without the test extra: `pip install -e ".[demo]" && gpupool demo` on a
fresh machine has no pytest, hypothesis, playwright or nbclient. (The demo once imported the
cluster layout from the pytest plugin and died at start on a fresh install.)"""

from __future__ import annotations

import subprocess
import sys

TEST_ONLY = ["pytest", "pytest_asyncio", "hypothesis", "playwright", "nbclient", "kubernetes"]

PROGRAM = f"""
import importlib, pkgutil, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {TEST_ONLY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: test-only)")

sys.meta_path.insert(0, Block())
import jupyter_gpupool

failed = []
for mod in pkgutil.walk_packages(jupyter_gpupool.__path__, "jupyter_gpupool."):
    if mod.name.endswith(("pytest_plugin", "__main__", "jupyterhub_config")):  # not imported
        continue
    try:
        importlib.import_module(mod.name)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in {TEST_ONLY!r}:
            failed.append(f"{{mod.name}}: {{e}}")
from jupyter_gpupool.demo.run import DemoOptions
from jupyter_gpupool.sim.nodes.spec import example_cluster_spec
print(len(example_cluster_spec().nodes), "nodes")
print("\\n".join(failed))
"""


def test_every_module_imports_without_the_test_only_packages():
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "10 nodes"
    assert [line for line in lines[1:] if line] == []
