"""The admin page and its forms: create or replace pools, delete one, move a node, edit quotas,
stop a server.

Every action is a POST with JupyterHub's XSRF token, goes through the same
:class:`~jupyter_gpupool.service.registry.changes.PoolManager` as the JSON API, is recorded in the
change log with who made it, and answers with a redirect and a one-line flash message, or the
admin page again with the refusal next to the form (see :mod:`.base` for what pages share).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from tornado import web

from ....core.pools.model import DEFAULT_POOL
from ....core.pools.writing import pool_to_document, quota_to_document
from ....core.words.pool_rows import pool_names
from ... import views
from ...bodies import LabelPatch
from ...cluster.kube import KubeError
from ...errors import ApiError
from ...records import changelog
from ...registry.documents import REQUEST, dump_document
from .base import AdminPageHandler

EXAMPLE_POOL = """\
kind: pool
version: v0.1
pool:
  name: my-pool
  description: "What the pool is for"
nodes:
  gpu-node-1:
    gpu-type: A100-80G
"""

EXAMPLE_BOOKING = """\
kind: booking
version: v0.1
booking: {name: my-course, description: "What it is for"}
pool: my-pool
gpus: 4
groups: [my-group]
window:
  weekly: {days: [tue], start: "10:00", end: "12:00"}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
"""

EXAMPLE_QUOTA = """\
kind: quota
version: v0.1
quota:
  name: quotas
pools:
  my-pool:
    borrowing: true
    user-default: {guaranteed: 0, limit: 4}
    groups:
      my-group: {guaranteed: 8, limit: 16}
"""


def sentence(text: str) -> str:
    """``text`` as a sentence: capital first letter, full stop."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


def refusal_sentence(message: str) -> str:
    """The first line of a refused change as a sentence that says nothing was changed, once
    (some of the pool manager's messages say it already)."""
    first = message.split("\n", 1)[0].rstrip(":").rstrip()
    if not first.endswith("nothing was changed"):
        first += "; nothing was changed"
    return sentence(first)


def request_lines(problems: list[str]) -> list[str]:
    """``<request>:7: field: message`` as ``line 7: field: message`` (the textarea's lines)."""
    return [p.replace(f"{REQUEST}:", "line ", 1) for p in problems]


class AdminPage(AdminPageHandler):
    """``{prefix}admin``: create or replace a pool, delete one, move a node, edit quotas."""

    nav = "admin"
    title = "Pool admin"

    async def get(self) -> None:
        self.show()

    def show(
        self,
        errors: dict[str, Any] | None = None,
        pool_yaml: str | None = None,
        quota_yaml: str | None = None,
        node: str | None = None,
        booking_yaml: str | None = None,
        status: int = 200,
    ) -> None:
        state = self.ctx.state
        reg = state.registry
        if pool_yaml is None:
            wanted = reg.pool(self.arg("pool") or "")
            pool_yaml = dump_document(pool_to_document(wanted)) if wanted else EXAMPLE_POOL
        if quota_yaml is None:
            docs = [dump_document(quota_to_document(q)) for q in reg.quota_documents]
            quota_yaml = "---\n".join(docs) if docs else EXAMPLE_QUOTA
        summaries = {r["name"]: r for r in state.pool_summaries()}
        self.render_page(
            "admin.html",
            status=status,
            errors=errors or {},
            pool_yaml=pool_yaml,
            quota_yaml=quota_yaml,
            node=node if node is not None else self.arg("node") or "",
            pool_label=state.pool_label,
            pool_choices=pool_names(reg, state.index),
            pools_defined=list(reg.pools),
            deletable=[summaries[n] for n in reg.pools if n in summaries],
            booking_yaml=booking_yaml if booking_yaml is not None else EXAMPLE_BOOKING,
            changes=self.ctx.changes.latest(30),
            changes_kept=self.ctx.changes.kept,
        )


class ApplyPoolsAction(AdminPage):
    """``POST {prefix}admin/pools``: the pool YAML of the admin page."""

    async def post(self) -> None:
        text = self.get_body_argument("yaml", "")
        try:
            if not text.strip():
                raise ApiError(400, "Paste a pool document first.")
            result = await self.ctx.pools.apply_pools(text)
        except ApiError as e:
            problems = request_lines([str(p) for p in e.extra.get("problems") or ()])
            message = refusal_sentence(e.message)
            self.show({"pool": message, "pool_problems": problems}, pool_yaml=text, status=e.status)
            return
        what = changelog.applied_pools(result)
        self.record(what)
        self.flash(sentence(what))
        names = [*result["created"], *result["replaced"]]
        self.redirect(f"{self.svc}pools/{quote(names[0])}" if names else f"{self.svc}pools")


