"""The core/v1 resources the simulated API server serves, and their discovery documents."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    # Resources with a status subresource keep status out of main-resource writes, as the
    # real API server does (an update of the pod cannot change its phase).
    has_status: bool = False
    # DNS-1123 label (63 chars) instead of DNS-1123 subdomain (253 chars) names.
    label_names: bool = False

    @property
    def singular(self) -> str:
        return self.kind.lower()


RESOURCES: dict[str, Resource] = {
    r.plural: r
    for r in (
        Resource("namespaces", "Namespace", False, ("ns",), has_status=True, label_names=True),
        Resource("nodes", "Node", False, ("no",), has_status=True),
        Resource("pods", "Pod", True, ("po",), has_status=True),
        Resource("events", "Event", True, ("ev",)),
        Resource("persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), True),
        Resource("secrets", "Secret", True),
        Resource("services", "Service", True, ("svc",), has_status=True, label_names=True),
        Resource("configmaps", "ConfigMap", True, ("cm",)),
        Resource("serviceaccounts", "ServiceAccount", True, ("sa",)),
    )
}

KIND_TO_RESOURCE = {r.kind: r for r in RESOURCES.values()}

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-gpupool-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERBS_NAMESPACED = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
]


def api_versions() -> dict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def api_resource_list() -> dict:
    """``GET /api/v1``: what kubectl reads to map ``pods``/``po``/``Pod`` to a URL."""
    items = []
    for r in RESOURCES.values():
        items.append(
            {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(_VERBS_NAMESPACED),
                "shortNames": list(r.short_names),
            }
        )
        if r.has_status:
            items.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    items.append(
        {
            "name": "pods/log",
            "singularName": "",
            "namespaced": True,
            "kind": "Pod",
            "verbs": ["get"],
        }
    )
    items.append(
        {
            "name": "pods/binding",
            "singularName": "",
            "namespaced": True,
            "kind": "Binding",
            "verbs": ["create"],
        }
    )
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": items}


def api_group_list() -> dict:
    # Only the core group: no apps/, batch/ … The real clients handle an empty list.
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}


def openapi_v3_root() -> dict:
    return {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=gpupool-sim"}}}


def openapi_v3_core() -> dict:
    """Just enough OpenAPI v3 for kubectl to see that the server takes ``fieldValidation``.

    kubectl then leaves validation to the server instead of downloading full schemas. The
    simulator checks names, labels, containers and quantities, not unknown fields.
    """
    params = [
        {"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
        for n in ("dryRun", "fieldManager", "fieldValidation", "force")
    ]
    paths: dict = {}
    for r in RESOURCES.values():
        item_path = (
            f"/api/v1/namespaces/{{namespace}}/{r.plural}/{{name}}"
            if r.namespaced
            else f"/api/v1/{r.plural}/{{name}}"
        )
        gvk = {"group": "", "version": "v1", "kind": r.kind}
        paths[item_path] = {
            "patch": {
                "operationId": f"patch{'Namespaced' if r.namespaced else ''}{r.kind}",
                "parameters": params,
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (gpupool sim)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }
