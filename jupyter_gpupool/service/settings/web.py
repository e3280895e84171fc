"""Where the service listens and what it serves: its settings.

The address, port and URL prefix, the largest request body read, and the directories of the
pages' templates.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from jupyterhub.traitlets import ByteSpecification
from traitlets import HasTraits, Integer, List, TraitError, Unicode, default, validate

from .hub import SERVICE_NAME


def _service_url() -> str:
    return os.environ.get("JUPYTERHUB_SERVICE_URL", "")


class WebSettings(HasTraits):
    """Where the service listens and what it serves."""

    ip = Unicode(
        "127.0.0.1",
        help="""The address to listen on.

        The default, 127.0.0.1, is right when the proxy runs on the same host as the hub (a
        plain JupyterHub). In zero-to-jupyterhub the proxy runs in another pod and reaches the
        service at the hub pod's address, so listen on all addresses there.

        Example::

            c.GPUPoolService.ip = "0.0.0.0"
        """,
    ).tag(config=True)

    port = Integer(
        help="""The port to listen on.

        Defaults to the port of the service's ``url`` in ``c.JupyterHub.services`` (the hub
        passes it as ``$JUPYTERHUB_SERVICE_URL``), else 10101.

        Example::

            c.GPUPoolService.port = 10101
        """,
    ).tag(config=True)

    @default("port")
    def _default_port(self) -> int:
        url = _service_url()
        if url:
            parsed = urlparse(url)
            if parsed.port:
                return parsed.port
            return 443 if parsed.scheme == "https" else 80
        return 10101

    @validate("port")
    def _check_port(self, proposal: Any) -> int:
        port = int(proposal["value"])
        if not 0 <= port <= 65535:
            raise TraitError(f"port must be between 0 and 65535, not {port}")
        return port

    base_url = Unicode(
        help="""The URL prefix the service answers under.

        Defaults to ``$JUPYTERHUB_SERVICE_PREFIX``, which the hub sets to
        ``/services/<name>/`` (with the hub's own base URL in front), else ``/services/gpupool/``.

        Example::

            c.GPUPoolService.base_url = "/jupyter/services/gpupool/"
        """,
    ).tag(config=True)

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{SERVICE_NAME}/"

    @validate("base_url")
    def _slashes(self, proposal: Any) -> str:
        value = "/" + str(proposal["value"]).strip("/") + "/"
        return value.replace("//", "/")

    max_body_size = ByteSpecification(
        1024 * 1024,
        help="""The largest request body accepted (pool and quota documents, admission
        requests, the admin page's forms). A larger one is refused with a 400 before it is
        read: its bytes are thrown away as they come, and the 400 is sent once the client has
        sent them (a proxy in front then passes the 400 on, instead of a broken connection).

        Accepts a number of bytes or a size with a unit (K, M, G).

        Example::

            c.GPUPoolService.max_body_size = "4M"
        """,
    ).tag(config=True)

    template_paths = List(
        Unicode(),
        default_value=[],
        help="""Directories searched for the pages' templates before the service's own and
        JupyterHub's.

        The pages extend JupyterHub's ``page.html``. A hub with custom templates
        (``c.JupyterHub.template_paths``) can give the service the same directories so that
        its pages look the same; a ``page.html`` found here replaces the hub's.

        Example::

            c.GPUPoolService.template_paths = ["/etc/jupyterhub/templates"]
        """,
    ).tag(config=True)
