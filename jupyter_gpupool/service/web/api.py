"""The HTTP API (``api/v1/...``) and ``metrics``: thin handlers over the state and the desks.

Every handler authenticates in :meth:`APIHandler.prepare` (401 without an identity, 403 without
access to the service or without the route's scope), parses its input with :mod:`.bodies`, calls
one method of the state, the admission desk or the pool manager, and writes what :mod:`.views`
returns. Errors are JSON
``{"status", "message", ...}``; bodies are streamed so an oversized one is refused with a 400
before it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ... import __version__
from ...core.accounting.budgets import applying, budget_rows
from ...core.words.pool_rows import pool_exists, pool_or_bare
from ...core.words.reports import quota_rows
from .. import clock, views
from ..bodies import parse_groups, parse_json, parse_label_patch, text_body
from ..errors import ApiError
from ..health import service_health
from ..records import changelog
from ..registry.bookingdesk import booking_documents_of
from .auth import ADMIN_SCOPE, METRICS_SCOPE, USE_SCOPE
from .base import APIHandler
from .nodetable import page_of, parse_query, select, whole_number

if TYPE_CHECKING:
    pass


# --- pools ---------------------------------------------------------------------------------------


class InfoHandler(APIHandler):
    """``GET api/v1/``: who the caller is to the service, and what it runs with."""

    async def get(self) -> None:
        user, groups = await self.view_of()
        self.write_json(
            {
                "version": __version__,
                "name": self.caller.name,
                "kind": self.caller.kind,
                "admin": self.caller.is_admin,
                "groups": list(groups) if user is not None else self.caller.groups,
                "pool_label": self.ctx.state.pool_label,
                "registry": self.ctx.pools.store.description,
            }
        )


class HealthHandler(APIHandler):
    """``GET api/v1/health`` (admins): every background loop (interval, last run, last error),
    the watch per kind (its age), the database writer (its backlog) and the utilization source,
    with the problems in words (:mod:`..health`)."""

    scopes = {}  # admins only

    async def get(self) -> None:
        self.write_json(service_health(self.ctx, clock.now()))


class PoolsHandler(APIHandler):
    scopes = {"GET": USE_SCOPE, "POST": ADMIN_SCOPE}

    async def get(self) -> None:
        user, groups = await self.view_of()
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(self.ctx.state.pools_json(user, groups))

    async def post(self) -> None:
        """Pool documents are applied, then booking documents are kept (the booking desk):
        ``gpupool create -f`` sends both in one body."""
        text = text_body(self.body)
        bookings, others = booking_documents_of(text)
        result: dict[str, Any] = {"created": [], "replaced": [], "pools": []}
        if others or not bookings:
            result = await self.ctx.pools.apply_pools(text)
            self.record(changelog.applied_pools(result))
        created = bool(result["created"])
        if bookings:
            try:
                booked = await self.ctx.bookings.apply(bookings, self.caller.who)
            except ApiError as e:
                if result["created"] or result["replaced"]:
                    e.message += " (the pool documents were applied)"
                raise
            self.record(changelog.applied_bookings(booked))
            result["bookings_created"] = booked["created"]
            result["bookings_replaced"] = booked["replaced"]
            created = created or bool(booked["created"])
        self.write_json(result, status=201 if created else 200)


class PoolsCSVHandler(APIHandler):
    async def get(self) -> None:
        user, groups = await self.view_of()
        rows = self.ctx.state.pool_summaries(user, groups)
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", 'attachment; filename="pools.csv"')
        self.finish(views.to_csv(rows, views.POOL_COLUMNS))


class PoolHandler(APIHandler):
    scopes = {"GET": USE_SCOPE, "DELETE": ADMIN_SCOPE}

    async def get(self, name: str) -> None:
        state = self.ctx.state
        if not pool_exists(state.registry, state.index, name):
            raise ApiError(404, f"no pool named {name!r}")
        user, groups = await self.view_of()
        pool = pool_or_bare(state.registry, name)
        if user is not None and not pool.allows(user, groups):
            raise ApiError(403, f"you don't have access to pool {name}")
        summary = state.pool_summary(name)
        self.write_json(
            views.pool_detail(
                pool, summary, state.registry, state.index, state.reservations, user, groups
            )
        )

    async def delete(self, name: str) -> None:
        result = await self.ctx.pools.delete_pool(name)
        self.record(changelog.deleted_pool(result))
        self.write_json(result)


# --- nodes and servers ---------------------------------------------------------------------------


class NodesHandler(APIHandler):
    scopes = {"GET": ADMIN_SCOPE}

    async def get(self) -> None:
        """Every node, or a page of them: ``?pool=&status=&q=&offset=&limit=`` (see
        :mod:`.nodetable`); ``labels=1`` adds each node's labels."""
        index = self.ctx.state.index
        page = select(index, parse_query(lambda name: self.get_argument(name, None)))
        rows = [views.node_row(n) for n in page.rows]
        if self.get_argument("labels", "") in ("1", "true"):
            for row in rows:
                row["labels"] = dict(index.node_labels(row["name"]))
        self.write_json(
            {"nodes": rows, "total": page.total, "offset": page.offset, "limit": page.limit}
        )


