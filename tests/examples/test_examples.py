"""The example files a newcomer copies must load and mean what their comments say."""

from pathlib import Path

import yaml
from traitlets.config.loader import PyFileConfigLoader

from jupyter_gpupool.poolfiles import load_paths
from jupyter_gpupool.service.web.auth import CUSTOM_SCOPES, METRICS_SCOPE

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
    # the scopes the service checks, as it describes them
    assert cfg.JupyterHub.custom_scopes == CUSTOM_SCOPES
    assert roles["gpupool-metrics"]["scopes"] == [METRICS_SCOPE, "access:services!service=gpupool"]
    assert roles["gpupool-metrics"]["services"] == []  # no GPUPOOL_METRICS_TOKEN: no scraper

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
    for scope in CUSTOM_SCOPES:
        assert f'"{scope}"' in hub["extraConfig"]["gpupool"]
    assert hub["loadRoles"]["gpupool-metrics"] == {
        "services": ["prometheus"],
        "scopes": [METRICS_SCOPE, "access:services!service=gpupool"],
    }
    assert "prometheus" in hub["services"]


def test_the_scrape_token_is_wired_when_given(monkeypatch):
    monkeypatch.setenv("GPUPOOL_SPAWNER_TOKEN", "t0ken")
    monkeypatch.setenv("GPUPOOL_METRICS_TOKEN", "scrape")
    cfg = PyFileConfigLoader("jupyterhub_config.py", path=str(EXAMPLES)).load_config()
    services = {s["name"]: s for s in cfg.JupyterHub.services}
    assert services["prometheus"]["api_token"] == "scrape"
    roles = {r["name"]: r for r in cfg.JupyterHub.load_roles}
    assert roles["gpupool-metrics"]["services"] == ["prometheus"]


def test_example_pools_load():
    reg = load_paths([EXAMPLES / "pools"])
    assert {"training-pool", "inference-pool", "dev-pool", "compute-pool"} <= set(reg.pools)
