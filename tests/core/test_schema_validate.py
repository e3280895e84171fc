"""The shipped JSON Schema and the `gpupool validate` command."""

from __future__ import annotations

import json

import jsonschema
import yaml
from k8s_factories import EXAMPLES

from jupyter_gpupool.cli import main
from jupyter_gpupool.core.documents.yaml_reader import load_documents
from jupyter_gpupool.poolschema import SHIPPED, generate, render, shipped


def test_shipped_schema_is_the_generated_one():
    """Fails when the model changed but the file was not regenerated:
    python -m jupyter_gpupool.poolschema --write"""
    assert shipped() == render()
    assert SHIPPED.read_text() == render()


def test_examples_validate_against_the_schema_and_mistakes_do_not():
    validator = jsonschema.Draft202012Validator(generate())
    for f in sorted(EXAMPLES.iterdir()):
        for doc in load_documents(f.read_text(), str(f)):
            assert not list(validator.iter_errors(doc.data)), f
    bad = yaml.safe_load("kind: pool\npool: {name: x}\nnodes: {n: {gpu_type: A}}\n")
    assert list(validator.iter_errors(bad))
    assert json.loads(render())["$defs"]["pool"]["properties"]["nodes"]["propertyNames"]


def test_validate_prints_ok_per_file(capsys):
    assert main(["validate", "-f", str(EXAMPLES)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"ok {EXAMPLES}/compute-pool.yaml (1 pools)",
        f"ok {EXAMPLES}/dev-pool.yaml (1 pools)",
        f"ok {EXAMPLES}/inference-pool.yaml (1 pools)",
        f"ok {EXAMPLES}/quotas.yaml (0 pools)",
        f"ok {EXAMPLES}/training-pool.yaml (1 pools)",
    ]


def test_validate_reports_problems_and_exits_1(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("kind: pool\nversion: v0.1\npool:\n  name: a\nnodes: {}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: pool\nversion: v0.1\npool:\n  name: b\nnodes:\n  n1:\n    gpu_type: A\n")
    # several paths after one -f, and -f repeated, as gpuctl accepts
    assert main(["validate", "-f", str(good), str(bad), "-f", str(tmp_path / "missing.yaml")]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"ok {good} (1 pools)\n"
    assert captured.err.splitlines() == [
        f"{bad}:7: nodes.n1.gpu_type: unknown key 'gpu_type'; did you mean 'gpu-type'?",
        f"{tmp_path}/missing.yaml:1: (file): cannot read: [Errno 2] No such file or directory: "
        f"'{tmp_path}/missing.yaml'",
    ]