class NodesCSVHandler(APIHandler):
    scopes = {"GET": ADMIN_SCOPE}

    async def get(self) -> None:
        query = parse_query(lambda name: self.get_argument(name, None))
        rows = [views.node_row(n) for n in select(self.ctx.state.index, query).rows]
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", 'attachment; filename="nodes.csv"')
        self.finish(views.to_csv(rows, views.NODE_COLUMNS))


class NodeLabelsHandler(APIHandler):
    """``GET``/``PATCH api/v1/nodes/{name}/labels`` (gpuctl ``get labels`` / ``label node``)."""

    scopes = {"GET": ADMIN_SCOPE, "PATCH": ADMIN_SCOPE}

    async def get(self, name: str) -> None:
        node = await self.ctx.get_node(name)
        labels = (node.get("metadata") or {}).get("labels") or {}
        key = self.get_argument("key", None)
        if key is not None:
            labels = {key: labels[key]} if key in labels else {}
        self.write_json({"node": name, "labels": labels})

    async def patch(self, name: str) -> None:
        patch = parse_label_patch(parse_json(self.body))
        result = await self.ctx.pools.label_node(name, patch)
        if result.get("changed"):
            self.record(changelog.labelled_node(result))
        self.write_json(result)


class ServersHandler(APIHandler):
    async def get(self) -> None:
        user, _ = await self.view_of()
        pool = self.get_argument("pool", None)
        state = self.ctx.state
        if pool is not None and not pool_exists(state.registry, state.index, pool):
            raise ApiError(404, f"no pool named {pool!r}")
        wanted_user = self.get_argument("user", None) if user is None else user
        # ?offset=&limit=: a page of them (the pool page's live refresh)
        page = page_of(
            state.index.servers(pool=pool, user=wanted_user),
            whole_number(self.get_argument("offset", None), "offset", 0, 10**9) or 0,
            whole_number(self.get_argument("limit", None), "limit", None, 10**6),
        )
        now, registry = clock.now(), state.registry
        self.write_json(
            views.servers_answer(
                page.rows,
                page.total,
                state.index,
                self.ctx.utilization,
                lambda s: self.ctx.idle.row(registry, s, now),
                lambda s: self.ctx.notices.row(s, now),
            )
        )


class IdleHandler(APIHandler):
    """``GET api/v1/idle``: the servers whose GPUs are idle under a policy (admins): the
    candidates of ``action: report``, and those about to be stopped."""

    scopes = {"GET": ADMIN_SCOPE}

    async def get(self) -> None:
        """``warned``: the ledger's sessions warned in the last ``?days=`` (7), latest first,
        with how they ended; its ``problem`` when the database cannot say."""
        state, use = self.ctx.state, self.ctx.utilization
        now = clock.now()
        days = whole_number(self.get_argument("days", None), "days", 7, 366) or 7
        warned: dict[str, Any] = {"days": days, "servers": [], "problem": None}
        try:
            warned["servers"] = await self.ctx.records.idle_warnings(now - days * 86400)
        except ApiError as e:
            warned["problem"] = e.message
        self.write_json(
            {
                "servers": self.ctx.idle.candidates(state.registry, state.index, now),
                "utilization": {"source": use.name, "problem": use.problem or None},
                "culled": self.ctx.idle.culled,
                "warned": warned,
            }
        )


# --- quotas and usage ----------------------------------------------------------------------------


