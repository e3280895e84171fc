"""The prebuilt JupyterLab extension ships with the package (pip install is the only step)."""

from __future__ import annotations

import json
from pathlib import Path

from needs import need_module

import jupyter_gpupool

tomllib = need_module("tomllib", "reading pyproject.toml needs Python 3.11")

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "jupyter_gpupool" / "labextension"


def test_the_built_extension_is_in_the_package_and_matches_its_source():
    built = json.loads((BUILT / "package.json").read_text())
    source = json.loads((ROOT / "labextension" / "package.json").read_text())
    assert built["name"] == source["name"] == "jupyter-gpupool"
    assert built["version"] == source["version"]
    remote = built["jupyterlab"]["_build"]["load"]
    assert (BUILT / remote).is_file()
    assert (jupyter_gpupool._jupyter_labextension_paths()) == [
        {"src": "labextension", "dest": "jupyter-gpupool"}
    ]


def test_the_wheel_installs_the_extension_and_enables_the_server_extension():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["jupyter_gpupool/labextension"] == "share/jupyter/labextensions/jupyter-gpupool"
    assert shared["jupyter-config/server-config"] == "etc/jupyter/jupyter_server_config.d"
    config = json.loads((ROOT / "jupyter-config/server-config/jupyter_gpupool.json").read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"jupyter_gpupool": True}}}
    assert jupyter_gpupool._jupyter_server_extension_points() == [
        {"module": "jupyter_gpupool.notebook.serverext"}
    ]
