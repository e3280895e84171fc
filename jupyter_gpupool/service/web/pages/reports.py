"""The admins' reports page (``{prefix}reports``): GPU-hours per user, group, pool or shape from
the ledger, within and over quota, as a table with bars (the largest rows) and the same as CSV; when
the database is missing or down the page says why."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from ...errors import ApiError
from .admin import sentence
from .base import AdminPageHandler
from .charts import hour_bars

REPORT_BY = {"user": "User", "group": "Group", "pool": "Pool", "shape": "Shape"}
REPORT_SINCE = {"7d": "last 7 days", "30d": "last 30 days"}


@dataclass(frozen=True)
class ReportQuery:
    """What the reports page's form asks: ``by``, ``since`` (7d, 30d or a date), ``until``."""

    by: str
    since: str
    until: str

    @property
    def since_date(self) -> str:
        """``since`` when it is a date (the form's date field), else empty."""
        return self.since if re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.since) else ""

    def query(self) -> str:
        """The same report's query string, for the API (CSV) and links."""
        args = {"since": self.since, "until": self.until, "by": self.by}
        return urlencode({k: v for k, v in args.items() if v})


def report_query(arg: Any) -> ReportQuery:
    """``?by=&since=&until=``, as the API takes them, or the form's ``since=date&from=DATE``
    (``since`` is then empty when no date was given); the defaults are the API's (by user,
    the last 7 days)."""
    since = (arg("since") or "").strip()
    if since == "date" or (not since and arg("from")):
        since = (arg("from") or "").strip()
    else:
        since = since or "7d"
    return ReportQuery((arg("by") or "user").strip(), since, (arg("until") or "").strip())


def report_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The sums of a GPU-hours report's columns, for the table's last line."""
    keys = ("gpu_hours", "within_quota", "over_quota", "sessions")
    return {k: round(sum(r[k] for r in rows), 4) for k in keys}


#: Rows of a GPU-hours report the reports page shows (the largest).
REPORT_ROWS = 100


class ReportsPage(AdminPageHandler):
    """``{prefix}reports?by=user|group|pool|shape&since=7d|30d|YYYY-MM-DD[&until=YYYY-MM-DD]``:
    GPU-hours per subject from the ledger, within and over quota, as a table with bars, and
    the same as CSV (``api/v1/reports/gpu-hours.csv``)."""

    nav = "reports"
    title = "Reports"

    async def get(self) -> None:
        query = report_query(self.arg)
        report: dict[str, Any] | None = None
        problem, refusal, status = "", "", 200
        try:
            if not query.since:
                raise ApiError(400, "Choose the date the report starts from.")
            report = await self.ctx.records.gpu_hours(query.since, query.until, query.by, None)
        except ApiError as e:
            if e.status == 400:
                refusal, status = sentence(e.message), 400
            elif e.status == 503:
                problem = sentence(e.message)
            else:
                raise
        if report is not None and report.get("problem"):
            problem = sentence(str(report["problem"]))
        every = report["rows"] if report is not None else []
        # The largest rows only (they come largest first): a table of 2,000 users was a 1.5 MB
        # page; the totals are of every row, and the CSV has them all.
        rows = hour_bars(every[:REPORT_ROWS])
        self.render_page(
            "reports.html",
            status=status,
            query=query,
            report=report,
            rows=rows,
            row_count=len(every),
            totals=report_totals(every),
            problem=problem,
            refusal=refusal,
            by_choices=REPORT_BY,
            since_choices=REPORT_SINCE,
            csv_url=f"{self.svc}api/v1/reports/gpu-hours.csv?{query.query()}",
        )
