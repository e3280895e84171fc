"""What the desk answers an admission request, and what the line asks of the desk.

Both :mod:`.desk` and :mod:`.line` use these; neither imports the other's module for them, so the
desk (which owns its line) and the line (which admits through the desk) stay free of a circle.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from ...core.admission.walk import AdmissionRequest, Decision, ReclaimPlan
from ...core.usage.index import ServerUsage
from ...core.usage.reservations import Reservation
from ..monitoring.metrics import Metrics
from ..state import ServiceState


def committed(written: Future[None] | None) -> bool:
    """Whether a durable write is done and took (None: nothing to write, as without a
    database)."""
    if written is None:
        return True
    return written.done() and not written.cancelled() and written.exception() is None


@dataclass(frozen=True)
class Outcome:
    """How an admission request ended: 201 admitted, 202 waiting in line (``place``), 409
    not now, 403 no pool allowed."""

    status: int
    decision: Decision
    reservation: Reservation | None = None
    reclaimed: tuple[ServerUsage, ...] = ()
    note: str = ""
    #: A 202's body, its place in line as of when it was put there (under the desk's lock:
    #: by the time its entry is committed, a pass may have moved or admitted it)
    place: dict[str, Any] | None = None
    #: The durable write of its reservation (201) or entry (202): answered once it commits
    written: Future[None] | None = None

    @property
    def message(self) -> str:
        return "\n".join(x for x in (self.decision.message, self.note) if x)


class Desk(Protocol):
    """The admission desk as its line sees it (:class:`.desk.AdmissionDesk`)."""

    state: ServiceState
    metrics: Metrics
    ttl: float
    lock: asyncio.Lock

    def sweep(self) -> list[Reservation]: ...

    def reserve(self, reservation: Reservation) -> Future[None] | None: ...

    def hold_for(self, request: AdmissionRequest, plan: ReclaimPlan) -> Reservation: ...

    async def reclaim_for(
        self, request: AdmissionRequest, plan: ReclaimPlan, hold: Reservation
    ) -> bool: ...
