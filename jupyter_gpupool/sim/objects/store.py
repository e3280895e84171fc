"""The simulated API server's object store: what etcd plus the API server's registry do.

Objects are plain JSON dicts and are never mutated once stored: every write stores a new dict,
so watch history and watchers can hold references without copying. :class:`Store` makes the
writes (create, replace, patch, bind, delete, with the API server's rules and the garbage
collector's); what is stored, its history and how clients read it (get, list in pages, watch)
are its base's, :class:`~.listwatch.ListWatch`.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

from .defaults import apply_defaults, canonical_quantities, now_iso
from .errors import ApiError, conflict, invalid, not_found
from .listwatch import Key, ListWatch, Obj
from .patch import PatchError, apply_patch
from .pod_events import pod_event
from .resources import RESOURCES, Resource
from .validation import check_pod_update, validate


class Store(ListWatch):
    """All objects of the simulated cluster, and the writes that change them."""

    def __init__(self, history_size: int = 10000, clock: Callable[[], float] = time.time):
        super().__init__(history_size)
        self.clock = clock
        self._last_event_stamp = 0  # events' names: unique even within one clock tick
        self._owned: set[tuple[str, Key]] = set()  # objects that carry ownerReferences
        # Pods being deleted gracefully wait for the kubelet to finish them.
        self.graceful_pods = True

    # ---- helpers -------------------------------------------------------------------------

    def _require_namespace(self, res: Resource, namespace: str | None) -> None:
        if res.namespaced:
            if not namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            if ("", namespace) not in self.objects["namespaces"]:
                raise ApiError(
                    404,
                    f'namespaces "{namespace}" not found',
                    details={"name": namespace, "kind": "namespaces"},
                )

    # ---- writes ----------------------------------------------------------------------

    def create(self, plural: str, namespace: str | None, body: Obj) -> Obj:
        res = self.resource(plural)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        obj = copy.deepcopy(body)
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise ApiError(400, "metadata must be an object")
        if res.namespaced:
            body_ns = md.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            namespace = namespace or body_ns or "default"
            self._require_namespace(res, namespace)
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        if not md.get("name"):
            gen = md.get("generateName")
            if not gen:
                raise invalid(
                    res, "", [("metadata.name", "Required value: name or generateName is required")]
                )
            alphabet = "bcdfghjklmnpqrstvwxz2456789"  # what the API server uses
            md["name"] = gen + "".join(secrets.choice(alphabet) for _ in range(5))
        key = self._key(res, namespace, md["name"])
        if key in self.objects[plural]:
            raise ApiError(
                409,
                f'{res.plural} "{md["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": md["name"], "kind": res.plural},
            )
        obj["kind"] = res.kind
        obj["apiVersion"] = "v1"
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_iso(self.clock())
        md.pop("deletionTimestamp", None)
        md.pop("resourceVersion", None)
        apply_defaults(res, obj, self.rv, self.clock())
        validate(res, obj)
        canonical_quantities(res, obj)
        md["resourceVersion"] = self._next_rv()
        self.objects[plural][key] = obj
        self._sorted_keys.pop(plural, None)
        if md.get("ownerReferences"):
            self._owned.add((plural, key))
        self._commit("ADDED", res, obj, None)
        return obj

    def replace(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        body: Obj,
        subresource: str | None = None,
    ) -> Obj:
        res = self.resource(plural)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        key = self._key(res, namespace, name)
        old = self.objects[plural].get(key)
        if old is None:
            raise not_found(res, name)
        new = copy.deepcopy(body)
        md = new.setdefault("metadata", {})
        if md.get("name", name) != name:
            raise ApiError(
                400,
                f"the name of the object ({md.get('name')}) does not match the name on the URL ({name})",
            )
        want_rv = md.get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        return self._store_update(res, key, old, new, subresource)

    def patch(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        body: Any,
        content_type: str,
        subresource: str | None = None,
    ) -> Obj:
        res = self.resource(plural)
        key = self._key(res, namespace, name)
        old = self.objects[plural].get(key)
        if old is None:
            raise not_found(res, name)
        try:
            new = apply_patch(old, body, content_type, res.kind)
        except PatchError as e:
            code = 415 if "unsupported" in str(e).lower() else 422
            raise ApiError(code, str(e)) from None
        if not isinstance(new, dict):
            raise ApiError(422, "the patch must produce an object")
        want_rv = (new.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        return self._store_update(res, key, old, new, subresource)

    def _store_update(
        self, res: Resource, key: Key, old: Obj, new: Obj, subresource: str | None
    ) -> Obj:
        if subresource not in (None, "status"):
            raise ApiError(404, f"the server could not find the requested resource ({subresource})")
        md = new.setdefault("metadata", {})
        # Fields the server owns.
        for f in (
            "uid",
            "creationTimestamp",
            "name",
            "namespace",
            "deletionTimestamp",
            "generation",
        ):
            if f in old["metadata"]:
                md[f] = old["metadata"][f]
            else:
                md.pop(f, None)
        if "deletionGracePeriodSeconds" in old["metadata"]:
            md["deletionGracePeriodSeconds"] = old["metadata"]["deletionGracePeriodSeconds"]
        new["kind"] = res.kind
        new["apiVersion"] = "v1"
        if res.has_status:
            if subresource == "status":
                # Only status changes through /status (plus labels/annotations, as k8s allows
                # nothing else: keep the rest of the old object).
                kept = copy.deepcopy(old)
                kept["status"] = new.get("status", {})
                new = kept
                md = new["metadata"]
            else:
                new["status"] = copy.deepcopy(old.get("status", {}))
        if res.kind == "Pod" and subresource is None:
            check_pod_update(res, old, new)
        if res.kind == "Secret" and "stringData" in new:
            string_data = new.pop("stringData") or {}
            data = new.setdefault("data", {}) or {}
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        validate(res, new)
        canonical_quantities(res, new)
        if _without_rv(new) == _without_rv(old):
            return old  # no-op writes don't bump resourceVersion (as the real server)
        md["resourceVersion"] = self._next_rv()
        self.objects[res.plural][key] = new
        if md.get("ownerReferences"):
            self._owned.add((res.plural, key))
        else:
            self._owned.discard((res.plural, key))
        self._commit("MODIFIED", res, new, old)
        self._finish_if_released(res, key, new)
        return new

    def _pod_awaits_kubelet(self, pod: Obj) -> bool:
        return bool(
            self.graceful_pods
            and pod.get("spec", {}).get("nodeName")
            and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        )

    def delete(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        grace_period: int | None = None,
        propagation: str | None = None,
        preconditions: dict | None = None,
    ) -> Obj:
        res = self.resource(plural)
        key = self._key(res, namespace, name)
        obj = self.objects[plural].get(key)
        if obj is None:
            raise not_found(res, name)
        if preconditions:
            if preconditions.get("uid") and preconditions["uid"] != obj["metadata"]["uid"]:
                raise ApiError(
                    409,
                    f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in object meta: {obj['metadata']['uid']}",
                )
            rv = preconditions.get("resourceVersion")
            if rv and rv != obj["metadata"]["resourceVersion"]:
                raise conflict(res, name)
        if propagation == "Orphan":
            self._orphan(obj["metadata"]["uid"])
        if res.kind == "Namespace":
            return self._delete_namespace(key, obj)
        md = obj["metadata"]
        grace = grace_period
        if res.kind == "Pod":
            if grace is None:
                grace = obj.get("spec", {}).get("terminationGracePeriodSeconds", 30)
            if grace and self._pod_awaits_kubelet(obj):
                if md.get("deletionTimestamp"):
                    return obj  # already terminating
                return self._mark_terminating(res, key, obj, grace)
        if md.get("finalizers"):
            if md.get("deletionTimestamp"):
                return obj
            return self._mark_terminating(res, key, obj, 0)
        return self._remove(res, key)

    def _mark_terminating(self, res: Resource, key: Key, obj: Obj, grace: int) -> Obj:
        new = copy.deepcopy(obj)
        new["metadata"]["deletionTimestamp"] = now_iso(self.clock() + grace)
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        new["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[res.plural][key] = new
        self._commit("MODIFIED", res, new, obj)
        return new

    def bind(self, namespace: str, name: str, node: str) -> Obj:
        """What ``POST pods/NAME/binding`` does: set ``spec.nodeName`` once."""
        res = RESOURCES["pods"]
        key = (namespace, name)
        old = self.objects["pods"].get(key)
        if old is None:
            raise not_found(res, name)
        if old.get("spec", {}).get("nodeName"):
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already '
                f'assigned to node "{old["spec"]["nodeName"]}"',
            )
        if ("", node) not in self.objects["nodes"]:
            raise not_found(RESOURCES["nodes"], node)
        new = copy.deepcopy(old)
        new["spec"]["nodeName"] = node
        conds = [c for c in new["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
        now = now_iso(self.clock())
        conds.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now,
            }
        )
        new["status"]["conditions"] = conds
        return self.write_internal(res, key, old, new)

    def write_internal(self, res: Resource, key: Key, old: Obj, new: Obj) -> Obj:
        """A write by the cluster's own components (scheduler, kubelet): no update rules."""
        if _without_rv(new) == _without_rv(old):
            return old
        new["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[res.plural][key] = new
        self._commit("MODIFIED", res, new, old)
        self._finish_if_released(res, key, new)
        return new

    def _finish_if_released(self, res: Resource, key: Key, obj: Obj) -> None:
        """A terminating object whose finalizers are all gone is removed (pods: by the kubelet)."""
        md = obj["metadata"]
        if (
            md.get("deletionTimestamp")
            and not md.get("finalizers")
            and not (res.kind == "Pod" and self._pod_awaits_kubelet(obj))
        ):
            self._remove(res, key)

    def record_pod_event(
        self,
        pod: Obj,
        etype: str,
        reason: str,
        message: str,
        component: str,
        host: str | None = None,
    ) -> Obj | None:
        """Create a core/v1 Event about ``pod``, as a cluster component reports one.

        Two shapes, as v1.25 writes them: kube-scheduler records through ``events.k8s.io/v1``
        (``eventTime`` in microseconds, ``action``, ``reportingComponent``/``reportingInstance``;
        no ``source``, null ``firstTimestamp``/``lastTimestamp``, no ``count``); the kubelet, on
        client-go's legacy recorder, writes ``source``, ``firstTimestamp``/``lastTimestamp`` and
        ``count`` 1, with a null ``eventTime`` and empty reporting fields."""
        md = pod["metadata"]
        now = self.clock()
        stamp = max(int(now * 1e9), self._last_event_stamp + 1)
        self._last_event_stamp = stamp
        event = pod_event(pod, etype, reason, message, component, host, now, stamp)
        try:
            return self.create("events", md["namespace"], event)
        except ApiError:  # e.g. the namespace is being deleted
            return None

    def finish_pod_deletion(self, namespace: str, name: str) -> None:
        """The kubelet has stopped the pod's containers: the object goes away."""
        res = RESOURCES["pods"]
        key = (namespace, name)
        if key in self.objects["pods"]:
            self._remove(res, key)

    def _remove(self, res: Resource, key: Key) -> Obj:
        obj = self.objects[res.plural].pop(key)
        self._sorted_keys.pop(res.plural, None)
        self._owned.discard((res.plural, key))
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._commit("DELETED", res, gone, obj)
        self._collect_garbage(gone["metadata"]["uid"])
        return gone

    def _delete_namespace(self, key: Key, obj: Obj) -> Obj:
        # Namespace deletion is immediate here: remove everything in it, then the namespace.
        ns = key[1]
        for plural, r in RESOURCES.items():
            if not r.namespaced:
                continue
            for k in [k for k in self.objects[plural] if k[0] == ns]:
                self._remove(r, k)
        return self._remove(RESOURCES["namespaces"], key)

    def _orphan(self, owner_uid: str) -> None:
        for plural, key in list(self._owned):
            obj = self.objects[plural].get(key)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == owner_uid for r in refs):
                new = copy.deepcopy(obj)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
                self._store_update(RESOURCES[plural], key, obj, new, None)

    def _collect_garbage(self, owner_uid: str) -> None:
        """Delete dependents whose owners are all gone (background propagation)."""
        live_uids: set[str] | None = None
        for plural, key in list(self._owned):
            obj = self.objects[plural].get(key)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == owner_uid for r in refs):
                continue
            if live_uids is None:
                live_uids = {
                    o["metadata"]["uid"] for objs in self.objects.values() for o in objs.values()
                }
            if all(r.get("uid") not in live_uids for r in refs):
                try:
                    self.delete(plural, key[0] or None, key[1])
                except ApiError:
                    pass

    def delete_collection(
        self,
        plural: str,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> list[Obj]:
        items, _ = self.list(plural, namespace, label_selector, field_selector)
        out = []
        for obj in items:
            md = obj["metadata"]
            try:
                out.append(self.delete(plural, md.get("namespace"), md["name"]))
            except ApiError:
                pass
        return out


def _without_rv(obj: Obj) -> str:
    o = dict(obj)
    o["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return json.dumps(o, sort_keys=True)
