"""The configuration reference in docs/service.md is the one generated from the traits."""

import re
import subprocess
import sys
from pathlib import Path

from jupyter_gpupool.service import GPUPoolService
from jupyter_gpupool.service.settings import GPUPoolSettings

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_config_reference_matches_the_traits():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_service_config.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_every_setting_is_documented_with_an_example():
    doc = (ROOT / "docs" / "service.md").read_text()
    # every class's, not class_own_traits: the settings are defined in the classes it combines
    settings = GPUPoolSettings.class_traits(config=True)
    assert len(settings) >= 20  # the settings moved to base classes, not away
    documented = set(re.findall(r"^### `c\.GPUPoolService\.(\w+)`$", doc, re.MULTILINE))
    assert documented == settings.keys()
    for name, trait in settings.items():
        assert GPUPoolService.class_traits(config=True)[name] is trait, name
        assert f"### `c.GPUPoolService.{name}`" in doc, name
        assert "Example" in trait.help, name
        assert len(trait.help.strip().split("\n\n")) >= 2, f"{name}: one paragraph of help"
