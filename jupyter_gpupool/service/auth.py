"""Who is calling, and what they may do: JupyterHub tokens and OAuth cookies, and our scopes.

The API takes a JupyterHub token (``Authorization: token ...`` or ``Bearer``) or, for pages of
the service calling their own API, the service's OAuth cookie (with JupyterHub's XSRF check on
anything but GET). Two custom scopes decide the rest:

- ``custom:gpupool:use`` - pools the caller may use, with free GPUs; their own servers, quota and
  usage; admissions for themselves;
- ``custom:gpupool:admin`` - everything: every pool, node, server and quota, changes to them, and
  admissions on behalf of any user (what the hub's spawner does).

No identity: 401. An identity without the scope the route needs: 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

USE_SCOPE = "custom:gpupool:use"
ADMIN_SCOPE = "custom:gpupool:admin"

#: What each scope is for, as ``c.JupyterHub.custom_scopes`` wants it.
CUSTOM_SCOPES = {
    USE_SCOPE: {
        "description": "Use GPU pools: see pools and your own servers, quota and admissions.",
    },
    ADMIN_SCOPE: {
        "description": "Administer GPU pools: pools, nodes, quotas and everyone's servers.",
    },
}


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
    def is_user(self) -> bool:
        return self.kind == "user"

    def allows(self, scope: str) -> bool:
        return self.is_admin if scope == ADMIN_SCOPE else self.may_use
