"""PATCH bodies as kubectl, kubernetes_asyncio and KubeSpawner send them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpupool.sim.objects.patch import (
    ATOMIC,
    JSON_PATCH,
    MERGE_PATCH,
    PRIMITIVE_SET,
    STRATEGIC_MERGE_PATCH,
    SUPPORTED_PATCH_TYPES,
    PatchError,
    UnsupportedPatchType,
    apply_patch,
    json_patch,
    list_strategy,
    merge_patch,
    strategic_merge_patch,
)


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "jupyter-ana",
            "namespace": "hub",
            "labels": {"app": "jupyterhub", "component": "singleuser-server", "tier": "gpu"},
            "annotations": {"hub.jupyter.org/username": "ana"},
            "finalizers": ["gpupool.io/accounting"],
            "ownerReferences": [{"uid": "u1", "kind": "Node", "name": "n1"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "notebook",
                    "image": "jupyter/base:1",
                    "env": [
                        {"name": "JUPYTERHUB_USER", "value": "ana"},
                        {"name": "MEM_LIMIT", "value": "1Gi"},
                    ],
                    "ports": [{"containerPort": 8888, "name": "notebook-port"}],
                    "volumeMounts": [{"mountPath": "/home/jovyan", "name": "home"}],
                },
                {"name": "sidecar", "image": "busybox", "args": ["sleep", "inf"]},
            ],
            "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-ana"}}],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "hub.jupyter.org/dedicated", "operator": "Equal", "value": "user"},
            ],
            "nodeSelector": {"gpupool.io/pool": "a100"},
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            ],
            "containerStatuses": [{"name": "notebook", "ready": False}],
        },
    }


# --------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)
# --------------------------------------------------------------------------------------------


def test_merge_patch_removes_a_label_with_null() -> None:
    pod = _pod()
    out = merge_patch(pod, {"metadata": {"labels": {"tier": None, "new": "x"}}})
    assert out["metadata"]["labels"] == {
        "app": "jupyterhub",
        "component": "singleuser-server",
        "new": "x",
    }
    assert out["spec"] == pod["spec"]
    assert pod == _pod()  # input untouched


def test_merge_patch_replaces_lists() -> None:
    out = merge_patch(_pod(), {"spec": {"containers": [{"name": "only"}]}})
    assert out["spec"]["containers"] == [{"name": "only"}]


# The examples from RFC 7386 appendix A.
@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc_examples(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_result_does_not_alias_inputs() -> None:
    target = {"keep": {"deep": [1]}}
    patch = {"new": {"list": [1, 2]}}
    out = merge_patch(target, patch)
    out["keep"]["deep"].append(2)
    out["new"]["list"].append(3)
    assert target == {"keep": {"deep": [1]}}
    assert patch == {"new": {"list": [1, 2]}}


_json_scalars = (
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="ab $é", max_size=3)
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="ab $é", max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(alphabet="abc", max_size=2), _json, max_size=4)


@settings(max_examples=50)  # keep the file fast; the inputs are small
@given(_objects)
def test_merge_patch_with_empty_patch_is_identity(doc: dict) -> None:
    assert merge_patch(doc, {}) == doc


@settings(max_examples=50)  # keep the file fast; the inputs are small
@given(_objects, _objects)
def test_merge_patch_is_idempotent_and_pure(target: dict, patch: dict) -> None:
    before_target, before_patch = copy.deepcopy(target), copy.deepcopy(patch)
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once
    assert target == before_target
    assert patch == before_patch


# --------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)
# --------------------------------------------------------------------------------------------


def test_json_patch_add_label() -> None:
    pod = _pod()
    out = json_patch(pod, [{"op": "add", "path": "/metadata/labels/x", "value": "y"}])
    assert out["metadata"]["labels"]["x"] == "y"
    assert "x" not in pod["metadata"]["labels"]


def test_json_patch_operations() -> None:
    ops = [
        {"op": "test", "path": "/status/phase", "value": "Pending"},
        {"op": "replace", "path": "/status/phase", "value": "Running"},
        {"op": "remove", "path": "/metadata/labels/tier"},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "X", "value": "1"}},
        {"op": "copy", "from": "/metadata/name", "path": "/metadata/annotations/copied"},
        {"op": "move", "from": "/spec/nodeSelector", "path": "/spec/oldNodeSelector"},
        # "~1" escapes "/" in a JSON pointer (label keys often have one).
        {"op": "add", "path": "/metadata/labels/gpupool.io~1pool", "value": "a100"},
    ]
    out = json_patch(_pod(), ops)
    assert out["status"]["phase"] == "Running"
    assert "tier" not in out["metadata"]["labels"]
    assert out["spec"]["containers"][0]["env"][-1] == {"name": "X", "value": "1"}
    assert out["metadata"]["annotations"]["copied"] == "jupyter-ana"
    assert "nodeSelector" not in out["spec"]
    assert out["spec"]["oldNodeSelector"] == {"gpupool.io/pool": "a100"}
    assert out["metadata"]["labels"]["gpupool.io/pool"] == "a100"


def test_json_patch_failed_test_op_is_a_patch_error() -> None:
    pod = _pod()
    with pytest.raises(PatchError) as info:
        json_patch(
            pod,
            [
                {"op": "test", "path": "/status/phase", "value": "Running"},
                {"op": "replace", "path": "/status/phase", "value": "Failed"},
            ],
        )
    assert "Pending" in str(info.value)  # the library's message names the actual value
    assert pod == _pod()


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add", "path": "/a", "value": 1},  # not a list
        "[]",
        [42],
        [{"path": "/a", "value": 1}],  # no op
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "/a"}],  # no value
        [{"op": "add", "value": 1}],  # no path
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        [{"op": "replace", "path": "/nope/deeper", "value": 1}],
        [{"op": "add", "path": "/metadata/labels/a/b", "value": 1}],  # into a string
        [{"op": "add", "path": "/spec/containers/9", "value": {}}],
        [{"op": "add", "path": "metadata", "value": {}}],  # not a JSON pointer
        [{"op": "move", "from": "/metadata", "path": "/metadata/labels"}],
    ],
)
def test_json_patch_errors(ops: Any) -> None:
    with pytest.raises(PatchError):
        json_patch(_pod(), ops)


def test_json_patch_result_does_not_alias_the_ops() -> None:
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    out = json_patch({"metadata": {}}, ops)
    out["metadata"]["labels"]["c"] = "d"
    assert ops[0]["value"] == {"a": "b"}


# --------------------------------------------------------------------------------------------
# Strategic merge patch
# --------------------------------------------------------------------------------------------


def test_smp_adds_env_to_one_container_and_deletes_another_container() -> None:
    pod = _pod()
    patch = {
        "spec": {
            "containers": [
                {"name": "notebook", "env": [{"name": "GPU_POOL", "value": "a100"}]},
                {"name": "sidecar", "$patch": "delete"},
            ]
        }
    }
    out = strategic_merge_patch(pod, patch, "Pod")
    containers = out["spec"]["containers"]
    assert [c["name"] for c in containers] == ["notebook"]
    assert containers[0]["image"] == "jupyter/base:1"
    assert containers[0]["env"] == [
        {"name": "JUPYTERHUB_USER", "value": "ana"},
        {"name": "MEM_LIMIT", "value": "1Gi"},
        {"name": "GPU_POOL", "value": "a100"},
    ]
    assert containers[0]["ports"] == [{"containerPort": 8888, "name": "notebook-port"}]
    assert pod == _pod()
    assert patch["spec"]["containers"][1] == {"name": "sidecar", "$patch": "delete"}


def test_smp_updates_and_deletes_env_vars_by_name() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "notebook",
                    "env": [
                        {"name": "MEM_LIMIT", "value": "2Gi"},
                        {"name": "JUPYTERHUB_USER", "$patch": "delete"},
                    ],
                }
            ]
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["spec"]["containers"][0]["env"] == [{"name": "MEM_LIMIT", "value": "2Gi"}]
    assert out["spec"]["containers"][1]["name"] == "sidecar"


def test_smp_new_container_is_appended_with_directives_cleaned() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "debug",
                    "image": "busybox",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "$patch": "delete"}],
                    "resources": {"limits": None, "requests": {"cpu": "1"}},
                }
            ],
            "initContainers": [{"name": "init", "image": "busybox"}],
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["notebook", "sidecar", "debug"]
    assert out["spec"]["containers"][2] == {
        "name": "debug",
        "image": "busybox",
        "env": [{"name": "A", "value": "1"}],
        "resources": {"requests": {"cpu": "1"}},
    }
    assert out["spec"]["initContainers"] == [{"name": "init", "image": "busybox"}]


def test_smp_container_lists_merge_by_their_own_keys() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "notebook",
                    "ports": [{"containerPort": 8888, "protocol": "TCP"}, {"containerPort": 9090}],
                    "volumeMounts": [{"mountPath": "/home/jovyan", "readOnly": True}],
                    "args": ["--debug"],  # no strategy: replaced
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    c = out["spec"]["containers"][0]
    assert c["ports"] == [
        {"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"},
        {"containerPort": 9090},
    ]
    assert c["volumeMounts"] == [{"mountPath": "/home/jovyan", "name": "home", "readOnly": True}]
    assert c["args"] == ["--debug"]
    assert [v["name"] for v in out["spec"]["volumes"]] == ["home", "scratch"]


def test_smp_labels_null_deletes_and_maps_merge() -> None:
    patch = {"metadata": {"labels": {"tier": None, "gpupool.io/pool": "a100"}}}
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["metadata"]["labels"] == {
        "app": "jupyterhub",
        "component": "singleuser-server",
        "gpupool.io/pool": "a100",
    }
    assert out["metadata"]["annotations"] == {"hub.jupyter.org/username": "ana"}


def test_smp_tolerations_are_replaced() -> None:
    patch = {"spec": {"tolerations": [{"key": "x", "operator": "Exists"}]}}
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["spec"]["tolerations"] == [{"key": "x", "operator": "Exists"}]


def test_smp_status_conditions_merge_by_type_and_container_statuses_replace() -> None:
    # The shape of a kubelet status update (a PATCH to pods/<name>/status).
    patch = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": None},
                {"type": "Initialized", "status": "True"},
            ],
            "containerStatuses": [{"name": "notebook", "ready": True, "restartCount": 0}],
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["status"]["phase"] == "Running"
    assert out["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
        {"type": "Initialized", "status": "True"},
    ]
    assert out["status"]["containerStatuses"] == [
        {"name": "notebook", "ready": True, "restartCount": 0}
    ]


def test_smp_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    out = strategic_merge_patch(
        _pod(), {"metadata": {"finalizers": ["gpupool.io/accounting", "x/y"]}}, "Pod"
    )
    assert out["metadata"]["finalizers"] == ["gpupool.io/accounting", "x/y"]
    out = strategic_merge_patch(
        out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["gpupool.io/accounting"]}}, "Pod"
    )
    assert out["metadata"]["finalizers"] == ["x/y"]
    # Deleting from a list that is not there is fine.
    out = strategic_merge_patch(
        {"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, "Pod"
    )
    assert out == {"metadata": {}}


def test_smp_owner_references_merge_by_uid() -> None:
    patch = {
        "metadata": {
            "ownerReferences": [
                {"uid": "u1", "controller": True},
                {"uid": "u2", "kind": "Node", "name": "n2"},
            ]
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["metadata"]["ownerReferences"] == [
        {"uid": "u1", "kind": "Node", "name": "n1", "controller": True},
        {"uid": "u2", "kind": "Node", "name": "n2"},
    ]


def test_smp_patch_replace_on_a_map() -> None:
    patch = {"metadata": {"labels": {"$patch": "replace", "only": "this"}}}
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["metadata"]["labels"] == {"only": "this"}
    assert out["metadata"]["annotations"] == {"hub.jupyter.org/username": "ana"}


def test_smp_patch_replace_on_the_whole_object() -> None:
    out = strategic_merge_patch(_pod(), {"$patch": "replace", "metadata": {"name": "x"}}, "Pod")
    assert out == {"metadata": {"name": "x"}}


def test_smp_patch_delete_on_a_map() -> None:
    out = strategic_merge_patch(_pod(), {"spec": {"nodeSelector": {"$patch": "delete"}}}, "Pod")
    assert "nodeSelector" not in out["spec"]
    assert strategic_merge_patch(_pod(), {"$patch": "delete"}, "Pod") == {}
    # Deleting a map that is not there leaves nothing behind.
    out = strategic_merge_patch({"spec": {}}, {"spec": {"affinity": {"$patch": "delete"}}}, "Pod")
    assert out == {"spec": {}}


def test_smp_patch_replace_as_a_list_item() -> None:
    patch = {
        "spec": {
            "containers": [
                {"name": "fresh", "image": "x"},
                {"$patch": "replace"},
            ]
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["spec"]["containers"] == [{"name": "fresh", "image": "x"}]
    set_patch = {"metadata": {"finalizers": ["only", {"$patch": "replace"}]}}
    assert strategic_merge_patch(_pod(), set_patch, "Pod")["metadata"]["finalizers"] == ["only"]


def test_smp_directive_items_do_not_survive_in_atomic_lists() -> None:
    patch = {"spec": {"tolerations": [{"$patch": "replace"}, {"key": "a", "operator": "Exists"}]}}
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["spec"]["tolerations"] == [{"key": "a", "operator": "Exists"}]


def test_smp_retain_keys() -> None:
    # kubectl apply sends $retainKeys for union types such as a volume's source.
    patch = {
        "spec": {
            "volumes": [
                {
                    "name": "home",
                    "$retainKeys": ["name", "emptyDir"],
                    "emptyDir": {"medium": "Memory"},
                }
            ]
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["spec"]["volumes"] == [{"name": "home", "emptyDir": {"medium": "Memory"}}]


def test_smp_retain_keys_must_list_the_patched_keys() -> None:
    patch = {"spec": {"$retainKeys": ["containers"], "nodeName": "n1"}}
    with pytest.raises(PatchError, match="retainKeys"):
        strategic_merge_patch(_pod(), patch, "Pod")


def test_smp_set_element_order() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "notebook"}],
            "containers": [{"name": "sidecar", "image": "busybox:2"}],
        }
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "notebook"]
    assert out["spec"]["containers"][0]["image"] == "busybox:2"
    assert not any(k.startswith("$") for k in out["spec"])


def test_smp_set_element_order_keeps_unlisted_items_in_place() -> None:
    target = {"metadata": {"finalizers": ["a", "b", "c", "d"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["d", "b"], "finalizers": ["d"]}}
    out = strategic_merge_patch(target, patch, "Pod")
    # Listed items follow the directive (d before b); an unlisted item is placed before the next
    # listed one when it sat before it in the original list (a and c both sat before d).
    assert out["metadata"]["finalizers"] == ["a", "c", "d", "b"]
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}
    out = strategic_merge_patch(target, patch, "Pod")
    assert out["metadata"]["finalizers"] == ["b", "a", "c", "d"]


def test_smp_set_element_order_on_a_replaced_list_is_ignored() -> None:
    patch = {
        "spec": {"$setElementOrder/tolerations": [{"key": "b"}], "tolerations": [{"key": "a"}]}
    }
    out = strategic_merge_patch(_pod(), patch, "Pod")
    assert out["spec"] == {**_pod()["spec"], "tolerations": [{"key": "a"}]}


def test_smp_node_conditions_addresses_and_taints() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {"gpupool.io/pool": "a100"}},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "t0"},
                {"type": "MemoryPressure", "status": "False"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ],
            "capacity": {"cpu": "64", "nvidia.com/gpu": "8"},
        },
    }
    patch = {
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "podCIDRs": ["10.0.1.0/24"]},
        "status": {
            "conditions": [{"type": "Ready", "lastHeartbeatTime": "t1"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
            "capacity": {"nvidia.com/gpu": "7"},
        },
    }
    out = strategic_merge_patch(node, patch, "Node")
    assert out["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    assert out["spec"]["podCIDRs"] == ["10.0.0.0/24", "10.0.1.0/24"]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"},
        {"type": "MemoryPressure", "status": "False"},
    ]
    assert out["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.2"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert out["status"]["capacity"] == {"cpu": "64", "nvidia.com/gpu": "7"}


def test_smp_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}}
    patch = {"spec": {"ports": [{"port": 443, "name": "https"}, {"port": 8081}]}}
    out = strategic_merge_patch(svc, patch, "Service")
    assert out["spec"]["ports"] == [
        {"port": 80, "targetPort": 8080},
        {"port": 443, "targetPort": 8443, "name": "https"},
        {"port": 8081},
    ]


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_smp_data_maps_merge(kind: str) -> None:
    cm = {"data": {"a": "1", "b": "2"}, "metadata": {"name": "x"}}
    out = strategic_merge_patch(cm, {"data": {"a": None, "c": "3"}}, kind)
    assert out["data"] == {"b": "2", "c": "3"}


def test_smp_pvc_and_namespace_conditions() -> None:
    for kind in ("PersistentVolumeClaim", "Namespace"):
        obj = {"status": {"conditions": [{"type": "A", "status": "True"}]}}
        out = strategic_merge_patch(obj, {"status": {"conditions": [{"type": "B"}]}}, kind)
        assert out["status"]["conditions"] == [{"type": "A", "status": "True"}, {"type": "B"}]


def test_smp_unknown_kind_replaces_lists() -> None:
    obj = {"spec": {"containers": [{"name": "a"}], "m": {"x": 1}}}
    out = strategic_merge_patch(
        obj, {"spec": {"containers": [{"name": "b"}], "m": {"y": 2}}}, "Widget"
    )
    assert out == {"spec": {"containers": [{"name": "b"}], "m": {"x": 1, "y": 2}}}


def test_smp_event_kind_merges_maps() -> None:
    ev = {"count": 1, "involvedObject": {"kind": "Pod", "name": "p"}, "message": "m"}
    out = strategic_merge_patch(ev, {"count": 2, "lastTimestamp": "t"}, "Event")
    assert out == {**ev, "count": 2, "lastTimestamp": "t"}


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"spec": {"containers": [{"image": "x"}]}}, "merge key 'name'"),
        ({"spec": {"containers": ["notebook"]}}, "merge key 'name'"),
        ({"spec": {"containers": [{"$patch": "delete"}]}}, "lacks the merge key"),
        ({"spec": {"containers": [{"$patch": "merge", "name": "x"}]}}, "invalid $patch"),
        ({"metadata": {"labels": {"$patch": "explode"}}}, "invalid $patch"),
        ({"spec": {"$frobnicate": 1}}, "unknown strategic merge patch directive"),
        ({"spec": {"$setElementOrder/containers": "x"}}, "must be a list"),
        ({"spec": {"$deleteFromPrimitiveList/x": "x"}}, "must be a list"),
        ({"spec": {"$retainKeys": "containers"}}, "$retainKeys must be a list"),
    ],
)
def test_smp_errors(patch: dict, fragment: str) -> None:
    with pytest.raises(PatchError) as info:
        strategic_merge_patch(_pod(), patch, "Pod")
    assert fragment in str(info.value)
    assert "unsupported" not in str(info.value).lower()  # the server maps "unsupported" to 415


def test_smp_errors_name_the_path() -> None:
    patch = {"spec": {"containers": [{"name": "notebook", "env": [{"value": "x"}]}]}}
    with pytest.raises(PatchError, match=r"spec\.containers\[\*\]\.env"):
        strategic_merge_patch(_pod(), patch, "Pod")


def test_smp_rejects_non_object_patches() -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch(_pod(), [{"op": "add"}], "Pod")


def test_smp_type_change_replaces_value() -> None:
    out = strategic_merge_patch(
        {"spec": {"x": [1], "y": {"a": 1}}}, {"spec": {"x": {"a": None, "b": 1}, "y": 3}}, "Pod"
    )
    assert out == {"spec": {"x": {"b": 1}, "y": 3}}


def test_smp_does_not_mutate_or_alias_inputs() -> None:
    pod = _pod()
    patch = {
        "metadata": {"labels": {"tier": None}, "$deleteFromPrimitiveList/finalizers": ["x"]},
        "spec": {"containers": [{"name": "notebook", "env": [{"name": "N", "value": "1"}]}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    frozen_patch = copy.deepcopy(patch)
    out = strategic_merge_patch(pod, patch, "Pod")
    assert pod == _pod()
    assert patch == frozen_patch
    out["spec"]["containers"][0]["env"][-1]["value"] = "changed"
    out["spec"]["volumes"][0]["name"] = "changed"
    assert patch == frozen_patch
    assert pod == _pod()


_no_directive_keys = st.text(alphabet="abc", max_size=2)
# Inside lists there are no nulls: a strategic merge patch drops them there (Kubernetes decodes
# them away too), while a JSON merge patch copies lists verbatim.
_null_free_json = st.recursive(
    st.booleans() | st.integers(-5, 5) | st.text(alphabet="ab $é", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_no_directive_keys, inner, max_size=3)
    ),
    max_leaves=8,
)
_plain_json = st.recursive(
    _json_scalars | st.lists(_null_free_json, max_size=3),
    lambda inner: st.dictionaries(_no_directive_keys, inner, max_size=3),
    max_leaves=12,
)
_plain_objects = st.dictionaries(_no_directive_keys, _plain_json, max_size=4)


@settings(max_examples=50)  # keep the file fast; the inputs are small
@given(_plain_objects, _plain_objects)
def test_smp_without_strategies_or_directives_is_a_merge_patch(target: dict, patch: dict) -> None:
    assert strategic_merge_patch(target, patch, "Widget") == merge_patch(target, patch)


@settings(max_examples=50)  # keep the file fast; the inputs are small
@given(_plain_objects)
def test_smp_with_empty_patch_is_identity(target: dict) -> None:
    assert strategic_merge_patch(target, {}, "Pod") == target


def test_list_strategy_table() -> None:
    assert list_strategy("Pod", "spec.containers") == "name"
    assert list_strategy("Pod", "spec.initContainers[*].env") == "name"
    assert list_strategy("Pod", "spec.ephemeralContainers[*].volumeDevices") == "devicePath"
    assert list_strategy("Pod", "spec.containers[*].ports") == "containerPort"
    assert list_strategy("Pod", "metadata.finalizers") == PRIMITIVE_SET
    assert list_strategy("Pod", "spec.tolerations") == ATOMIC
    assert list_strategy("Pod", "status.containerStatuses") == ATOMIC
    assert list_strategy("Node", "spec.taints") == ATOMIC
    assert list_strategy("Node", "status.addresses") == "type"
    assert list_strategy("Service", "spec.ports") == "port"
    assert list_strategy("Widget", "spec.containers") == ATOMIC


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------


def test_apply_patch_dispatches_on_content_type() -> None:
    pod = _pod()
    env_patch = {
        "spec": {"containers": [{"name": "notebook", "env": [{"name": "A", "value": "1"}]}]}
    }
    smp = apply_patch(pod, env_patch, STRATEGIC_MERGE_PATCH, "Pod")
    assert len(smp["spec"]["containers"]) == 2
    merged = apply_patch(pod, env_patch, MERGE_PATCH, "Pod")
    assert merged["spec"]["containers"] == env_patch["spec"]["containers"]
    jp = apply_patch(pod, [{"op": "remove", "path": "/spec/containers/1"}], JSON_PATCH, "Pod")
    assert len(jp["spec"]["containers"]) == 1
    assert (
        apply_patch(pod, {"a": 1}, "application/merge-patch+json; charset=utf-8", "Pod")["a"] == 1
    )
    assert apply_patch(pod, {"a": 1}, "Application/Strategic-Merge-Patch+JSON", "Pod")["a"] == 1
    assert pod == _pod()


@pytest.mark.parametrize(
    "content_type", ["application/apply-patch+yaml", "application/json", "text/plain", ""]
)
def test_apply_patch_rejects_other_media_types(content_type: str) -> None:
    with pytest.raises(UnsupportedPatchType) as info:
        apply_patch(_pod(), {}, content_type, "Pod")
    assert isinstance(info.value, PatchError)
    message = str(info.value)
    assert "unsupported" in message.lower()
    for supported in SUPPORTED_PATCH_TYPES:
        assert supported in message


def test_supported_patch_types() -> None:
    assert set(SUPPORTED_PATCH_TYPES) == {
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    }


def test_json_patch_errors_do_not_look_like_415() -> None:
    with pytest.raises(PatchError) as info:
        apply_patch(_pod(), [{"op": "bogus", "path": "/a"}], JSON_PATCH, "Pod")
    assert not isinstance(info.value, UnsupportedPatchType)
    assert "unsupported" not in str(info.value).lower()
