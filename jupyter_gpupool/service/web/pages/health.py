"""The admins' health page (``{prefix}health``): which part of the service is stuck, in the
rows ``gpupool get health`` prints (:mod:`....core.words.health_rows`) and each problem in a
sentence, from the same answer as ``GET api/v1/health``."""

from __future__ import annotations

from ....core.words.health_rows import HEALTH_FIELDS, health_rows, problem_sentence
from ... import clock
from ...health import service_health
from .base import AdminPageHandler


class HealthPage(AdminPageHandler):
    """``{prefix}health``: the status, the problems, and a row per loop, per kind of the watch,
    the database writer and the utilization source."""

    nav = "health"
    title = "Health"

    async def get(self) -> None:
        answer = service_health(self.ctx, clock.now())
        self.render_page(
            "health.html",
            health_status=answer["status"],
            problems=[problem_sentence(p) for p in answer["problems"]],
            fields=HEALTH_FIELDS,
            rows=health_rows(answer),
        )
