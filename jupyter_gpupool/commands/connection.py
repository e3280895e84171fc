"""Which gpupool service a verb talks to, and how failures become one line and an exit status.

The service is found from, in order: ``--url``/``--token`` (or ``--token-file``), the state
directory of a running ``gpupool demo`` (``--state-dir DIR``: ``DIR/url`` and ``DIR/admin-token``),
then ``GPUPOOL_URL``/``GPUPOOL_TOKEN``. With none of them, a running demo is looked for where the
tour looks (``$GPUPOOL_DEMO_DIR``, else ``./gpupool-demo``, ``../gpupool-demo``,
``~/.gpupool-demo``): the first state directory holding a ``url`` file (the demo writes it once
ready and removes it when it stops), and which one is said on stderr. The URL may be the
service's own (``https://hub.example.org/services/gpupool/``) or the hub's, which gets
``services/gpupool/``.

Exit statuses: 0 done; 1 the request was wrong or refused (bad file, unknown pool, missing
scope...); 2 the service could not be reached or is not serving.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..demo import ADMIN_TOKEN_FILE, URL_FILE, state_dirs

if TYPE_CHECKING:  # imported where used: aiohttp is most of a verb's start-up time
    from ..client import GPUPoolClient, GPUPoolError

EXIT_OK = 0
EXIT_USER = 1
EXIT_UNREACHABLE = 2

SERVICE_PATH = "services/gpupool/"

Action = Callable[["GPUPoolClient", argparse.Namespace], Awaitable[int | None]]


class CommandError(Exception):
    """What went wrong, in one line that says what to do; ``details`` are printed before it."""

    def __init__(self, message: str, status: int = EXIT_USER, details: Sequence[str] = ()):
        super().__init__(message)
        self.message = message
        self.status = status
        self.details = list(details)


#: The connection options, which may also come before the verb (``gpupool --url URL get pools``).
CONNECTION_OPTIONS = ("url", "token", "token_file", "state_dir")


def add_connection_options(parser: argparse.ArgumentParser, dest_prefix: str = "") -> None:
    """``--url``, ``--token``, ``--token-file`` and ``--state-dir``; the top-level parser gives
    them a ``dest_prefix``, so that a verb's own (None when not given) does not hide them."""
    g = parser.add_argument_group("connection")
    g.add_argument(
        "--url",
        dest=dest_prefix + "url",
        metavar="URL",
        help="the gpupool service (…/services/gpupool/) or JupyterHub URL (default: $GPUPOOL_URL, "
        "else a running `gpupool demo` in ./gpupool-demo, ../gpupool-demo or ~/.gpupool-demo)",
    )
    g.add_argument(
        "--token",
        dest=dest_prefix + "token",
        metavar="TOKEN",
        help="a JupyterHub API token (default: $GPUPOOL_TOKEN)",
    )
    g.add_argument(
        "--token-file",
        dest=dest_prefix + "token_file",
        metavar="FILE",
        help="read the API token from FILE",
    )
    g.add_argument(
        "--state-dir",
        dest=dest_prefix + "state_dir",
        metavar="DIR",
        help="the state directory of a running `gpupool demo` (its URL and admin token)",
    )


