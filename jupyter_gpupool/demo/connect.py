"""Find a running ``gpupool demo`` from a notebook or a script, and wait until it answers.

::

    from jupyter_gpupool.demo.connect import connect

    demo = await connect()          # waits (up to 2 minutes) for a demo that is still starting
    hub, service = demo.hub(), demo.service()   # HubClient and GPUPoolClient, admin token

Where the demo is, in order:

- its state directory: ``$GPUPOOL_DEMO_DIR`` (binder/start sets it), else the first of
  ``./gpupool-demo``, ``../gpupool-demo`` and ``~/.gpupool-demo`` that holds an ``admin-token``
  (``gpupool demo`` run from a clone's root, seen from the clone or from ``examples/``);
- its URL: ``$GPUPOOL_URL``, else the state directory's ``url`` file (the demo writes it once
  everything answers), else ``http://127.0.0.1:8000``;
- its admin token: the state directory's ``admin-token``.

The files are the ones ``gpupool --state-dir DIR`` reads (:mod:`jupyter_gpupool.commands.connection`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..client import GPUPoolClient, GPUPoolError
from ..commands.connection import service_url
from ..hubclient import HubClient
from . import ADMIN_TOKEN_FILE, DEFAULT_PORT, URL_FILE, state_dirs

__all__ = ["DemoConnection", "DemoNotFound", "connect", "find_demo", "find_state_dir"]

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"

HOW_TO_START = (
    "Start the demo in a terminal, from the root of a clone of jupyter_gpupool:\n"
    '    pip install -e ".[demo]" && gpupool demo\n'
    "and run this again once it prints `ready http://127.0.0.1:8000`. A demo started elsewhere "
    "(`gpupool demo --state-dir DIR --port PORT`) is found with GPUPOOL_DEMO_DIR=DIR and "
    "GPUPOOL_URL=http://127.0.0.1:PORT in the environment."
)


class DemoNotFound(Exception):
    """No demo could be found, or it did not answer in time; the message says what to do."""


@dataclass(frozen=True)
class DemoConnection:
    """A running demo: the hub's URL, the demo's admin token and its state directory."""

    url: str  # the hub's, http://127.0.0.1:8000 (no trailing slash)
    token: str
    state_dir: Path

    @property
    def service_url(self) -> str:
        """The gpupool service through the hub's proxy (``…/services/gpupool/``)."""
        return service_url(self.url)

    @property
    def hub_api_url(self) -> str:
        return self.url + "/hub/api/"

    def service(self) -> GPUPoolClient:
        """A client of the gpupool service with the admin token."""
        return GPUPoolClient(self.service_url, self.token)

    def hub(self) -> HubClient:
        """A client of the hub's REST API with the admin token."""
        return HubClient(self.hub_api_url, self.token)


def find_state_dir(
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
) -> Path | None:
    """``$GPUPOOL_DEMO_DIR``, else the first candidate directory with an admin token, else None."""
    environ = os.environ if environ is None else environ
    if environ.get("GPUPOOL_DEMO_DIR"):
        return Path(environ["GPUPOOL_DEMO_DIR"]).expanduser().absolute()
    for candidate in state_dirs(cwd, home):
        if (candidate / ADMIN_TOKEN_FILE).is_file():
            return candidate
    return None


def hub_url(url: str) -> str:
    """The hub's base URL from the hub's own or the service's (``…/services/gpupool/``)."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    path = parts.path.split("/services/", 1)[0].rstrip("/").removesuffix("/hub")
    return f"{parts.scheme}://{parts.netloc}{path}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def find_demo(
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
) -> tuple[DemoConnection, str]:
    """Where the demo should be, from the files and the environment alone (no request), and
    what is still missing (``""`` when the state directory says the demo is ready).

    Raises :class:`DemoNotFound` when there is no state directory to look at.
    """
    environ = os.environ if environ is None else environ
    state = find_state_dir(environ, cwd, home)
    if state is None:
        looked = ", ".join(str(c) for c in state_dirs(cwd, home))
        raise DemoNotFound(
            f"No gpupool demo found (looked for {ADMIN_TOKEN_FILE} in {looked}).\n{HOW_TO_START}"
        )
    token = _read(state / ADMIN_TOKEN_FILE)
    written = _read(state / URL_FILE)
    url = hub_url(environ.get("GPUPOOL_URL") or written or DEFAULT_URL)
    missing = ""
    if not token:
        missing = f"no {ADMIN_TOKEN_FILE} in {state} yet"
    elif not written:
        # the demo writes it once the hub and the service answer, and removes it when it stops
        missing = f"no {URL_FILE} file in {state} yet"
    return DemoConnection(url, token, state), missing


async def connect(
    timeout: float = 120.0,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
    say: Callable[[str], None] = print,
    interval: float = 1.0,
) -> DemoConnection:
    """Find the demo and wait until its gpupool service answers the admin token.

    ``say`` is told once that we are waiting (a demo takes a few seconds to start, longer on
    binder), and once connected. :class:`DemoNotFound` after ``timeout`` seconds, or at once
    when there is no demo to wait for or it refuses the token.
    """
    deadline = time.monotonic() + timeout
    waiting = False
    while True:
        demo, missing = find_demo(environ, cwd, home)
        if not missing:
            missing = await _answer(demo)
        if not missing:
            say(f"Connected to the gpupool demo at {demo.url} (state directory {demo.state_dir})")
            return demo
        if time.monotonic() >= deadline:
            raise DemoNotFound(
                f"The gpupool demo at {demo.url} did not answer within {timeout:g} seconds "
                f"({missing}).\n{HOW_TO_START}"
            )
        if not waiting:
            waiting = True
            say(
                f"Waiting for the gpupool demo at {demo.url} ({missing}); it can take a minute "
                f"to start (giving up after {timeout:g} seconds)..."
            )
        await asyncio.sleep(interval)


async def _answer(demo: DemoConnection) -> str:
    """``""`` when the service answers with the pools, else why not (a reason to wait)."""
    async with demo.service() as service:
        try:
            await service.pools()
        except GPUPoolError as e:
            if e.status in (401, 403):
                raise DemoNotFound(
                    f"The gpupool demo at {demo.url} refused the token in "
                    f"{demo.state_dir / ADMIN_TOKEN_FILE} ({e.message}): is that directory the "
                    f"state of the demo running there?\n{HOW_TO_START}"
                ) from e
            return e.message if e.status == 0 else f"it answers {e.status}: {e.message}"
    return ""
