"""The service's routes: the table of every URL it answers, and its access log.

The authentication tests walk :func:`route_table`, so a route added here without a row in their
table (``tests/service/web/test_hub_auth.py``) fails them.
"""

from __future__ import annotations

import logging
from typing import Any

import tornado.web

from . import admissionapi, api, bookingapi, savedapi, waitapi
from .pages import admin, base, bookings, health, idle, nodes, pools, reports, user
from .pages.templating import STATIC

access_log = logging.getLogger("gpupool.access")


def route_table(prefix: str) -> list[tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]]:
    """The service's routes under ``prefix``: ``(pattern, handler, arguments)``.

    Handlers given no arguments here get the service context (``{"ctx": ctx}``) in
    :meth:`~jupyter_gpupool.service.app.GPUPoolService.make_app`. Handlers are read off their
    modules when this is called, so a benchmark may put its own in their place.
    """
    v1 = prefix + "api/v1/"
    routes: list[Any] = [
        (v1, api.InfoHandler),
        (v1 + "health", api.HealthHandler),
        (v1 + "pools", api.PoolsHandler),
        (v1 + "pools.csv", api.PoolsCSVHandler),
        (v1 + "pools/([^/]+)", api.PoolHandler),
        (v1 + "nodes", api.NodesHandler),
        (v1 + "nodes.csv", api.NodesCSVHandler),
        (v1 + "nodes/([^/]+)/labels", api.NodeLabelsHandler),
        (v1 + "servers", api.ServersHandler),
        (v1 + "servers/saved", savedapi.SavedWorkHandler),
        (v1 + "idle", api.IdleHandler),
        (v1 + "quotas", api.QuotasHandler),
        (v1 + "usage", api.UsageHandler),
        (v1 + "usage/history", api.UsageHistoryHandler),
        (v1 + "reports/gpu-hours", api.GPUHoursHandler),
        (v1 + "reports/gpu-hours.csv", api.GPUHoursCSVHandler),
        (v1 + "launch-options", api.LaunchOptionsHandler),
        (v1 + "admissions", admissionapi.AdmissionsHandler),
        # before admissions/ID: "wait" is no admission's id
        (v1 + "admissions/wait", waitapi.AdmissionsWaitHandler),
        (v1 + "admissions/([^/]+)", admissionapi.AdmissionHandler),
        (v1 + "queue", admissionapi.QueueHandler),
        (v1 + "bookings", bookingapi.BookingsHandler),
        (v1 + "bookings/([^/]+)", bookingapi.BookingHandler),
        (prefix + "metrics", api.MetricsHandler),
        (prefix + "api/(.*)", api.NotFoundHandler),
        (prefix + "oauth_callback", base.OAuthCallbackHandler),
        (prefix + "static/(.*)", tornado.web.StaticFileHandler, {"path": str(STATIC)}),
        (prefix + "health", health.HealthPage),
        (prefix + "pools", pools.PoolsPage),
        (prefix + "pools/usage.svg", pools.UsageChart),
        (prefix + "pools/([^/]+)", pools.PoolPage),
        (prefix + "nodes", nodes.NodesPage),
        (prefix + "quotas", nodes.QuotasPage),
        (prefix + "reports", reports.ReportsPage),
        (prefix + "idle", idle.IdlePage),
        (prefix + "bookings", bookings.BookingsPage),
        (prefix + "admin", admin.AdminPage),
        (prefix + "admin/pools", admin.ApplyPoolsAction),
        (prefix + "admin/pools/([^/]+)/delete", admin.DeletePoolPage),
        (prefix + "admin/nodes", admin.MoveNodeAction),
        (prefix + "admin/quotas", admin.QuotasAction),
        (prefix + "admin/servers/stop", admin.StopServerAction),
        (prefix + "admin/bookings", bookings.AddBookingsAction),
        (prefix + "admin/bookings/([^/]+)/delete", bookings.DeleteBookingAction),
        (prefix, user.UserPage),
        (prefix.rstrip("/"), tornado.web.RedirectHandler, {"url": prefix}),
    ]
    return [(r[0], r[1], r[2] if len(r) > 2 else {}) for r in routes]


def log_request(handler: tornado.web.RequestHandler) -> None:
    """Access log: errors loud, the many successful API calls at debug level."""
    status = handler.get_status()
    if status < 400:
        level = logging.DEBUG
    elif status < 500:
        level = logging.INFO
    else:
        level = logging.ERROR
    if not access_log.isEnabledFor(level):
        return
    request = handler.request
    # the path, not the URI: a query string may carry a token (``?token=...``)
    access_log.log(
        level,
        "%d %s %s %.2fms",
        status,
        request.method,
        request.path,
        1000 * request.request_time(),
    )
