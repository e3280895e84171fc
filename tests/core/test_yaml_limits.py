"""Pool, quota and cluster documents refuse what a few hundred bytes can turn into minutes and
gigabytes: anchors and aliases ("billion laughs"), deep nesting, huge texts. Each refusal names
the file and line, and nothing is loaded."""

from __future__ import annotations

import subprocess
import sys

import pytest
from yaml_attacks import laughs

from jupyter_gpupool.core.documents.yaml_reader import (
    MAX_DEPTH,
    MAX_TEXT_BYTES,
    DocumentError,
    safe_load,
)
from jupyter_gpupool.core.pools.reading import load_string
from jupyter_gpupool.poolfiles import check_paths, load_paths


def test_the_billion_laughs_document_is_refused_at_its_first_anchor():
    text = laughs()
    assert len(text) < 500  # the whole attack: 10**9 strings once expanded
    with pytest.raises(DocumentError) as e:
        load_string(text, "laughs.yaml")
    [problem] = e.value.problems
    assert (problem.file, problem.line) == ("laughs.yaml", 3)
    assert "anchors (&l0) are not accepted" in problem.message


def test_an_alias_alone_is_refused_where_it_stands():
    # an alias with no anchor in this document: refused as an alias, not as "undefined"
    text = "kind: pool\nversion: v0.1\npool:\n  name: p\n  description: *d\n"
    with pytest.raises(DocumentError) as e:
        load_string(text, "p.yaml")
    [problem] = e.value.problems
    assert problem.line == 5 and "aliases (*d) are not accepted" in problem.message


def test_a_merge_key_needs_an_alias_and_is_refused_too():
    text = (
        "kind: pool\nversion: v0.1\npool:\n  name: p\n"
        "defaults: &d {cpu-per-gpu: 4}\nlimits:\n  <<: *d\n"
    )
    with pytest.raises(DocumentError) as e:
        load_string(text)
    assert e.value.problems[0].line == 5


def test_nesting_deeper_than_the_limit_is_refused_with_its_line():
    deep = "pool:\n  name: p\nx: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n"
    with pytest.raises(DocumentError) as e:
        load_string("kind: pool\nversion: v0.1\n" + deep)
    [problem] = e.value.problems
    assert problem.line == 5 and f"nested more than {MAX_DEPTH} levels" in problem.message
    # at the limit the loader lets it through and the field is judged as any other
    at_limit = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    with pytest.raises(DocumentError) as e:
        load_string(f"kind: pool\nversion: v0.1\npool: {{name: p}}\nx: {at_limit}\n")
    assert "unknown key 'x'" in str(e.value)


def test_a_text_over_the_size_limit_is_refused_before_parsing():
    big = "kind: pool\nversion: v0.1\npool: {name: p}\n# " + "x" * MAX_TEXT_BYTES + "\n"
    with pytest.raises(DocumentError) as e:
        load_string(big, "big.yaml")
    assert "too large" in str(e.value) and "big.yaml:1" in str(e.value)


def test_registry_files_with_laughs_load_nothing(tmp_path):
    (tmp_path / "good.yaml").write_text("kind: pool\nversion: v0.1\npool: {name: good}\n")
    (tmp_path / "laughs.yaml").write_text(laughs())
    with pytest.raises(DocumentError) as e:
        load_paths([tmp_path])
    assert [str(p) for p in e.value.problems] == [
        f"{tmp_path / 'laughs.yaml'}:3: (yaml): "
        "YAML anchors (&l0) are not accepted; write the value out"
    ]
    report = check_paths([tmp_path])
    assert report.pools_per_file[str(tmp_path / "good.yaml")] == 1
    assert [p.line for p in report.problems] == [3]


def test_a_huge_file_is_refused_without_being_read(tmp_path):
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:
        f.truncate(MAX_TEXT_BYTES + 1)  # sparse: costs no disk, and reading it would be slow
    report = check_paths([huge])
    [problem] = report.problems
    assert problem.path == "(file)" and "too large" in problem.message


def test_gpupool_validate_names_the_line_of_the_bomb(tmp_path):
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text(laughs())
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter_gpupool", "validate", "-f", str(bomb)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"{bomb}:3: (yaml): YAML anchors (&l0) are not accepted; write the value out"
    )


def test_safe_load_refuses_as_the_documents_do():
    assert safe_load("a: [1, {b: c}]") == {"a": [1, {"b": "c"}]}
    with pytest.raises(DocumentError, match="anchors"):
        safe_load(laughs())
    with pytest.raises(DocumentError, match="invalid YAML"):
        safe_load("a: [")
