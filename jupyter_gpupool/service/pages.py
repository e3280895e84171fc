"""The service's browser pages. For now one: an index of the pools the visitor may use.

Pages use JupyterHub OAuth (the visitor is sent to the hub to log in and comes back through
``oauth_callback``) and need the service's access scope (``access:services!service=gpupool``).
Templates are autoescaped. The admin and user pages proper come with issue 6.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment
from jupyterhub.services.auth import HubOAuthCallbackHandler
from tornado import web

from .auth import Caller
from .handlers import ServiceHandler

_env = Environment(autoescape=True)

INDEX = _env.from_string(
    """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>GPU pools</title>
<style>
 body { font-family: sans-serif; margin: 2em; }
 table { border-collapse: collapse; } td, th { padding: .3em .8em; border-bottom: 1px solid #ddd; }
 td.n { text-align: right; }
</style></head>
<body>
<h1>GPU pools</h1>
<p>Signed in as <b>{{ name }}</b>{% if admin %} (gpupool admin){% endif %}.</p>
{% if not may_use %}
<p>You don't have the <code>custom:gpupool:use</code> scope, so no pools are shown.</p>
{% else %}
<table>
<tr><th>Pool</th><th>Status</th><th>GPU types</th><th>GPUs</th><th>Used</th><th>Free</th>
<th>Largest free block</th><th>Nodes</th><th>Description</th></tr>
{% for p in pools %}
<tr><td>{{ p.name }}</td><td>{{ p.status }}</td><td>{{ p.gpu_types|join(", ") }}</td>
<td class="n">{{ p.gpu_total }}</td><td class="n">{{ p.gpu_used }}</td>
<td class="n">{{ p.gpu_available }}</td><td class="n">{{ p.largest_free_block }}</td>
<td class="n">{{ p.node_count }}</td><td>{{ p.description or "" }}</td></tr>
{% endfor %}
</table>
{% endif %}
<p><a href="{{ base_url }}api/v1/pools">JSON</a> · <a href="{{ base_url }}api/v1/pools.csv">CSV</a></p>
</body></html>
"""
)


class IndexHandler(ServiceHandler):
    @web.authenticated
    async def get(self) -> None:
        caller = Caller.from_model(self.current_user or {})
        pools: list[dict[str, Any]] = []
        if caller.may_use:
            if caller.is_admin:
                pools = self.ctx.state.pool_summaries()
            else:
                groups = caller.groups
                if groups is None:
                    groups = await self.ctx.user_groups(caller.name)
                pools = self.ctx.state.pool_summaries(caller.name, groups)
        self.finish(
            INDEX.render(
                name=caller.name,
                admin=caller.is_admin,
                may_use=caller.may_use,
                pools=pools,
                base_url=self.ctx.base_url,
            )
        )


class OAuthCallbackHandler(HubOAuthCallbackHandler):
    def initialize(self, ctx: Any) -> None:
        self.hub_auth = ctx.hub_auth
