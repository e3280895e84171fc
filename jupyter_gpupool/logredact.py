"""Secrets taken out of log lines: a URL's ``?token=...`` (and the other parameters JupyterHub
scrubs from its own access log: ``auth``, ``key``, ``code``, ``state``, ``_xsrf``) becomes
``[secret]``, also when the URL is itself percent-encoded inside another parameter
(``/hub/login?next=%2Fhub%2F%3Ftoken%3D...``).

JupyterHub's access log already scrubs them, but a request's URL reaches logs by other ways:
tornado's own access log (the demo's proxy), the warning tornado writes for every refused request
(the hub's), the ``repr`` of a request in an uncaught exception's line (anyone's). So the filter
sits on the handlers, where every line passes: :func:`install` on a logger's handlers, or
:class:`RedactSecrets` named in a ``logging_config`` (the demo hub's).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

#: Substrings of a parameter's name that make its value a secret (JupyterHub's list).
SECRET_KEYS = ("token", "auth", "key", "code", "state", "_xsrf")

_PARAMETER = re.compile(
    # a parameter's start (?, & or ;, or their percent-encodings), its name, and = or %3D
    r"((?:[?&;]|%3F|%26|%3B)[^=&\s#?]*?(?:" + "|".join(map(re.escape, SECRET_KEYS)) + r")"
    r"[^=&\s#?]*?(?:=|%3D))"
    # the value, up to the next parameter (plain or encoded), a fragment, a quote or a space
    r"((?:(?!%26|%3B)[^&;\s#\"'])+)",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with the values of secret URL parameters replaced by ``[secret]``."""
    if "=" not in text and "%3D" not in text and "%3d" not in text:
        return text
    return _PARAMETER.sub(lambda m: m.group(1) + "[secret]", text)


class RedactSecrets(logging.Filter):
    """A handler's filter that redacts each record's message (arguments merged in)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install(loggers: Iterable[logging.Logger]) -> None:
    """Put :class:`RedactSecrets` on every handler of ``loggers`` (once)."""
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(RedactSecrets())
