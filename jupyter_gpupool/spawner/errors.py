"""Errors the spawner raises so that JupyterHub shows their message as it is.

JupyterHub shows an exception's ``jupyterhub_message`` on the spawn form, on the progress page
(``Spawn failed: ...``) and in REST API errors; an :class:`~tornado.web.HTTPError` also sets the
REST answer's status. So every refusal is an HTTP error carrying a message written for the user.
"""

from __future__ import annotations

from tornado import web


class SpawnRefused(web.HTTPError):
    """A spawn that cannot go ahead; ``message`` says why in words the user understands."""

    def __init__(self, status: int, message: str):
        super().__init__(status, message)
        self.message = message
        self.jupyterhub_message = message

    def __str__(self) -> str:
        return self.message


class OptionsError(SpawnRefused):
    """The options (spawn form or REST ``user_options``) are invalid: a 400, and no pod."""

    def __init__(self, message: str):
        super().__init__(400, message)
