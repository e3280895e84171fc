"""The simulated store's objects as clients read them: get, list page by page, and watch.

One cluster-wide integer ``resourceVersion`` orders all writes, as etcd's revision does; every
write is kept in a window of history for the watches. Watches follow the real semantics, since
the product's usage accounting depends on them:

* no ``resourceVersion`` (or ``"0"``): synthetic ADDED events for every existing object, then
  changes;
* a ``resourceVersion``: every change after it, replayed from history; if it is older than the
  history window the watch gets a single ERROR event with a 410 ``Expired`` Status;
* with label/field selectors an object that starts matching arrives as ADDED and one that stops
  matching as DELETED.

The writes, and the rules they follow, are the :class:`~.store.Store`'s.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ...core.kube.fieldselectors import FieldSelector, parse_field_selector
from ...core.kube.labelselectors import LabelSelector, SelectorError, parse_label_selector
from .errors import ApiError, not_found
from .resources import RESOURCES, Resource
from .watches import Watcher, WatchEvent

Obj = dict[str, Any]
Objs = list[Obj]  # a name of its own: inside ListWatch, ``list`` is ListWatch.list
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


class ListWatch:
    """The objects of the simulated cluster, their history, and their watchers."""

    def __init__(self, history_size: int):
        self.rv = 0
        self.objects: dict[str, dict[Key, Obj]] = {name: {} for name in RESOURCES}
        self.history: deque[WatchEvent] = deque(maxlen=history_size)
        # Every event with rv > compacted_rv is still in history; older ones are gone (410).
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        self.listeners: list[Callable[[WatchEvent], None]] = []
        # Per resource, its keys in list order, kept until a key is added or removed: a paged
        # list of 150,000 pods then walks from its continue point instead of sorting them all.
        self._sorted_keys: dict[str, list[Key]] = {}

    @staticmethod
    def resource(plural: str) -> Resource:
        try:
            return RESOURCES[plural]
        except KeyError:
            raise ApiError(
                404, f"the server could not find the requested resource ({plural})"
            ) from None

    def _key(self, res: Resource, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if res.namespaced else "", name)

    def _commit(self, etype: str, res: Resource, obj: Obj, old: Obj | None) -> None:
        ev = WatchEvent(self.rv, etype, res.plural, obj, old)
        if len(self.history) == self.history.maxlen and self.history:
            self.compacted_rv = self.history[0].rv
        self.history.append(ev)
        for w in list(self.watchers):
            if w.resource == res.plural:
                w.offer(ev)
        for listener in list(self.listeners):
            listener(ev)

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def get(self, plural: str, namespace: str | None, name: str) -> Obj:
        res = self.resource(plural)
        obj = self.objects[plural].get(self._key(res, namespace, name))
        if obj is None:
            raise not_found(res, name)
        return obj

    def find(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        res = self.resource(plural)
        return self.objects[plural].get(self._key(res, namespace, name))

    def iter(self, plural: str, namespace: str | None = None) -> Iterable[Obj]:
        for (ns, _), obj in self.objects[plural].items():
            if namespace is None or ns == namespace:
                yield obj

    # ---- lists and watches --------------------------------------------------------------

    def list(
        self,
        plural: str,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[Obj], str]:
        items, rv, _, _ = self.list_page(plural, namespace, label_selector, field_selector)
        return items, rv

    def list_page(
        self,
        plural: str,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
        after: Key | None = None,
        limit: int = 0,
    ) -> tuple[Objs, str, Key | None, int | None]:
        """One page of :meth:`list`: at most ``limit`` matching objects (0: all) whose keys
        come after ``after``; returns them, the resourceVersion, the key to continue after (None
        on the last page) and how many objects remain after the page (None when there are
        selectors: as the API server, which leaves ``remainingItemCount`` out then). Walks the
        keys in order from ``after``, so each page costs its own length, not the whole list's."""
        self.resource(plural)
        labels, fields = _selectors(label_selector, field_selector)
        keys = self._sorted_keys.get(plural)
        if keys is None:
            keys = self._sorted_keys[plural] = sorted(self.objects[plural])
        objects = self.objects[plural]
        if after is not None:
            start = bisect.bisect_right(keys, after)
        elif namespace is not None:
            start = bisect.bisect_left(keys, (namespace, ""))
        else:
            start = 0
        items: Objs = []
        for i in range(start, len(keys)):
            key = keys[i]
            if namespace is not None and key[0] != namespace:
                break  # keys are sorted by namespace first: this namespace's are behind us
            o = objects[key]
            if labels.matches(o["metadata"].get("labels") or {}) and fields.matches(o):
                if limit and len(items) == limit:
                    last = items[-1]["metadata"]
                    remaining = None
                    if not label_selector and not field_selector:
                        end = (
                            len(keys)
                            if namespace is None
                            else bisect.bisect_left(keys, (namespace + "\0", ""))
                        )
                        remaining = end - i
                    return items, str(self.rv), (last.get("namespace", ""), last["name"]), remaining
                items.append(o)
        return items, str(self.rv), None, None

    def watch(
        self,
        plural: str,
        namespace: str | None,
        resource_version: str | None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> Watcher:
        """Register a watcher; its queue is pre-filled with what it must see first.

        Raises ApiError(410) if ``resource_version`` is older than the history window.
        """
        self.resource(plural)
        labels, fields = _selectors(label_selector, field_selector)
        w = Watcher(plural, namespace, labels, fields)
        if resource_version in (None, "", "0"):
            for obj in self.list(plural, namespace, label_selector, field_selector)[0]:
                w.queue.put_nowait(("ADDED", obj))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise ApiError(400, f"invalid resource version {resource_version!r}") from None
            if since < self.compacted_rv:
                raise ApiError(
                    410,
                    f"too old resource version: {since} ({self.compacted_rv + 1})",
                    reason="Expired",
                )
            for ev in self.history:
                if ev.rv > since and ev.resource == plural:
                    w.offer(ev)
        self.watchers.add(w)
        return w

    def stop_watch(self, w: Watcher) -> None:
        self.watchers.discard(w)
        w.close()

    def cut_watches(self) -> int:
        """Close every open watch (clients must resume from their last resourceVersion)."""
        ws = list(self.watchers)
        for w in ws:
            self.stop_watch(w)
        return len(ws)

    def expire_history(self) -> None:
        """Forget all history: any watch resuming from an existing version now gets 410."""
        self.history.clear()
        self.compacted_rv = self.rv


def _selectors(label_selector: str, field_selector: str) -> tuple[LabelSelector, FieldSelector]:
    try:
        return parse_label_selector(label_selector or ""), parse_field_selector(
            field_selector or ""
        )
    except SelectorError as e:
        raise ApiError(400, str(e)) from None
