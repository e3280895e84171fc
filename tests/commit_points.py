"""Where the database's writer commits, as its driver is asked to: the tests that hold a commit
(a slow disk) or fail one (a full disk) do it there.

The writer commits a batch in one of two ways (``jupyter_gpupool/db/writer.py``): one statement
alone, on a connection in autocommit mode, which the database commits as it runs it; or
``BEGIN``, its statements, and the driver's ``commit()``. So a commit point is, in the writer's
thread, either a statement that writes outside a ``BEGIN`` (just before the driver runs it), or
the engine's ``commit`` event inside one (just before the driver commits). At each, ``at`` is
called with the statements the transaction carries; whatever it raises is what the driver
raised, before anything of the transaction is in the database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event

WRITES = ("INSERT", "UPDATE", "DELETE")


class CommitPoints:
    def __init__(self, engine: Engine, at: Callable[[list[str]], None]) -> None:
        self.at = at
        self._open: list[str] | None = None  # the statements since BEGIN
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "rollback", self._rollback)

    @staticmethod
    def _writer() -> bool:
        return threading.current_thread().name == "gpupool-db"

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not self._writer():
            return
        word = statement.lstrip()[:6].upper()
        if word == "BEGIN":
            self._open = []
        elif self._open is not None:
            self._open.append(statement)
        elif word in WRITES:
            self.at([statement])  # one statement alone: its own transaction

    def _commit(self, _conn: Any) -> None:
        if self._writer() and self._open is not None:
            statements, self._open = self._open, None
            self.at(statements)

    def _rollback(self, _conn: Any) -> None:
        if self._writer():
            self._open = None


def carries(statements: list[str], table: str) -> bool:
    """Whether a transaction of ``statements`` writes rows into ``table``."""
    return any(s.lstrip().upper().startswith(f"INSERT INTO {table.upper()}") for s in statements)
