"""docs/spawner.md's reference matches the traits; every setting has help and an example; the
spawn benchmark runs (tiny, no timing asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets import TraitError

from jupyter_gpupool.spawner.spawner import GPUPoolSpawner

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_config_reference_matches_the_traits():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_spawner_config.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_every_setting_has_paragraphs_of_help_with_an_example():
    traits = GPUPoolSpawner.class_own_traits(config=True)
    assert len(traits) >= 10
    for name, trait in traits.items():
        assert len(trait.help.strip().split("\n\n")) >= 2, f"{name}: one paragraph of help"
        assert f"c.GPUPoolSpawner.{name} = " in trait.help, f"{name}: no example"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("service_url", "127.0.0.1:10101", "service_url must be an http:// or https:// URL"),
        ("pool_schedule_timeout", -1, "pool_schedule_timeout must not be negative"),
        ("pool_schedule_timeouts", {"a": "soon"}, "pool_schedule_timeouts['a'] must be a number"),
        ("service_timeout", 0, "service_timeout must be more than 0 seconds"),
        ("default_gpus", -2, "default_gpus must not be negative"),
        ("max_pools", 0, "max_pools must be at least 1"),
        ("form_template", " ", "form_template must name a template"),
    ],
)
async def test_settings_are_checked_with_a_message(spawner, name, value, message):
    with pytest.raises(TraitError) as e:
        setattr(spawner, name, value)
    assert message in str(e.value)


def test_the_spawn_benchmark_prints_one_json_line():
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_spawn.py"),
            "--spawns",
            "1",
            "--start-delay",
            "0",
            "--kube-timeout",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    [line] = out.splitlines()
    result = json.loads(line)
    assert result["spawn_ratio"] > 0 and result["first_pool_full_to_pod_s"] > 0
    assert result["first_pool_full_started_in"] == "inference-pool"
    assert result["kubespawner_full_pool"] == "timed out"
