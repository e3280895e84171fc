"""Label/field selectors, node affinity and tolerations, checked the way a Kubernetes user would."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpupool.core.kube.fieldselectors import (
    FieldRequirement,
    FieldSelector,
    parse_field_selector,
)
from jupyter_gpupool.core.kube.labelselectors import (
    LabelSelector,
    SelectorError,
    label_selector_from_api,
    parse_label_selector,
)
from jupyter_gpupool.core.kube.nodeaffinity import (
    node_selector_matches,
    node_selector_term_matches,
    preferred_affinity_score,
    required_affinity_matches,
)
from jupyter_gpupool.core.kube.tolerations import tolerates_taint

# --------------------------------------------------------------------------------------------
# Label selector strings
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"app": "a"}, True),
        ({"app": "b", "tier": "gpu"}, True),
        ({"app": "c"}, False),
        ({"app": "a", "canary": "true"}, False),
        ({"app": "a", "canary": ""}, False),
        ({}, False),
        ({"canary": "x"}, False),
    ],
)
def test_in_and_does_not_exist(labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector("app in (a,b),!canary").matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        # != and notin also select objects without the label, as in Kubernetes.
        ("app!=web", {}, True),
        ("app!=web", {"app": "db"}, True),
        ("app!=web", {"app": "web"}, False),
        ("env notin (prod, staging)", {}, True),
        ("env notin (prod, staging)", {"env": "dev"}, True),
        ("env notin (prod, staging)", {"env": "staging"}, False),
        ("gpu", {"gpu": ""}, True),
        ("gpu", {"cpu": "1"}, False),
        ("!gpu", {"cpu": "1"}, True),
        ("!gpu", {"gpu": "a100"}, False),
        ("app=", {"app": ""}, True),
        ("app=", {}, False),
        ("app in (a,)", {"app": ""}, True),
        ("app in ()", {"app": ""}, True),
        ("cores>4", {"cores": "8"}, True),
        ("cores>4", {"cores": "4"}, False),
        ("cores<4", {"cores": "-1"}, True),
        ("cores>4", {"cores": "eight"}, False),
        ("cores>4", {}, False),
        ("a=1,b=2", {"a": "1", "b": "2"}, True),
        ("a=1,b=2", {"a": "1"}, False),
        ("example.com/pool=gpu", {"example.com/pool": "gpu"}, True),
        ("tier=in", {"tier": "in"}, True),
        ("", {}, True),
        ("   ", {"x": "y"}, True),
    ],
)
def test_label_selector_matching(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_whitespace_is_tolerated() -> None:
    a = parse_label_selector("  app  in(a ,  b ) ,  ! canary , tier != gpu ,x==  y ")
    b = parse_label_selector("app in (a,b),!canary,tier!=gpu,x=y")
    assert a == b


def test_none_labels_match_like_empty() -> None:
    assert parse_label_selector("").matches(None)
    assert parse_label_selector("!app").matches(None)
    assert not parse_label_selector("app").matches(None)


def test_canonical_string() -> None:
    sel = parse_label_selector("zeta==1, app in (b, a, b), !canary, gpu, x notin (q)")
    assert str(sel) == "app in (a,b),!canary,gpu,x notin (q),zeta=1"
    assert str(parse_label_selector("")) == ""
    assert parse_label_selector("").empty
    assert not sel.empty


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ("app in (a", "missing ')'"),
        ("app in a", "expected '('"),
        ("app in (a b)", "expected ',' or ')'"),
        ("a=b,", "after ','"),
        (",a=b", "expected a label key"),
        ("a b", "found 'b'"),
        ("!a=b", "found '='"),
        ("!", "expected a label key after '!'"),
        ("in=x", "found 'in'"),
        ("a=(", "expected a value"),
        ("-bad=x", "must start and end with an alphanumeric"),
        ("Bad_Prefix/x=y", "DNS-1123 subdomain"),
        ("/x=y", "prefix part"),
        ("x/=y", "name part"),
        ("k=" + "v" * 64, "no more than 63 characters"),
        ("k" * 64 + "=v", "no more than 63 characters"),
        ("k=-v", "label value"),
        ("k>x", "must be an integer"),
        ("k>", "must be an integer"),
        ("k>-1", "label value"),  # Kubernetes also validates Gt/Lt values as label values
        ("k in (a)b", "expected ',' or end of string"),
    ],
)
def test_invalid_label_selectors(selector: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(selector)
    message = str(info.value)
    assert message.startswith(f'invalid label selector "{selector}": ')
    assert fragment in message
    assert isinstance(info.value, ValueError)


def test_long_valid_key_with_prefix() -> None:
    key = "a" * 60 + ".example.com/" + "n" * 63
    assert parse_label_selector(f"{key}=v").matches({key: "v"})


# Strategies producing valid selector pieces, for round-trip and oracle properties.
_alnum = st.sampled_from("abcXYZ019")
_middle = st.text(alphabet="abz09-_.", max_size=4)
_names = st.builds(lambda a, m, b: a + m + b, _alnum, _middle, _alnum) | _alnum
_prefixes = st.sampled_from(["", "example.com/", "k8s.io/", "a.b-c/"])
_keys = st.builds(lambda p, n: p + n, _prefixes, _names)
_values = st.just("") | _names


@st.composite
def _requirements(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    key = draw(_keys)
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]))
    if op in ("in", "notin"):
        return key, op, draw(st.lists(_values, min_size=1, max_size=3))
    if op in (">", "<"):
        return key, op, [str(draw(st.integers(0, 50)))]  # "-1" is not a valid label value
    if op in ("exists", "!"):
        return key, op, []
    return key, op, [draw(_values)]


def _render(req: tuple[str, str, list[str]]) -> str:
    key, op, values = req
    if op == "exists":
        return key
    if op == "!":
        return f"!{key}"
    if op in ("in", "notin"):
        return f"{key} {op} ({', '.join(values)})"
    return f"{key} {op} {values[0]}"


def _oracle(req: tuple[str, str, list[str]], labels: dict[str, str]) -> bool:
    key, op, values = req
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    if op in ("!=", "notin"):
        return labels.get(key) not in values
    if key not in labels:
        return False
    if op in (">", "<"):
        try:
            have = int(labels[key])
        except ValueError:
            return False
        return have > int(values[0]) if op == ">" else have < int(values[0])
    return labels[key] in values


@given(st.lists(_requirements(), max_size=5))
def test_parse_str_parse_is_stable(reqs: list[tuple[str, str, list[str]]]) -> None:
    sel = parse_label_selector(",".join(_render(r) for r in reqs))
    again = parse_label_selector(str(sel))
    assert again == sel
    assert str(again) == str(sel)


@given(
    st.lists(_requirements(), max_size=4),
    st.dictionaries(_keys, _values | st.integers(-60, 60).map(str), max_size=5),
)
def test_matches_agrees_with_the_kubernetes_rules(
    reqs: list[tuple[str, str, list[str]]], labels: dict[str, str]
) -> None:
    # Make the labels likely to mention the selector's keys.
    for key, _, values in reqs[:2]:
        labels.setdefault(key, values[0] if values else "1")
    sel = parse_label_selector(",".join(_render(r) for r in reqs))
    assert sel.matches(labels) == all(_oracle(r, labels) for r in reqs)


# --------------------------------------------------------------------------------------------
# Label selectors from the API (metav1.LabelSelector)
# --------------------------------------------------------------------------------------------


def test_label_selector_from_api() -> None:
    sel = label_selector_from_api(
        {
            "matchLabels": {"app": "jupyterhub", "component": "singleuser-server"},
            "matchExpressions": [
                {"key": "hub.jupyter.org/username", "operator": "In", "values": ["ana", "bo"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "NotIn", "values": ["cpu"]},
                {"key": "gpu", "operator": "Exists", "values": []},
            ],
        }
    )
    labels = {
        "app": "jupyterhub",
        "component": "singleuser-server",
        "hub.jupyter.org/username": "ana",
        "gpu": "a100",
    }
    assert sel.matches(labels)
    assert not sel.matches({**labels, "canary": "1"})
    assert not sel.matches({**labels, "tier": "cpu"})
    assert not sel.matches({**labels, "hub.jupyter.org/username": "cy"})
    assert sel == parse_label_selector(str(sel))


@pytest.mark.parametrize("sel", [None, {}, {"matchLabels": {}, "matchExpressions": []}])
def test_empty_api_selector_matches_everything(sel: dict | None) -> None:
    assert label_selector_from_api(sel).matches({"any": "thing"})
    assert label_selector_from_api(sel).matches(None)


@pytest.mark.parametrize(
    "sel",
    [
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
        {"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]},
        {"matchExpressions": [{"operator": "Exists"}]},
        {"matchExpressions": ["a=b"]},
        {"matchLabels": {"a": "-x"}},
        {"matchLabels": {"-a": "x"}},
        {"matchLabels": ["a"]},
    ],
)
def test_invalid_api_selectors(sel: dict) -> None:
    with pytest.raises(SelectorError, match="invalid label selector"):
        label_selector_from_api(sel)


# --------------------------------------------------------------------------------------------
# Field selectors
# --------------------------------------------------------------------------------------------

_POD = {
    "metadata": {"name": "jupyter-ana", "namespace": "hub"},
    "spec": {"nodeName": "gpu-node-1", "hostNetwork": False, "priority": 10},
    "status": {"phase": "Running"},
}
_PENDING = {"metadata": {"name": "jupyter-bo", "namespace": "hub"}, "spec": {}, "status": {}}


@pytest.mark.parametrize(
    ("selector", "obj", "expected"),
    [
        ("metadata.name=jupyter-ana", _POD, True),
        ("metadata.name==jupyter-ana", _POD, True),
        ("metadata.name!=jupyter-ana", _POD, False),
        ("metadata.namespace=hub,status.phase=Running", _POD, True),
        ("metadata.namespace=hub,status.phase!=Running", _POD, False),
        ("spec.nodeName=", _PENDING, True),
        ("spec.nodeName=", _POD, False),
        ("spec.nodeName!=", _POD, True),
        ("spec.nodeName!=", _PENDING, False),
        ("status.phase!=Succeeded,status.phase!=Failed", _PENDING, True),
        ("spec.hostNetwork=false", _POD, True),
        ("spec.priority=10", _POD, True),
        ("spec.nodeName.deeper=", _POD, True),
        ("", _POD, True),
    ],
)
def test_field_selector_matching(selector: str, obj: dict, expected: bool) -> None:
    assert parse_field_selector(selector).matches(obj) is expected


def test_field_selector_on_events() -> None:
    event = {
        "involvedObject": {"kind": "Pod", "name": "jupyter-ana", "uid": "u-1"},
        "reason": "FailedScheduling",
        "type": "Warning",
    }
    sel = parse_field_selector(
        "involvedObject.kind=Pod,involvedObject.name=jupyter-ana,involvedObject.uid=u-1,"
        "reason=FailedScheduling,type=Warning"
    )
    assert sel.matches(event)
    assert not parse_field_selector("type=Normal").matches(event)
    assert sel.paths == {
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.uid",
        "reason",
        "type",
    }


def test_field_selector_escapes() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d,status.phase=Running")
    assert sel.requirements[0].value == "a,b=c\\d"
    assert sel.matches({"metadata": {"name": "a,b=c\\d"}, "status": {"phase": "Running"}})
    assert str(sel) == r"metadata.name=a\,b\=c\\d,status.phase=Running"
    assert parse_field_selector(str(sel)) == sel


def test_field_selector_is_whitespace_tolerant_and_empty() -> None:
    assert parse_field_selector(" status.phase = Running ").matches(_POD)
    assert parse_field_selector("").empty
    assert parse_field_selector("").matches({})
    assert isinstance(parse_field_selector("a=b"), FieldSelector)


@pytest.mark.parametrize(
    "selector",
    ["metadata.name", "=x", r"metadata.name=a\b", "metadata.name=a=b", "metadata.name=x\\"],
)
def test_invalid_field_selectors(selector: str) -> None:
    with pytest.raises(SelectorError, match="invalid field selector"):
        parse_field_selector(selector)


@given(st.text(alphabet="ab,=\\ -x", max_size=12))
def test_field_value_escaping_round_trips(value: str) -> None:
    # Surrounding whitespace is not significant to the (lenient) parser.
    req = FieldRequirement("metadata.name", "!=", value.strip())
    assert parse_field_selector(str(FieldSelector((req,)))).requirements == (req,)


# --------------------------------------------------------------------------------------------
# Node affinity
# --------------------------------------------------------------------------------------------

_NODE_LABELS = {
    "gpupool.io/pool": "a100",
    "nvidia.com/gpu.count": "8",
    "topology.kubernetes.io/zone": "z1",
}


def _expr(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, "values": list(values)}


@pytest.mark.parametrize(
    ("exprs", "expected"),
    [
        ([_expr("gpupool.io/pool", "In", "a100", "h100")], True),
        ([_expr("gpupool.io/pool", "NotIn", "a100")], False),
        ([_expr("missing", "NotIn", "a100")], True),
        ([_expr("gpupool.io/pool", "Exists")], True),
        ([_expr("gpupool.io/pool", "DoesNotExist")], False),
        ([_expr("missing", "DoesNotExist")], True),
        ([_expr("nvidia.com/gpu.count", "Gt", "4")], True),
        ([_expr("nvidia.com/gpu.count", "Gt", "8")], False),
        ([_expr("nvidia.com/gpu.count", "Lt", "9")], True),
        ([_expr("nvidia.com/gpu.count", "Lt", "8")], False),
        ([_expr("gpupool.io/pool", "Gt", "1")], False),  # label is not an integer
        ([_expr("missing", "Lt", "100")], False),
        (
            [
                _expr("gpupool.io/pool", "In", "a100"),
                _expr("topology.kubernetes.io/zone", "In", "z2"),
            ],
            False,
        ),
        # Malformed requirements disable the whole term instead of raising.
        ([_expr("nvidia.com/gpu.count", "Gt", "four")], False),
        ([_expr("nvidia.com/gpu.count", "Gt", "1", "2")], False),
        ([_expr("gpupool.io/pool", "In")], False),
        ([_expr("gpupool.io/pool", "Matches", "a.*")], False),
        ([_expr("missing", "DoesNotExist"), _expr("x", "Bogus")], False),
    ],
)
def test_node_selector_term_expressions(exprs: list[dict], expected: bool) -> None:
    term = {"matchExpressions": exprs}
    assert node_selector_term_matches(term, _NODE_LABELS, "gpu-node-1") is expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ([_expr("metadata.name", "In", "gpu-node-1")], True),
        ([_expr("metadata.name", "In", "gpu-node-2")], False),
        ([_expr("metadata.name", "NotIn", "gpu-node-2")], True),
        ([_expr("metadata.name", "NotIn", "gpu-node-1")], False),
        ([_expr("metadata.name", "In", "gpu-node-1", "gpu-node-2")], False),  # one value only
        ([_expr("metadata.name", "Exists")], False),
        ([_expr("spec.unschedulable", "In", "true")], False),
    ],
)
def test_node_selector_term_fields(fields: list[dict], expected: bool) -> None:
    term = {"matchFields": fields}
    assert node_selector_term_matches(term, _NODE_LABELS, "gpu-node-1") is expected


def test_term_with_expressions_and_fields_needs_both() -> None:
    term = {
        "matchExpressions": [_expr("gpupool.io/pool", "In", "a100")],
        "matchFields": [_expr("metadata.name", "In", "gpu-node-1")],
    }
    assert node_selector_term_matches(term, _NODE_LABELS, "gpu-node-1")
    assert not node_selector_term_matches(term, _NODE_LABELS, "gpu-node-2")
    assert not node_selector_term_matches(term, {}, "gpu-node-1")


@pytest.mark.parametrize("term", [{}, {"matchExpressions": []}, {"matchFields": None}])
def test_empty_term_matches_nothing(term: dict) -> None:
    assert not node_selector_term_matches(term, _NODE_LABELS, "gpu-node-1")


def test_node_selector_map() -> None:
    assert node_selector_matches(None, {})
    assert node_selector_matches({}, None)
    assert node_selector_matches({"gpupool.io/pool": "a100"}, _NODE_LABELS)
    assert not node_selector_matches({"gpupool.io/pool": "h100"}, _NODE_LABELS)
    assert not node_selector_matches(
        {"gpupool.io/pool": "a100", "topology.kubernetes.io/zone": "z2"}, _NODE_LABELS
    )
    assert not node_selector_matches({"gpupool.io/pool": "a100"}, None)
    assert not node_selector_matches({"disk": ""}, {})
    assert node_selector_matches({"disk": ""}, {"disk": ""})


def _required(*terms: dict) -> dict:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def test_required_affinity_terms_are_ored() -> None:
    affinity = _required(
        {"matchExpressions": [_expr("gpupool.io/pool", "In", "h100")]},
        {"matchExpressions": [_expr("topology.kubernetes.io/zone", "In", "z1")]},
    )
    assert required_affinity_matches(affinity, _NODE_LABELS, "n")
    assert not required_affinity_matches(affinity, {"gpupool.io/pool": "a100"}, "n")
    assert required_affinity_matches(affinity, {"gpupool.io/pool": "h100"}, "n")


@pytest.mark.parametrize(
    "affinity",
    [
        None,
        {},
        {"podAffinity": {}},
        {"nodeAffinity": {}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
    ],
)
def test_absent_required_affinity_matches(affinity: dict | None) -> None:
    assert required_affinity_matches(affinity, {}, "n")


def test_required_affinity_with_no_usable_terms_matches_nothing() -> None:
    assert not required_affinity_matches(_required(), _NODE_LABELS, "n")
    assert not required_affinity_matches(_required({}), _NODE_LABELS, "n")


def test_preferred_affinity_score() -> None:
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {"matchExpressions": [_expr("gpupool.io/pool", "In", "a100")]},
                },
                {
                    "weight": 30,
                    "preference": {"matchExpressions": [_expr("nvidia.com/gpu.count", "Gt", "4")]},
                },
                {
                    "weight": 7,
                    "preference": {"matchExpressions": [_expr("gpupool.io/pool", "In", "h100")]},
                },
                {"weight": 100, "preference": {}},  # empty preference never matches
                {
                    "weight": 0,
                    "preference": {"matchExpressions": [_expr("gpupool.io/pool", "Exists")]},
                },
                {
                    "weight": 5,
                    "preference": {"matchFields": [_expr("metadata.name", "In", "gpu-node-1")]},
                },
            ]
        }
    }
    assert preferred_affinity_score(affinity, _NODE_LABELS, "gpu-node-1") == 85
    assert preferred_affinity_score(affinity, {"gpupool.io/pool": "h100"}, "x") == 7
    assert preferred_affinity_score(None, _NODE_LABELS, "x") == 0
    assert preferred_affinity_score({"nodeAffinity": {}}, _NODE_LABELS, "x") == 0


# --------------------------------------------------------------------------------------------
# Tolerations
# --------------------------------------------------------------------------------------------

_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        (
            {
                "key": "nvidia.com/gpu",
                "operator": "Equal",
                "value": "present",
                "effect": "NoSchedule",
            },
            True,
        ),
        (
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            True,
        ),  # Equal is the default
        ({"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}, False),
        ({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, False),  # Equal with empty value
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # empty effect: all effects
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"key": "", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"operator": "Exists", "effect": "PreferNoSchedule"}, False),
        (
            {"key": "nvidia.com/gpu", "operator": "Gt", "value": "present"},
            False,
        ),  # unknown operator
    ],
)
def test_single_toleration(toleration: dict, expected: bool) -> None:
    assert tolerates_taint([toleration], _GPU_TAINT) is expected


def test_any_toleration_suffices() -> None:
    tolerations = [
        {"key": "other", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert tolerates_taint(tolerations, _GPU_TAINT)
    assert not tolerates_taint(tolerations[:1], _GPU_TAINT)
    assert not tolerates_taint(None, _GPU_TAINT)
    assert not tolerates_taint([], _GPU_TAINT)


def test_taint_without_value() -> None:
    taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    assert tolerates_taint(
        [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], taint
    )
    assert tolerates_taint(
        [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], taint
    )
    assert not tolerates_taint([{"key": "node.kubernetes.io/unschedulable", "value": "x"}], taint)


def test_label_selector_is_hashable_and_immutable() -> None:
    sel = parse_label_selector("a=b")
    assert {sel: 1}[parse_label_selector("a==b")] == 1
    with pytest.raises(AttributeError):
        sel.requirements = ()  # type: ignore[misc]
    assert isinstance(sel, LabelSelector)
