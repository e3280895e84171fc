"""Who is calling, and what they may do: JupyterHub tokens and OAuth cookies, and our scopes.

The API takes a JupyterHub token (``Authorization: token ...`` or ``Bearer``) or, for pages of
the service calling their own API, the service's OAuth cookie (with JupyterHub's XSRF check on
anything but GET). The caller must first be let into the service at all, as JupyterHub lets
visitors into any service: its scopes must include ``access:services!service=gpupool`` (or
``access:services``), which OAuth cookies always carry and API tokens carry when a role grants it.
Three custom scopes decide the rest:

- ``custom:gpupool:use`` - pools the caller may use, with free GPUs; their own servers, quota and
  usage; admissions for themselves;
- ``custom:gpupool:admin`` - everything: every pool, node, server and quota, changes to them, and
  admissions on behalf of any user (what the hub's spawner does);
- ``custom:gpupool:metrics`` - ``metrics`` and nothing else, for a Prometheus scrape token that
  must not be able to change pools.

No identity: 401. An identity without access to the service, or without the scope the route
needs: 403.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

USE_SCOPE = "custom:gpupool:use"
ADMIN_SCOPE = "custom:gpupool:admin"
METRICS_SCOPE = "custom:gpupool:metrics"

#: What each scope is for, as ``c.JupyterHub.custom_scopes`` wants it.
CUSTOM_SCOPES = {
    USE_SCOPE: {
        "description": "Use GPU pools: see pools and your own servers, quota and admissions.",
    },
    ADMIN_SCOPE: {
        "description": "Administer GPU pools: pools, nodes, quotas and everyone's servers.",
    },
    METRICS_SCOPE: {
        "description": "Read the gpupool service's Prometheus metrics, and nothing else.",
    },
}


def access_scope_text(access_scopes: Iterable[str]) -> str:
    """The access scope to name in a refusal: the one for this service where there is one."""
    scopes = sorted(access_scopes)
    own = [s for s in scopes if "!service=" in s]
    return " or ".join(own or scopes)


@dataclass(frozen=True)
class Caller:
    """The identity JupyterHub gave for a request's token or cookie."""

    name: str
    kind: str  # "user" or "service"
    scopes: frozenset[str]
    groups: tuple[str, ...] | None  # None: the model did not say

    @classmethod
    def from_model(cls, model: Mapping[str, Any]) -> Caller:
        groups = model.get("groups")
        return cls(
            name=str(model.get("name", "")),
            kind=str(model.get("kind", "user")),
            scopes=frozenset(model.get("scopes") or ()),
            groups=tuple(groups) if isinstance(groups, list) else None,
        )

    @property
    def is_admin(self) -> bool:
        # Only the unfiltered scope counts: a filtered one (``!user=...``) is not "everything".
        return ADMIN_SCOPE in self.scopes

    @property
    def may_use(self) -> bool:
        return self.is_admin or USE_SCOPE in self.scopes

    @property
    def who(self) -> str:
        """``user admin``, ``service gpupool-spawner``: as the change log names its authors."""
        return f"{self.kind} {self.name}"

    @property
    def is_user(self) -> bool:
        return self.kind == "user"

    @property
    def may_scrape(self) -> bool:
        return self.is_admin or METRICS_SCOPE in self.scopes

    def allows(self, scope: str) -> bool:
        """Whether the caller holds ``scope``, or admin, which includes every other one. A scope
        this table does not know allows nobody, so a typo in a handler fails closed."""
        if scope == ADMIN_SCOPE:
            return self.is_admin
        if scope == USE_SCOPE:
            return self.may_use
        if scope == METRICS_SCOPE:
            return self.may_scrape
        return False
