"""The example files a newcomer copies must load and mean what their comments say."""

from pathlib import Path

import yaml
from traitlets.config.loader import PyFileConfigLoader

from jupyter_gpupool.poolfile import load_paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_real_cluster_jupyterhub_config_loads_and_wires_spawner_and_service(monkeypatch):
    monkeypatch.setenv("GPUPOOL_SPAWNER_TOKEN", "t0ken")
    cfg = PyFileConfigLoader("jupyterhub_config.py", path=str(EXAMPLES)).load_config()
    assert cfg.JupyterHub.spawner_class == "gpupool"
    service = next(s for s in cfg.JupyterHub.services if s["name"] == "gpupool")
    assert service["command"][1:3] == ["-m", "jupyter_gpupool.service"]
    assert "--registry=configmap" in service["command"]
    roles = {r["name"]: r for r in cfg.JupyterHub.load_roles}
    assert "custom:gpupool:use" in roles["user"]["scopes"]
    assert "gpupool-spawner" in roles["gpupool-admins"]["services"]
    assert set(cfg.JupyterHub.custom_scopes) == {"custom:gpupool:use", "custom:gpupool:admin"}

    from jupyter_gpupool import GPUPoolSpawner

    # every GPUPoolSpawner setting the example makes is a real trait of the spawner
    traits = GPUPoolSpawner.class_trait_names(config=True)
    assert set(cfg.GPUPoolSpawner) <= set(traits)
    assert cfg.GPUPoolSpawner.service_token == "t0ken"
    assert cfg.GPUPoolSpawner.service_url == "http://127.0.0.1:10101/services/gpupool/"


def test_z2jh_values_fragment_is_valid_yaml_with_the_service_and_spawner():
    values = yaml.safe_load((EXAMPLES / "z2jh-values.yaml").read_text())
    hub = values["hub"]
    assert hub["services"]["gpupool"]["command"][:3] == ["python3", "-m", "jupyter_gpupool.service"]
    assert "gpupool" in hub["extraConfig"]
    assert "GPUPoolSpawner" in hub["extraConfig"]["gpupool"]
    compile(hub["extraConfig"]["gpupool"], "extraConfig", "exec")


def test_example_pools_load():
    reg = load_paths([EXAMPLES / "pools"])
    assert {"training-pool", "inference-pool", "dev-pool", "compute-pool"} <= set(reg.pools)


def test_binder_start_runs_the_demo_in_the_background_then_the_command(tmp_path):
    """binder/start as mybinder runs it: the demo comes up while the given command runs."""
    import os
    import signal
    import subprocess

    script = (
        "import json, os, time, urllib.request\n"
        "state = os.environ['GPUPOOL_DEMO_DIR']\n"
        "token = None\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        token = open(os.path.join(state, 'admin-token')).read().strip()\n"
        "        req = urllib.request.Request(os.environ['GPUPOOL_URL'] + '/services/gpupool/api/v1/pools',\n"
        "                                     headers={'Authorization': 'token ' + token})\n"
        "        pools = json.load(urllib.request.urlopen(req, timeout=5))['pools']\n"
        "        print(sorted(p['name'] for p in pools))\n"
        "        break\n"
        "    except OSError:\n"
        "        time.sleep(0.2)\n"
    )
    repo = EXAMPLES.parent
    from jupyter_gpupool.demo.run import free_port

    env = {
        **os.environ,
        "GPUPOOL_DEMO_DIR": str(tmp_path / "demo"),
        "GPUPOOL_DEMO_PORT": str(free_port()),
        "HOME": str(tmp_path),
    }
    proc = subprocess.Popen(
        [str(repo / "binder" / "start"), "python", "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=180)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the demo was started in the same session
        import time

        for _ in range(300):  # the demo stops everything, then removes its url file
            if not (tmp_path / "demo" / "url").exists():
                break
            time.sleep(0.1)
    assert "training-pool" in out
