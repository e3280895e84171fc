"""The admins' nodes page (``{prefix}nodes``: every node with its pool, GPU type, status
reasons and labels, filtered and paged) and quotas page (``{prefix}quotas``)."""

from __future__ import annotations

from ....core.words.pool_rows import pool_names
from ....core.words.reports import quota_rows
from ... import views
from ..nodetable import parse_query, select
from .base import AdminPageHandler
from .parts import NODES_PER_PAGE, node_page_values


class NodesPage(AdminPageHandler):
    """``{prefix}nodes``: every node with pool, GPU type, status reasons and labels."""

    nav = "nodes"
    title = "Nodes"
    live = True

    async def get(self) -> None:
        state = self.ctx.state
        query = parse_query(self.arg, NODES_PER_PAGE)
        page = select(state.index, query)
        values = node_page_values(self, query, page, f"{self.svc}nodes")
        values["node_query"] += "&labels=1"
        self.render_page(
            "nodes.html",
            labels={n.name: state.index.node_labels(n.name) for n in page.rows},
            pool_choices=pool_names(state.registry, state.index),
            **values,
        )


class QuotasPage(AdminPageHandler):
    """``{prefix}quotas``: per pool and subject, used against guaranteed and limit."""

    nav = "quotas"
    title = "Quotas"
    live = True

    async def get(self) -> None:
        state = self.ctx.state
        answer = views.quotas(state.registry, state.index, state.reservations)
        by_subject = {p: state.index.usage_by_subject(p) for p in answer["pools"]}
        self.render_page("quotas.html", rows=quota_rows(answer, by_subject))
