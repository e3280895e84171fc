"""Watch events and watchers: what one open ``?watch=true`` stream sees.

A watcher with label or field selectors sees an object that starts matching as ADDED and one that
stops matching as DELETED, as on a real API server; the product's usage accounting depends on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ...core.kube.fieldselectors import FieldSelector
from ...core.kube.labelselectors import LabelSelector

Obj = dict[str, Any]


@dataclass
class WatchEvent:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str
    obj: Obj
    old: Obj | None = None


@dataclass(eq=False)
class Watcher:
    resource: str
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    closed: bool = False

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        md = obj.get("metadata", {})
        if self.namespace is not None and md.get("namespace") != self.namespace:
            return False
        return self.labels.matches(md.get("labels") or {}) and self.fields.matches(obj)

    def offer(self, ev: WatchEvent) -> None:
        """Queue ``ev`` as this watcher sees it, translating selector transitions."""
        if self.closed:
            return
        now_m = self.matches(ev.obj)
        if ev.type == "DELETED":
            if now_m:
                self.queue.put_nowait(("DELETED", ev.obj))
            return
        was_m = self.matches(ev.old) if ev.old is not None else False
        if now_m and was_m:
            self.queue.put_nowait(("MODIFIED", ev.obj))
        elif now_m:
            self.queue.put_nowait(("ADDED", ev.obj))
        elif was_m:
            self.queue.put_nowait(("DELETED", ev.obj))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)
