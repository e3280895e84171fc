"""A throwaway PostgreSQL server for tests: Debian's PostgreSQL binaries, a cluster in a temporary
directory, listening on 127.0.0.1 only on a free port, with trust authentication.

``postgresql_url`` (a session fixture in tests/conftest.py) starts one per test run with
:func:`running`; ``fresh_postgresql_url`` gives each test its own empty database on it
(:func:`create_database`, :func:`drop_database`).

PostgreSQL refuses to run as root, and CI runs the suite as root: there the server runs as the
``postgres`` system user (Debian's package creates it), in a directory that user owns. Without the
binaries the tests that need them skip, and fail under CI (tests/needs.py).

pytest-postgresql is not used: its executor runs ``pg_ctl initdb`` and ``pg_ctl start`` as the
current user in a directory pytest creates (0700, root's), so as root it fails, and working around
that (a ``pg_ctl`` wrapper plus ``chown``) costs more than this module.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needs import need, need_module

WHERE = "scripts/test.sh installs postgresql as root"
# the cluster's superuser (initdb -U) and its first database
USER = "gpupool"
DATABASE = "gpupool"
# what the server runs as when the tests run as root (Debian's postgresql package creates it)
SYSTEM_USER = "postgres"


def _has_server(bindir: Path) -> bool:
    return all((bindir / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres"))


def _major(bindir: Path) -> tuple[int, ...]:
    m = re.search(r"/postgresql/(\d+(?:\.\d+)?)/", f"{bindir}/")
    return tuple(int(x) for x in m.group(1).split(".")) if m else (0,)


def find_bindir() -> Path | None:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``: ``pg_config --bindir`` when it
    has them (Debian's pg_config comes with libpq and may name a client-only version), else the
    highest version in /usr/lib/postgresql/*/bin; None when there are none."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True
        )
        bindir = Path(out.stdout.strip())
        if _has_server(bindir):
            return bindir
    found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if _has_server(p)]
    return max(found, key=_major) if found else None


def server_version(bindir: Path) -> str:
    """What ``postgres --version`` says, e.g. ``postgres (PostgreSQL) 15.14 (Debian ...)``."""
    return subprocess.run(
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, timeout=10
    ).stdout.strip()


@dataclass(frozen=True)
class Server:
    """A running throwaway server."""

    url: str  # postgresql+psycopg://USER@127.0.0.1:PORT/DATABASE
    port: int
    datadir: Path
    bindir: Path
    started_in: float  # seconds: initdb, start, create the database


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> dict[str, Any]:
    """Popen arguments that run a command as the user the server runs as: ours, or the
    ``postgres`` system user when we are root."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        need(False, f"running as root and no {SYSTEM_USER!r} user to run PostgreSQL as", WHERE)
        raise  # pragma: no cover - need() raised already
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _run(argv: Sequence[str], cwd: Path, what: str, timeout: float = 120) -> None:
    done = subprocess.run(
        list(argv),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
        **_as_server_user(),
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{what} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}"
        )


def _url(port: int, database: str) -> str:
    return f"postgresql+psycopg://{USER}@127.0.0.1:{port}/{database}"


def _connect(url: str) -> Any:
    """A psycopg autocommit connection to ``url`` (an SQLAlchemy URL), for CREATE/DROP DATABASE."""
    psycopg = need_module("psycopg", "the PostgreSQL driver psycopg (pip install -e .[test])")
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


CONFIG = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 16MB
max_connections = 100
"""


@contextlib.contextmanager
def running(attempts: int = 3) -> Iterator[Server]:
    """Start a server in a new temporary directory, create the database ``gpupool``, yield the
    :class:`Server`, then stop the server (``pg_ctl stop -m fast``) and remove the directory."""
    bindir = find_bindir()
    need(bindir is not None, "PostgreSQL server binaries (initdb, pg_ctl, postgres)", WHERE)
    assert bindir is not None
    as_user = _as_server_user()
    began = time.monotonic()
    # in /tmp, not under pytest's 0700 base directory, which the postgres user cannot enter;
    # a short path also keeps the unix socket's path under its 107-character limit
    top = Path(tempfile.mkdtemp(prefix="gpupool-pg-"))
    datadir, log = top / "data", top / "server.log"
    started = False
    try:
        if as_user:
            os.chown(top, as_user["user"], as_user["group"])
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(datadir),
                "-U",
                USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
                "--no-instructions",
            ],
            top,
            "initdb",
        )
        base = (datadir / "postgresql.conf").read_text()
        for attempt in range(attempts):
            # the port is free now; another process may take it before the server binds it
            port = _free_port()
            (datadir / "postgresql.conf").write_text(base + CONFIG.format(port=port, sockets=top))
            try:
                start = [str(bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(datadir)]
                _run([*start, "-l", str(log)], top, "pg_ctl start")
                started = True
                break
            except RuntimeError as e:
                logged = log.read_text(errors="replace") if log.exists() else ""
                if "could not bind" not in logged or attempt == attempts - 1:
                    raise RuntimeError(f"{e}\nserver log:\n{logged[-2000:]}") from None
        with _connect(_url(port, "postgres")) as conn:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        yield Server(_url(port, DATABASE), port, datadir, bindir, time.monotonic() - began)
    finally:
        if started:
            stop = [str(bindir / "pg_ctl"), "stop", "-w", "-t", "60", "-D", str(datadir)]
            try:
                _run([*stop, "-m", "fast"], top, "pg_ctl stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                _run([*stop, "-m", "immediate"], top, "pg_ctl stop -m immediate")
        shutil.rmtree(top, ignore_errors=True)


def _name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def create_database(server_url: str) -> str:
    """A new empty database on the server of ``server_url``; its URL."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    with _connect(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name


def drop_database(url: str, server_url: str) -> None:
    """Drop the database of ``url`` (made by :func:`create_database`), closing its connections."""
    with _connect(server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{_name(url)}" WITH (FORCE)')


def databases(server_url: str) -> set[str]:
    """The names of the databases on the server of ``server_url`` (templates left out)."""
    with _connect(server_url) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE NOT datistemplate").fetchall()
    return {str(r[0]) for r in rows}


def stop(server: Server) -> None:
    """Stop a server of :func:`running` (its clients lose their connections), to test outages."""
    pg_ctl = [str(server.bindir / "pg_ctl"), "-w", "-t", "60", "-D", str(server.datadir)]
    _run([*pg_ctl, "stop", "-m", "fast"], server.datadir.parent, "pg_ctl stop")


def start(server: Server) -> None:
    """Start a server :func:`stop` stopped, on the same port and data."""
    pg_ctl = [str(server.bindir / "pg_ctl"), "-w", "-t", "60", "-D", str(server.datadir)]
    log = server.datadir.parent / "server.log"
    _run([*pg_ctl, "start", "-l", str(log)], server.datadir.parent, "pg_ctl start")
