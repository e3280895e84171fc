"""jupyter_gpupool.GPUPoolSpawner, the `gpupool` spawner entry point, and a cheap import."""

import subprocess
import sys
from importlib.metadata import entry_points

import jupyter_gpupool
from jupyter_gpupool.spawner import GPUPoolSpawner


def test_the_package_exports_the_spawner_and_jupyterhub_finds_it_by_name():
    assert jupyter_gpupool.GPUPoolSpawner is GPUPoolSpawner
    (ep,) = [e for e in entry_points(group="jupyterhub.spawners") if e.name == "gpupool"]
    assert ep.load() is GPUPoolSpawner
    # c.JupyterHub.spawner_class = "gpupool" is resolved this way
    from jupyterhub.app import JupyterHub

    assert JupyterHub(spawner_class="gpupool").spawner_class is GPUPoolSpawner


def test_importing_the_package_does_not_load_kubespawner():
    code = "import sys, jupyter_gpupool; print('kubespawner' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
