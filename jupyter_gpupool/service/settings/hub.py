"""How the service reaches JupyterHub: its settings.

The hub's API URL, the service's token and name, and how long the hub's answers about tokens and
groups are reused.
"""

from __future__ import annotations

import os

from traitlets import Float, HasTraits, Integer, Unicode, default

SERVICE_NAME = "gpupool"


class HubSettings(HasTraits):
    """How the service reaches JupyterHub and names itself there."""

    hub_api_url = Unicode(
        help="""JupyterHub's REST API URL, used to check tokens, look up users' groups and stop
        servers that are reclaimed.

        Defaults to ``$JUPYTERHUB_API_URL`` (set by the hub for managed services).

        Example::

            c.GPUPoolService.hub_api_url = "http://hub:8081/hub/api"
        """,
    ).tag(config=True)

    @default("hub_api_url")
    def _default_hub_api_url(self) -> str:
        return os.environ.get("JUPYTERHUB_API_URL") or "http://127.0.0.1:8081/hub/api"

    api_token = Unicode(
        help="""The service's JupyterHub API token.

        Defaults to ``$JUPYTERHUB_API_TOKEN`` (set by the hub for managed services). The token's
        owner needs ``read:users:groups`` (to look up groups) and ``delete:servers`` (to stop
        the servers it reclaims): see the ``gpupool-service`` role in docs/service.md.

        Example::

            import os

            c.GPUPoolService.api_token = os.environ["GPUPOOL_HUB_TOKEN"]
        """,
    ).tag(config=True)

    @default("api_token")
    def _default_api_token(self) -> str:
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    service_name = Unicode(
        help="""The service's name in ``c.JupyterHub.services``.

        Defaults to ``$JUPYTERHUB_SERVICE_NAME``, else ``gpupool``. It names the OAuth client
        (``service-<name>``) when ``$JUPYTERHUB_CLIENT_ID`` is not set.

        Example::

            c.GPUPoolService.service_name = "gpupool"
        """,
    ).tag(config=True)

    @default("service_name")
    def _default_service_name(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_NAME") or SERVICE_NAME

    auth_cache_seconds = Integer(
        60,
        help="""How long the answer of JupyterHub about a token (its user, groups and scopes) is
        reused.

        Each API call checks its token with the hub at most this often; a scope taken away from
        a user takes effect after at most this long.

        Example::

            c.GPUPoolService.auth_cache_seconds = 300
        """,
    ).tag(config=True)

    groups_cache_seconds = Float(
        60.0,
        help="""How long a user's JupyterHub groups, looked up for an admission made on their
        behalf, are reused.

        The hub's spawner passes groups in its admission requests, so this only matters for
        callers that don't.

        Example::

            c.GPUPoolService.groups_cache_seconds = 30
        """,
    ).tag(config=True)
