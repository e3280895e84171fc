"""A key given twice is refused, never read as its last value, in every YAML document (pool and
quota files, request bodies, the simulator's cluster file), with ``FILE:LINE: field: ...``; so is
a whole number too long for Python to convert. Both YAML parsers (libyaml's and PyYAML's own)
refuse the same documents. JSON text: ``test_jsondoc.py``."""

from __future__ import annotations

import pytest
from yaml_attacks import QUOTA_TWICE

from jupyter_gpupool.core.documents import yaml_reader
from jupyter_gpupool.core.documents.whole_numbers import MAX_NUMBER_DIGITS
from jupyter_gpupool.core.documents.yaml_reader import DocumentError, load_documents, safe_load
from jupyter_gpupool.core.pools.reading import load_texts
from jupyter_gpupool.sim.nodes.spec import parse_cluster

LOADERS = [yaml_reader.PyStrictLoader]
if hasattr(yaml_reader, "CStrictLoader"):
    LOADERS.append(yaml_reader.CStrictLoader)


@pytest.fixture(params=LOADERS, ids=lambda c: c.__name__, autouse=True)
def loader(request, monkeypatch):
    monkeypatch.setattr(yaml_reader, "StrictLoader", request.param)


POOL = "kind: pool\nversion: v0.1\npool: {name: dev-pool}\n"


def problems(texts):
    with pytest.raises(DocumentError) as e:
        load_texts(texts)
    return [str(p) for p in e.value.problems]


def test_a_quota_naming_a_pool_twice_is_refused_at_the_second():
    assert problems([(POOL, "pool.yaml"), (QUOTA_TWICE, "quotas.yaml")]) == [
        "quotas.yaml:7: pools.dev-pool: the key 'dev-pool' is given twice in this mapping "
        "(first at line 5); give each key once"
    ]


def test_a_pool_with_two_names_is_refused():
    text = "kind: pool\nversion: v0.1\npool:\n  name: a\n  description: x\n  name: b\n"
    assert problems([(text, "<request>")]) == [
        "<request>:6: pool.name: the key 'name' is given twice in this mapping (first at "
        "line 4); give each key once"
    ]


def test_json_text_read_as_yaml_refuses_a_key_twice_too():
    # pool bodies may be JSON; the YAML loader reads them
    text = '{"kind": "pool", "version": "v0.1",\n "pool": {"name": "a"},\n "kind": "quota"}'
    assert problems([(text, "<request>")]) == [
        "<request>:3: kind: the key 'kind' is given twice in this mapping (first at line 1); "
        "give each key once"
    ]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a:\n  true: 1\n  True: 2\n", "f.yaml:3: a.True"),  # both the boolean True
        ("a: {1: x, 0x1: y}\n", "f.yaml:1: a.0x1"),  # both the number 1
        ("- {k: 1}\n- {k: 1, k: 2}\n", "f.yaml:2: [1].k"),
    ],
)
def test_keys_equal_as_python_reads_them_are_the_same_key(text, where):
    with pytest.raises(DocumentError) as e:
        load_documents(text, "f.yaml")
    assert str(e.value).startswith(where + ": the key ")


def test_keys_that_differ_for_python_may_both_be_given():
    # "1" and 1 are two keys; a merge key is not a key of the mapping
    [doc] = load_documents("a: {1: x, '1': y}\nb:\n  <<: {c: 1}\n  d: 2\n")
    assert doc.data == {"a": {1: "x", "1": "y"}, "b": {"c": 1, "d": 2}}


def test_safe_load_and_the_cluster_file_refuse_it_too():
    with pytest.raises(DocumentError) as e:
        safe_load("labels: {a: x}\nlabels: {b: y}\n", "request body")
    assert str(e.value).startswith("request body:2: labels: the key 'labels' is given twice")
    cluster = "nodes:\n- name: n1\n  gpus: 8\n  gpus: 0\n"
    with pytest.raises(DocumentError) as e:
        parse_cluster(cluster, "cluster.yaml")
    assert str(e.value).startswith("cluster.yaml:4: nodes[0].gpus: the key 'gpus' is given")


def test_a_whole_number_too_long_to_convert_is_refused_at_its_line():
    text = POOL + "limits:\n  max-gpus: " + "9" * 5000 + "\n"
    assert problems([(text, "p.yaml")]) == [
        f"p.yaml:5: limits.max-gpus: a whole number of 5,000 digits is not accepted "
        f"(at most {MAX_NUMBER_DIGITS})"
    ]
    # any base: a hexadecimal number converts, but could not be printed in a message
    with pytest.raises(DocumentError) as e:
        load_documents("a: [1, 0x" + "f" * 200 + "]\n", "f.yaml")
    assert str(e.value).startswith("f.yaml:1: a[1]: a whole number of 200 digits")
    # as a string where gpuctl allows one (gpu: "8"): the field says it is not a number
    quota = "kind: quota\nquota: {name: q}\ndefault: {gpu: '" + "9" * 5000 + "'}\n"
    [problem] = problems([(quota, "q.yaml")])
    assert problem.startswith("q.yaml:3: default.gpu: ")


def test_a_value_yaml_cannot_build_is_a_problem_at_its_line():
    with pytest.raises(DocumentError) as e:
        load_documents("kind: pool\ndescription: 2001-13-45\n", "f.yaml")
    assert str(e.value) == (
        "f.yaml:2: (yaml): invalid YAML: cannot read '2001-13-45': month must be in 1..12"
    )
