"""The errors the simulated API server answers with, as ``Status`` objects.

Clients (kubectl, the kubernetes clients, KubeSpawner) branch on ``code`` and ``reason``, so the
codes, reasons and wording follow kube-apiserver's.
"""

from __future__ import annotations

from typing import Any

from .resources import Resource

Obj = dict[str, Any]


class ApiError(Exception):
    """An error the API server answers with a ``Status`` object."""

    REASONS = {
        400: "BadRequest",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Expired",
        413: "RequestEntityTooLarge",
        415: "UnsupportedMediaType",
        422: "Invalid",
        500: "InternalError",
    }

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or self.REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> Obj:
        st: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            st["details"] = self.details
        return st


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        f'{res.plural} "{name}" not found',
        details={"name": name, "kind": res.plural},
    )


def invalid(res: Resource, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per bad field, worded as the API server does."""
    text = ", ".join(f"{f}: {m}" for f, m in causes)
    return ApiError(
        422,
        f'{res.kind} "{name}" is invalid: {text}',
        details={
            "name": name,
            "kind": res.kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes
            ],
        },
    )


def conflict(res: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details={"name": name, "kind": res.plural},
    )
