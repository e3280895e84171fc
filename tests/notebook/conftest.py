from __future__ import annotations

import os

import pytest
from fakehub import FakeHub


@pytest.fixture
def fake_hub():
    hub = FakeHub().start()
    yield hub
    hub.stop()


@pytest.fixture
def hub_env(fake_hub, monkeypatch):
    """The environment of a server of alice's whose hub and service are ``fake_hub``."""
    for key in [k for k in os.environ if k.startswith(("JUPYTERHUB_", "GPUPOOL_"))]:
        monkeypatch.delenv(key)
    for key, value in fake_hub.environ().items():
        monkeypatch.setenv(key, value)
    return fake_hub