def service_url(url: str) -> str:
    """The service's base URL: as given when it names a service, else the hub's + ``services/gpupool/``."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if not parts.netloc:
        raise CommandError(f"--url {url!r} is not a URL; give one like http://hub.example.org/")
    path = parts.path.rstrip("/") + "/"
    if "/services/" not in path:
        path = path.removesuffix("hub/") + SERVICE_PATH
    return f"{parts.scheme}://{parts.netloc}{path}"


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise CommandError(f"cannot read {what} {path}: {e.strerror}") from None


def connection(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    cwd: Path | None = None,
    home: Path | None = None,
) -> tuple[str, str]:
    """``(service URL, token)`` from the options, a demo state directory, the environment, or
    else a running demo found where the tour looks (``cwd`` and ``home`` are for tests)."""
    url = args.url
    token = args.token
    if not token and args.token_file:
        token = _read(Path(args.token_file), "the token file")
    state_dir = args.state_dir
    if not state_dir and not url and not environ.get("GPUPOOL_URL"):
        state_dir = running_demo(environ, cwd, home)
    if state_dir:
        state = Path(state_dir)
        if not state.is_dir():
            named = "--state-dir" if args.state_dir else "GPUPOOL_DEMO_DIR"
            raise CommandError(f"{named} {state} is not a directory")
        if not url:
            if not (state / URL_FILE).exists():
                raise CommandError(
                    f"{state / URL_FILE} does not exist: is `gpupool demo --state-dir {state}` "
                    "running? (it writes the file once it is ready)",
                    EXIT_UNREACHABLE,
                )
            url = _read(state / URL_FILE, "the demo's URL file")
        if not token:
            token = _read(state / ADMIN_TOKEN_FILE, "the demo's admin token")
        if not args.state_dir:
            # found, not given: say which demo, so that a stale one is noticed
            print(f"gpupool: using the demo in {shown(state, cwd, home)} ({url})", file=sys.stderr)
    url = url or environ.get("GPUPOOL_URL", "")
    token = token or environ.get("GPUPOOL_TOKEN", "")
    if not url:
        raise CommandError(
            "no service URL: give --url URL, set GPUPOOL_URL, or --state-dir DIR of a running "
            f"`gpupool demo` (found no running demo: no url file in "
            f"{', '.join(shown(d, cwd, home) for d in state_dirs(cwd, home))})"
        )
    if not token:
        raise CommandError(
            "no API token: give --token TOKEN (or --token-file FILE), set GPUPOOL_TOKEN, or "
            "--state-dir DIR of a running `gpupool demo`"
        )
    return service_url(url), token


def running_demo(
    environ: Mapping[str, str], cwd: Path | None = None, home: Path | None = None
) -> Path | None:
    """``$GPUPOOL_DEMO_DIR`` (running or not: it was named), else the first of the demo's
    :func:`~jupyter_gpupool.demo.state_dirs` that holds a ``url`` file, i.e. whose demo runs."""
    if environ.get("GPUPOOL_DEMO_DIR"):
        return Path(environ["GPUPOOL_DEMO_DIR"]).expanduser()
    for candidate in state_dirs(cwd, home):
        if (candidate / URL_FILE).is_file():
            return candidate
    return None


def shown(path: Path, cwd: Path | None = None, home: Path | None = None) -> str:
    """A path as a person would type it: from the working directory, its parent, or ``~``."""
    path = path.absolute()
    cwd = (cwd or Path.cwd()).absolute()
    home = home or Path.home()
    ways = [
        prefix + str(path.relative_to(base))
        for base, prefix in ((cwd, "./"), (cwd.parent, "../"), (home, "~/"))
        if path.is_relative_to(base) and path != base
    ]
    return min(ways, key=len) if ways else str(path)  # the first of the shortest


def explain(e: GPUPoolError, url: str) -> CommandError:
    """A failed request as one line that says what to do, with the right exit status."""
    answered = bool(e.body.get("message"))  # the service itself answered (JSON)
    message = e.message.split("\n", 1)[0].rstrip(":")
    problems = [str(p) for p in e.body.get("problems") or ()]
    if e.status == 0:
        return CommandError(
            f"cannot reach the gpupool service at {url} ({e.message.rsplit(': ', 1)[-1]}); "
            "check --url or GPUPOOL_URL, and that the service is running",
            EXIT_UNREACHABLE,
        )
    if e.status in (502, 503, 504):
        if answered:
            return CommandError(
                f"the gpupool service cannot answer now: {message}", EXIT_UNREACHABLE
            )
        return CommandError(
            f"{url} answered {e.status} ({message}): the hub is up but the gpupool service is "
            "not; check that it runs (see the hub's log)",
            EXIT_UNREACHABLE,
        )
    if e.status == 401:
        return CommandError(
            "the service refused the API token: give a valid JupyterHub API token with --token, "
            "GPUPOOL_TOKEN or --state-dir"
        )
    if e.status == 403:
        if answered:
            hint = "; use the token of a gpupool admin" if "admin" in message else ""
            return CommandError(message + hint)
        return CommandError(
            "the hub refused the token for the gpupool service: its owner needs "
            "access:services!service=gpupool and custom:gpupool:use or custom:gpupool:admin"
        )
    if e.status == 404 and not answered:
        return CommandError(
            f"nothing answers at {url}: is it the gpupool service's URL (…/services/gpupool/)?"
        )
    return CommandError(message, EXIT_USER, problems)


def report(e: CommandError) -> int:
    for line in e.details:
        print(line, file=sys.stderr)
    print(f"error: {e.message}", file=sys.stderr)
    return e.status


def run(args: argparse.Namespace, action: Action) -> int:
    """Connect, run ``action`` against the service, and turn any failure into an exit status."""
    import asyncio

    from ..client import GPUPoolClient, GPUPoolError

    try:
        url, token = connection(args, os.environ)
    except CommandError as e:
        return report(e)

    async def go() -> int | None:
        async with GPUPoolClient(url, token) as client:
            return await action(client, args)

    try:
        return asyncio.run(go()) or EXIT_OK
    except GPUPoolError as e:
        return report(explain(e, url))
    except CommandError as e:
        return report(e)


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
