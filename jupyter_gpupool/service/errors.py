"""The one exception type the service's layers raise for an HTTP answer other than success.

Everything below the handlers (body parsing, pool changes, admissions) raises :class:`ApiError`
with the status and a message written for the person who sent the request; the API handlers
answer it as JSON, ``{"status": ..., "message": ..., **extra}``. It is a tornado ``HTTPError`` so
that tornado logs it as a refused request instead of a crash; anything else that escapes a
handler is a 500 that the log explains, never a traceback in the answer.
"""

from __future__ import annotations

from typing import Any

from tornado.web import HTTPError


class ApiError(HTTPError):
    """An answer with ``status``, ``message`` and optional extra JSON fields."""

    def __init__(self, status: int, message: str, **extra: Any):
        # log_message is %-formatted only when args are given; none are.
        super().__init__(status, message.replace("%", "%%"))
        self.status = status
        self.message = message
        self.extra = extra

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"

    def body(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, **self.extra}


def bad_request(message: str, **extra: Any) -> ApiError:
    return ApiError(400, message, **extra)