class QuotasHandler(APIHandler):
    scopes = {"GET": USE_SCOPE, "PUT": ADMIN_SCOPE}

    async def get(self) -> None:
        """``?rows=1`` adds ``rows``: the quotas page's table
        (:func:`~jupyter_gpupool.core.words.reports.quota_rows`). ``budgets``: what is left of the
        GPU-hour budgets (a user's and their groups' for a user; empty when not enforced)."""
        user, groups = await self.view_of()
        state = self.ctx.state
        answer = views.quotas(state.registry, state.index, state.reservations, user, groups)
        budgets = state.registry.budgets
        if user is not None:
            budgets = tuple(applying(budgets, user, groups))
        book = state.budgets
        answer["budgets"] = budget_rows(budgets, book, clock.now()) if book is not None else []
        if self.get_argument("rows", "") in ("1", "true"):
            by_subject = None
            if user is None:
                by_subject = {p: state.index.usage_by_subject(p) for p in answer["pools"]}
            answer["rows"] = quota_rows(answer, by_subject)
        self.write_json(answer)

    async def put(self) -> None:
        await self.ctx.pools.put_quotas(text_body(self.body))
        state = self.ctx.state
        names = [q.name for q in state.registry.quota_documents]
        self.record(changelog.replaced_quotas(names))
        self.write_json(views.quotas(state.registry, state.index, state.reservations))


class UsageHandler(APIHandler):
    async def get(self) -> None:
        user, _ = await self.view_of()
        state = self.ctx.state
        summaries = state.pool_summaries() if user is None else []
        self.write_json(
            views.usage(state.registry, state.index, state.reservations, summaries, user)
        )


class UsageHistoryHandler(APIHandler):
    """``GET api/v1/usage/history?range=6h|24h|7d|30d[&pool=NAME]``: the GPUs of each pool
    (in use, total, over quota, pending) over the range, from the database."""

    scopes = {"GET": ADMIN_SCOPE}

    async def get(self) -> None:
        pool = self.get_query_argument("pool", None)
        answer = await self.ctx.records.history(self.get_query_argument("range", None), pool)
        self.write_json({**answer, "interval": self.ctx.history.interval})


class GPUHoursHandler(APIHandler):
    """``GET api/v1/reports/gpu-hours[.csv]?since=7d|30d|YYYY-MM-DD[&until=...]&by=user|group|pool|shape``:
    GPU-hours per subject from the ledger, within and over quota (users: their own)."""

    csv = False

    async def get(self) -> None:
        arg = self.get_query_argument
        user = None if self.caller.is_admin else self.caller.name
        report = await self.ctx.records.gpu_hours(
            arg("since", None), arg("until", None), arg("by", None), user
        )
        if not self.csv:
            self.write_json(report)
            return
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        name = f"gpu-hours-by-{report['by']}.csv"
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        self.finish(views.to_csv(report["rows"], report["columns"]))


class GPUHoursCSVHandler(GPUHoursHandler):
    csv = True


# --- launch options ------------------------------------------------------------------------------


class LaunchOptionsHandler(APIHandler):
    """``GET api/v1/launch-options[?user=NAME&groups=JSON]``: what a user may choose at launch.

    The caller's own by default; an admin caller (the hub's spawner) may ask for any user, and
    pass their groups as a JSON list (else they are looked up in the hub).
    """

    async def get(self) -> None:
        caller = self.caller
        user = self.get_argument("user", None)
        raw_groups = self.get_argument("groups", None)
        if user is None or (caller.is_user and user == caller.name and raw_groups is None):
            if not caller.is_user:
                raise ApiError(400, "say which user the launch options are for (user=NAME)")
            user, groups = caller.name, await self.caller_groups()
        elif not caller.is_admin:
            raise ApiError(403, f"only callers with {ADMIN_SCOPE} may ask for other users")
        elif raw_groups is not None:
            groups = parse_groups(raw_groups)
        else:
            groups = await self.ctx.user_groups(user)
        state, recut = self.ctx.state, self.ctx.recut
        self.write_json(
            views.launch_options(
                state.pool_summaries(user, groups),
                state.admission_state(),
                state.index,
                user,
                groups,
                self.ctx.max_gpus,
                self.ctx.desk.line.lengths() if self.ctx.desk.line is not None else {},
                # a shape only a re-cut offers: ready in what re-cuts took lately
                **({"recut_seconds": recut.expected_seconds()} if recut is not None else {}),
                now=clock.now(),
            )
        )


# --- metrics -------------------------------------------------------------------------------------


class MetricsHandler(APIHandler):
    # its own scope, so that a scrape token cannot change anything (admins may read it too)
    scopes = {"GET": METRICS_SCOPE}

    async def get(self) -> None:
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(generate_latest(self.ctx.metrics.registry))


class NotFoundHandler(APIHandler):
    """Anything else under ``api/``: a JSON 404 after the usual authentication."""

    async def get(self, path: str) -> None:
        raise ApiError(404, f"no such API route: {self.request.path}")

    post = put = patch = delete = get
    scopes = {m: USE_SCOPE for m in ("GET", "POST", "PUT", "PATCH", "DELETE")}
