"""A database the tests can take away and give back: the service's database down at its start or
while it runs, on SQLite and PostgreSQL (fixture ``outage`` in tests/conftest.py).

- PostgreSQL: a throwaway server of its own (tests/pg.py), stopped (``pg_ctl stop``: its clients
  lose their connections, new ones are refused) and started again on the same port and data.
- SQLite: the file in a directory of its own, moved away (the service cannot open the file: as a
  volume not mounted yet) and moved back. A service that has the file open keeps it, so on SQLite
  only an outage at the start is played.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pg


@dataclass
class Outage:
    kind: str  # "sqlite" or "postgresql"
    url: str
    server: pg.Server | None = None
    directory: Path | None = None
    down_now: bool = field(default=False)

    def down(self) -> None:
        assert not self.down_now
        if self.server is not None:
            pg.stop(self.server)
        else:
            assert self.directory is not None
            self.directory.rename(self.directory.with_name(self.directory.name + "-away"))
        self.down_now = True

    def up(self) -> None:
        assert self.down_now
        if self.server is not None:
            pg.start(self.server)
        else:
            assert self.directory is not None
            self.directory.with_name(self.directory.name + "-away").rename(self.directory)
        self.down_now = False


@contextlib.contextmanager
def outage(kind: str, tmp_path: Path) -> Iterator[Outage]:
    """An :class:`Outage` of ``kind`` (up at first); it is up again when the test ends."""
    if kind == "sqlite":
        directory = tmp_path / "database"
        directory.mkdir()
        o = Outage(kind, f"sqlite:///{directory / 'gpupool.sqlite'}", directory=directory)
        try:
            yield o
        finally:
            if o.down_now:
                o.up()
        return
    with pg.running() as server:
        o = Outage(kind, server.url, server=server)
        try:
            yield o
        finally:
            if o.down_now:
                o.up()  # pg.running() stops what runs
