"""Which nodes a table shows: filtered by pool, status and name, one page at a time.

``GET api/v1/nodes`` and the nodes and pool pages take the same query arguments, so a page can
refresh its rows from the API: ``pool``, ``status`` (one of :data:`STATUSES`), ``q`` (part of the
node's name), ``offset`` and ``limit``. With 5,000 nodes a page shows 100 and stays fast; the
API without ``limit`` answers every node, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.usage.amounts import Amount
from ...core.usage.index import NodeUsage, UsageIndex
from ...core.words.gpu_counts import equivalents
from ..errors import bad_request


def _free(n: NodeUsage) -> Amount:
    """Its free GPU-equivalents: a MIG node with a free instance has free GPUs."""
    return equivalents(n.parts)[2]


def _reason(words: str) -> Callable[[NodeUsage], bool]:
    return lambda n: any(words in r for r in n.reasons)


#: ``status`` argument -> (what the filter menu says, the test).
STATUSES: dict[str, tuple[str, Callable[[NodeUsage], bool]]] = {
    "": ("any status", lambda n: True),
    "ok": ("ready, nothing wrong", lambda n: n.schedulable and not n.reasons),
    "free": ("with free GPUs", lambda n: n.schedulable and _free(n) > 0),
    "full": ("every GPU in use", lambda n: bool(n.parts) and _free(n) == 0),
    "problem": ("with a problem", lambda n: bool(n.reasons)),
    "not-ready": ("not ready", _reason("not ready")),
    "cordoned": ("cordoned", _reason("cordoned")),
    "pressure": ("memory, disk or PID pressure", _reason("pressure")),
    "network": ("network unavailable", _reason("network unavailable")),
    "gpu-missing": ("GPU resource missing", _reason("GPU resource missing")),
}

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@dataclass(frozen=True)
class NodeQuery:
    pool: str | None = None
    status: str = ""
    q: str = ""
    offset: int = 0
    limit: int | None = None  # None: every node


#: The most digits a query argument's number may have (a 64-bit integer's 18, safely).
MAX_ARGUMENT_DIGITS = 18


def whole_number(value: str | None, name: str, default: int | None, high: int) -> int | None:
    """A query argument that must be a whole number (``high`` if it is above); a 400 otherwise.

    Only ASCII digits: ``"²".isdigit()`` is true, yet ``int("²")`` raises. A number of more
    than :data:`MAX_ARGUMENT_DIGITS` digits is refused rather than converted (``int()`` gives up
    at 4,300 digits with a ValueError).
    """
    if value is None or value == "":
        return default
    if not (value.isascii() and value.isdigit()):
        raise bad_request(f"{name} must be a whole number, not {value[:20]!r}")
    if len(value) > MAX_ARGUMENT_DIGITS:
        raise bad_request(
            f"{name} must be a whole number of at most {MAX_ARGUMENT_DIGITS} digits "
            f"(up to {high:,} is used), not one of {len(value):,}"
        )
    return min(int(value), high)


def parse_query(arg: Callable[[str], str | None], default_limit: int | None = None) -> NodeQuery:
    """The query from request arguments (``arg(name)``; a 400 for a bad one)."""
    status = arg("status") or ""
    if status not in STATUSES:
        raise bad_request(f"status {status!r} is not one of: {', '.join(s for s in STATUSES if s)}")
    return NodeQuery(
        pool=arg("pool") or None,
        status=status,
        q=(arg("q") or "").strip(),
        offset=whole_number(arg("offset"), "offset", 0, 10**9) or 0,
        limit=whole_number(arg("limit"), "limit", default_limit, MAX_LIMIT),
    )


@dataclass(frozen=True)
class Page:
    """One page of a table: its rows, and where it is among all the rows that match."""

    rows: list[Any]
    total: int  # rows that match, on every page
    offset: int
    limit: int | None

    @property
    def number(self) -> int:
        return self.offset // self.limit + 1 if self.limit else 1

    @property
    def pages(self) -> int:
        if not self.limit:
            return 1
        return max(1, -(-self.total // self.limit))

    def offset_of(self, number: int) -> int:
        return (number - 1) * (self.limit or 0)


def page_of(rows: Sequence[Any], offset: int, limit: int | None) -> Page:
    """The page of ``rows`` that holds ``offset`` (the last page if it is past the end)."""
    total = len(rows)
    offset = offset if offset < total else max(0, total - 1)
    if not limit:
        return Page(list(rows), total, 0, None)
    offset -= offset % limit
    return Page(list(rows[offset : offset + limit]), total, offset, limit)


def select(index: UsageIndex, query: NodeQuery) -> Page:
    """The page of nodes that ``query`` asks for, in name order.

    Rows are built only for the nodes on the page when no status is asked for (names are
    filtered without building rows), so paging through 5,000 nodes costs a page's worth.
    """
    names = index.node_names(query.pool)
    if query.q:
        needle = query.q.lower()
        names = [n for n in names if needle in n.lower()]
    rows: list[NodeUsage] = []
    if query.status:
        test = STATUSES[query.status][1]
        matching = [row for row in map(index.node, names) if row is not None and test(row)]
        total = len(matching)
    else:
        total = len(names)
    offset = query.offset if query.offset < total else max(0, total - 1)
    if query.limit:
        offset -= offset % query.limit
        end = offset + query.limit
    else:
        offset, end = 0, total
    if query.status:
        rows = matching[offset:end]
    else:
        rows = [row for row in map(index.node, names[offset:end]) if row is not None]
    return Page(rows, total, offset, query.limit)
