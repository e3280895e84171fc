"""A fresh list of nodes or pods fed into the usage index page by page, as it arrives.

Each object is applied as an update when it comes, so between pages the index holds some objects
of the new list and some of the old, each one whole; when the list is whole, what it did not
have is gone (:meth:`Relist.finish`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .pods import PodBook
from .records import pod_key


class Relist:
    """One fresh list of nodes or pods being fed into a :class:`~.index.UsageIndex`
    (:meth:`~.index.UsageIndex.relist`)."""

    def __init__(self, index: PodBook, kind: str):
        self.index = index
        self.kind = kind
        self.seen: set[str] = set()

    def add(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Some of the list's objects (a page), applied as updates."""
        index, seen = self.index, self.seen
        if self.kind == "nodes":
            for n in objects:
                name = (n.get("metadata") or {}).get("name")
                if name:
                    seen.add(name)
                    index.apply_node("MODIFIED", n)
            return
        for p in objects:
            meta = p.get("metadata") or {}
            key = pod_key(meta)
            seen.add(key)
            index._apply_pod("MODIFIED", p, meta, key)

    def finish(self) -> None:
        """The list is whole: what it did not have is gone."""
        index, seen = self.index, self.seen
        if self.kind == "nodes":
            for name in [n for n in index._nodes if n not in seen]:
                index._delete_node(name)
            return
        for key in [k for k in index._pods if k not in seen]:
            old = index._pods.pop(key)
            index._unlink(old)
            index._notify(old, "gone")
        for key in [k for k in index._others if k not in seen]:
            index._forget_other(key)
        self.seen = set()
