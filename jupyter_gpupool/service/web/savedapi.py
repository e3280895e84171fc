"""``POST api/v1/servers/saved``: what a user's open JupyterLab saved before a stop.

The server's jupyter-server extension sends it with the server's token once the lab has saved
the documents (a stop's deadline within a minute): ``{"server": "", "count": 3, "paths":
[...], "notice": {"kind": "idle", ...}}``. It is kept on the server's open session in the
ledger, and the answer comes once the database has committed it. A user records it for their
own servers only; an admin names the ``user``. The checks are :mod:`core.time.saved_work`'s.
"""

from __future__ import annotations

from ...core.time.saved_work import parse_report
from ..bodies import parse_json
from ..errors import ApiError
from .auth import USE_SCOPE
from .base import APIHandler


class SavedWorkHandler(APIHandler):
    scopes = {"POST": USE_SCOPE}

    async def post(self) -> None:
        try:
            report = parse_report(parse_json(self.body))
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        caller = self.caller
        if report.user is None or report.user == caller.name:
            user = caller.name
            if not caller.is_user and not caller.is_admin:
                raise ApiError(400, f"{caller.who} has no servers: name the user")
        elif caller.is_admin:
            user = report.user
        else:
            raise ApiError(403, f"{caller.who} may record saved work for their own servers only")
        self.write_json(await self.ctx.records.saved(user, report))