class DeletePoolPage(AdminPageHandler):
    """``{prefix}admin/pools/NAME/delete``: which servers still run there; then delete."""

    nav = "admin"

    async def get(self, name: str) -> None:
        state = self.ctx.state
        if name not in state.registry.pools:
            raise web.HTTPError(404, f"There is no pool document named {name} to delete.")
        self.title = f"Delete pool {name}"
        self.render_page(
            "delete-pool.html",
            pool=state.pool_summary(name),
            servers=[views.server_row(s, state.index) for s in state.index.servers(pool=name)],
            pool_label=state.pool_label,
            back=self.request.uri,
        )

    async def post(self, name: str) -> None:
        result = await self.ctx.pools.delete_pool(name)
        what = changelog.deleted_pool(result)
        self.record(what)
        running = result.get("servers_still_running") or []
        message = f"Pool {name} deleted."
        if running:
            who = ", ".join(f"{s['user']}/{s['server']}" for s in running[:10])
            one = len(running) == 1
            runs = "server still runs" if one else "servers still run"
            message += f" {len(running)} {runs} on its nodes: {who}."
        self.flash(message)
        self.redirect(f"{self.svc}pools")


class MoveNodeAction(AdminPage):
    """``POST {prefix}admin/nodes``: set a node's pool label (``default``: remove it)."""

    async def post(self) -> None:
        node = self.get_body_argument("node", "").strip()
        pool = self.get_body_argument("pool", "")
        state = self.ctx.state
        try:
            if not node:
                raise ApiError(400, "Say which node to move.")
            if pool not in pool_names(state.registry, state.index):
                raise ApiError(400, f"There is no pool named {pool!r}.")
            value = None if pool == DEFAULT_POOL else pool
            result = await self.ctx.pools.label_node(
                node, LabelPatch({state.pool_label: value}, overwrite=True)
            )
        except ApiError as e:
            self.show({"node": e.message}, node=node, status=e.status)
            return
        self.record(changelog.labelled_node(result))
        self.flash(f"Node {node} moved to {pool}.")
        self.redirect(f"{self.svc}nodes?{urlencode({'q': node})}")


class QuotasAction(AdminPage):
    """``POST {prefix}admin/quotas``: the quota YAML of the admin page replaces all quotas."""

    async def post(self) -> None:
        text = self.get_body_argument("yaml", "")
        try:
            if not text.strip():
                raise ApiError(400, "Paste the quota documents first.")
            await self.ctx.pools.put_quotas(text)
        except ApiError as e:
            problems = request_lines([str(p) for p in e.extra.get("problems") or ()])
            message = refusal_sentence(e.message)
            self.show(
                {"quota": message, "quota_problems": problems}, quota_yaml=text, status=e.status
            )
            return
        names = [q.name for q in self.ctx.state.registry.quota_documents]
        self.record(changelog.replaced_quotas(names))
        self.flash("Quotas replaced.")
        self.redirect(f"{self.svc}quotas")


class StopServerAction(AdminPageHandler):
    """``POST {prefix}admin/servers/stop``: stop a server through the hub (its pod, if the hub
    does not know it)."""

    async def post(self) -> None:
        user = self.get_body_argument("user", "")
        server = self.get_body_argument("server", "")
        namespace = self.get_body_argument("namespace", "")
        pod = self.get_body_argument("pod", "")
        found = [
            s
            for s in self.ctx.state.index.servers(user=user)
            if s.server == server and (not pod or (s.namespace, s.name) == (namespace, pod))
        ]
        if not found:
            raise web.HTTPError(404, f"No server {user}/{server} runs on the cluster now.")
        target = found[0]
        stopped = False
        if self.ctx.hub is not None and user:
            stopped = await self.ctx.hub.stop_server(user, server) in (202, 204)
        if not stopped:  # the hub does not know it (or cannot be asked): delete the pod
            try:
                await self.ctx.kube.delete_pod(target.namespace, target.name)
            except KubeError as e:
                raise web.HTTPError(503, f"Cannot delete pod {target.name}: {e.message}") from e
        self.record(changelog.stopped_server(user, server, target.pool))
        self.flash(f"Stopping {user}'s server{' ' + server if server else ''}.")
        self.redirect(self.back(f"{self.svc}pools"))
