"""What every handler and page reaches: the service's live state and the objects that change it.

:class:`~jupyter_gpupool.service.app.GPUPoolService` builds one :class:`ServiceContext` when it
starts and hands it to each handler (``initialize(ctx)``); tests reach it as ``app.ctx``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment
from jupyterhub.services.auth import HubOAuth

from ..core.usage.rows import ServerUsage
from . import clock
from .admission.bookingwatch import BookingWatch
from .admission.desk import AdmissionDesk
from .admission.recutwatch import RecutWatch
from .admission.waits import sure_end_of
from .cluster.hubapi import HubAPI
from .cluster.kube import Kube, KubeError
from .cluster.watch import ClusterView
from .errors import ApiError
from .loops import Loop
from .monitoring.budgetwatch import BudgetWatch
from .monitoring.idlewatch import IdleWatch
from .monitoring.metrics import Metrics
from .monitoring.notices import NoticeBoard
from .monitoring.polling import Utilization
from .monitoring.runtimewatch import RuntimeWatch
from .records.changelog import ChangeLog
from .records.memory import Records
from .records.samples import UsageHistory
from .registry.bookingdesk import BookingDesk
from .registry.changes import PoolManager
from .state import ServiceState
from .web.pages.templating import make_environment


@dataclass
class ServiceContext:
    """What the handlers reach: the live state and the objects that change it."""

    state: ServiceState
    desk: AdmissionDesk
    pools: PoolManager
    metrics: Metrics
    hub_auth: HubOAuth
    hub: HubAPI | None
    kube: Kube
    view: ClusterView
    base_url: str
    max_body_size: int
    max_gpus: int
    # the pages: usage over time, who changed what, and the templates
    history: UsageHistory = field(default_factory=UsageHistory)
    changes: ChangeLog = field(default_factory=ChangeLog)
    records: Records = field(default_factory=lambda: Records(None))
    utilization: Utilization = field(default_factory=lambda: Utilization(None, 30.0))
    idle: IdleWatch = field(default_factory=IdleWatch)
    #: Bookings' windows at work: warnings, stops at a window's start (None: not watched)
    booking_watch: BookingWatch | None = None
    #: MIG layouts re-cut to demand in pools whose file allows it (None: no line, no re-cuts)
    recut: RecutWatch | None = None
    runtime: RuntimeWatch = field(default_factory=RuntimeWatch)
    budget_watch: BudgetWatch = field(default_factory=BudgetWatch)
    #: Every warning about a running server: the idle watch's, the runtime limit's and the
    #: budgets' are registered here; others add theirs (``ctx.notices.add(provider)``)
    notices: NoticeBoard = field(default_factory=NoticeBoard)
    templates: Environment = field(default_factory=make_environment)
    #: Bookings made through the API and the admin page (checked, fitted, kept)
    bookings: BookingDesk = field(
        default_factory=lambda: BookingDesk(ServiceState(), Records(None).bookings)
    )
    #: The background loops, by name in ``GET api/v1/health`` (:mod:`.loops`)
    loops: list[Loop] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.notices.add(lambda s, now: self.idle.notice(self.state.registry, s, now))
        self.notices.add(lambda s, now: self.runtime.notice(self.state.registry, s, now))
        self.notices.add(self.budget_watch.notice)
        if self.booking_watch is not None:
            self.notices.add(self.booking_watch.notice)

    def sure_end(self, server: ServerUsage) -> tuple[float, str] | None:
        """What ends ``server`` for sure, and when (the wait estimates' sure ends): the
        earliest stop its notices announce (the idle policy's once it warned, a runtime limit,
        a spent budget's grace, a booking's window that stops it)."""
        return sure_end_of(self.notices.notices(server, clock.now()))

    async def user_groups(self, user: str) -> tuple[str, ...]:
        if self.hub is None:
            return ()
        return await self.hub.user_groups(user)

    async def get_node(self, name: str) -> dict[str, Any]:
        try:
            node = await self.kube.get_node(name)
        except KubeError as e:
            raise ApiError(503, f"cannot read node {name}: {e.message}") from e
        if node is None:
            raise ApiError(404, f"node {name!r} not found")
        return node
