"""The throwaway PostgreSQL server of the tests (tests/pg.py, fixtures ``postgresql_url`` and
``fresh_postgresql_url`` in tests/conftest.py): what the database tests stand on."""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path

import pg
import pytest
import sqlalchemy as sa
from needs import need

LISTEN = "0A"  # TCP state in /proc/net/tcp*


def _scalar(url: str, query: str) -> object:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(query)).scalar_one()
    finally:
        engine.dispose()


def test_server_is_postgresql_15(postgresql_url: str) -> None:
    """SQLAlchemy connects to the URL over TCP as the cluster's superuser, and the server is
    the PostgreSQL 15 of the binaries found (the version clusters run)."""
    assert re.fullmatch(r"postgresql\+psycopg://gpupool@127\.0\.0\.1:\d+/gpupool", postgresql_url)
    version = str(_scalar(postgresql_url, "select version()"))
    assert version.startswith("PostgreSQL 15."), version
    bindir = pg.find_bindir()
    assert bindir is not None
    installed = re.search(r"\) (\S+)", pg.server_version(bindir))
    assert installed is not None
    assert version.startswith(f"PostgreSQL {installed.group(1)} "), (version, installed)
    assert _scalar(postgresql_url, "select current_user") == "gpupool"
    assert _scalar(postgresql_url, "select inet_server_addr()::text") == "127.0.0.1/32"


@pytest.mark.parametrize("mark", ["first", "second"])
def test_fresh_database_is_empty_and_its_own(
    fresh_postgresql_url: str, postgresql_url: str, mark: str
) -> None:
    """Each test gets a new empty database on the same server: the table the first run creates
    is not in the second run's database, nor in the server's main database."""
    server = sa.make_url(postgresql_url)
    fresh = sa.make_url(fresh_postgresql_url)
    assert (fresh.host, fresh.port, fresh.username) == (server.host, server.port, server.username)
    assert fresh.database != server.database
    engine = sa.create_engine(fresh_postgresql_url)
    try:
        assert sa.inspect(engine).get_table_names() == []
        with engine.begin() as conn:
            assert conn.execute(sa.text("select current_database()")).scalar_one() == fresh.database
            conn.execute(sa.text("create table marks (mark text)"))
            conn.execute(sa.text("insert into marks values (:m)"), {"m": mark})
        with engine.connect() as conn:
            assert conn.execute(sa.text("select mark from marks")).scalars().all() == [mark]
    finally:
        engine.dispose()
    main = sa.create_engine(postgresql_url)
    try:
        assert "marks" not in sa.inspect(main).get_table_names()
    finally:
        main.dispose()


def _listening(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on ``port``, from the kernel's tables
    (all of this network namespace's sockets, whoever owns them)."""
    found: set[str] = set()
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        table = Path("/proc/net") / name
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state != LISTEN or int(hexport, 16) != port:
                continue
            # the address is 32-bit words in host byte order
            raw = b"".join(
                struct.pack("=I", int(addr[i : i + 8], 16)) for i in range(0, len(addr), 8)
            )
            found.add(socket.inet_ntop(family, raw))
    return found


def test_server_listens_on_127_0_0_1_only(postgresql_url: str) -> None:
    """The kernel's socket tables show the server's port listening on 127.0.0.1 and nowhere
    else (not on 0.0.0.0, not on IPv6)."""
    need(Path("/proc/net/tcp").exists(), "no /proc/net/tcp (not Linux)", "CI runs on Linux")
    port = sa.make_url(postgresql_url).port
    assert port is not None
    assert _listening(port) == {"127.0.0.1"}
    assert _scalar(postgresql_url, "show listen_addresses") == "127.0.0.1"


def test_databases_of_earlier_tests_are_dropped(
    fresh_postgresql_url: str, postgresql_url: str
) -> None:
    """Only this test's fresh database is left on the server: those of the tests before it
    (in this file: the two runs above) were dropped after them."""
    own = sa.make_url(fresh_postgresql_url).database
    left = {d for d in pg.databases(postgresql_url) if d.startswith("test_")}
    assert left == {own}
