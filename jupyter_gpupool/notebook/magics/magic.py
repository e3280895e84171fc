"""``%gpupool``: a :class:`~IPython.core.magic.Magics` subclass that routes subcommands.

Each subcommand is one method (``_status``, ``_pools``, ``_launch``, ``_queue``, ``_release``);
parsing is
:mod:`.args`, what is shown is :mod:`.render`. Service and hub calls are coroutines of
:class:`~jupyter_gpupool.notebook.session.UserSession`; a magic is synchronous, so they run in
:func:`run_sync`: directly without an event loop (plain IPython), else on a thread of their own
(a kernel's loop is busy running the cell).
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import HTML, display

from ...core.pools.placement import Placement
from ..session import SESSION_ERRORS, LaunchResult, ServerUse, UserSession, default_server_name
from . import render
from .args import Command, HelpRequested, parse_line
from .where import ask_where

T = TypeVar("T")
Event = Mapping[str, Any]
#: Seconds ``%gpupool status`` waits for the service's count of this server's GPUs.
STATUS_TIMEOUT = 10.0


def run_sync(
    make: Callable[[], Awaitable[T]],
    on_event: Callable[[Event], None] | None = None,
    events: queue.Queue[Event] | None = None,
) -> T:
    """Run the coroutine ``make()`` to its end from synchronous code and return its result.

    With a loop already running in this thread (a kernel), it runs in a thread with its own
    loop, and anything put in ``events`` meanwhile is handed to ``on_event`` here, in the
    calling thread (so a notebook's display updates go to the running cell).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        result = asyncio.run(_awaited(make))
        _drain(events, on_event)
        return result
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(_awaited(make))
        except BaseException as e:  # handed to the caller
            box["error"] = e

    worker = threading.Thread(target=target, name="gpupool-magic", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
        _drain(events, on_event)
    _drain(events, on_event)
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def _drain(events: queue.Queue[Event] | None, on_event: Callable[[Event], None] | None) -> None:
    while events is not None:
        try:
            event = events.get_nowait()
        except queue.Empty:
            return
        if on_event is not None:
            on_event(event)


def nvidia_smi_list() -> str | None:
    """``nvidia-smi -L``'s output, or None where there is no nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(nvidia-smi failed: {e})"
    return done.stdout if done.returncode == 0 else (done.stderr or done.stdout)


@magics_class
class GPUPoolMagics(Magics):
    """``%gpupool status|pools|launch|queue|release|help``."""

    def __init__(self, shell: Any = None):
        super().__init__(shell)
        #: The last server launched from here: what ``%gpupool release`` stops by default.
        self.last_launched: str | None = None
        #: A launch without ``--wait`` following its progress on the kernel's loop.
        self._background: asyncio.Task[None] | None = None

    # --- plumbing --------------------------------------------------------------------------------

    def placement(self) -> Placement:
        # read at every call: a test (or %env) may change it
        return Placement.from_environ(os.environ)

    @property
    def in_notebook(self) -> bool:
        """A kernel's frontend shows HTML; a terminal shows text."""
        return getattr(self.shell, "kernel", None) is not None

    def show(self, report: render.Report) -> None:
        if self.in_notebook:
            display(report)
        else:
            print(report.text)

    def ask(self, call: Callable[[UserSession], Awaitable[T]]) -> T:
        """Run one session call; its errors become a :class:`UsageError` with the words."""
        placement = self.placement()

        async def go() -> T:
            async with UserSession(placement) as session:
                return await call(session)

        try:
            return run_sync(go)
        except SESSION_ERRORS as e:
            raise UsageError(getattr(e, "message", None) or str(e)) from None

    # --- the magic -------------------------------------------------------------------------------

    @line_magic
    def gpupool(self, line: str) -> None:
        """GPU pools: ``%gpupool status|pools|launch|queue|release|help`` (``%gpupool help``)."""
        try:
            command = parse_line(line)
        except HelpRequested as e:
            print(e.text.rstrip())
            return
        handler = getattr(self, f"_{command.name}")
        handler(command)

    def _status(self, command: Command) -> None:
        placement = self.placement()
        use = self.server_use(placement) if placement.pool is not None and placement.gpus else None
        self.show(render.status_report(placement, nvidia_smi_list(), use, time.time()))

    def server_use(self, placement: Placement) -> ServerUse:
        """What the service says of this server's GPUs (one request, a short wait: status must
        come quickly even when the service does not answer)."""

        async def go() -> ServerUse:
            async with UserSession(placement, request_timeout=STATUS_TIMEOUT) as session:
                return await session.server_use()

        try:
            return run_sync(go)
        except SESSION_ERRORS as e:  # not configured (no service URL, no token)
            return ServerUse(error=getattr(e, "message", None) or str(e))

    def _pools(self, command: Command) -> None:
        self.show(render.pools_report(self.ask(lambda s: s.launch_options())))

    def _queue(self, command: Command) -> None:
        self.show(render.queue_report(self.ask(lambda s: s.queue()), time.time()))

    def _release(self, command: Command) -> None:
        name = command.server if command.server is not None else self.last_launched
        if name is None:
            raise UsageError("say which server to release\nusage: %gpupool release NAME")
        print(self.ask(lambda s: s.release(name)))

    def _launch(self, command: Command) -> None:
        options = command.user_options()
        name = command.server or default_server_name(command.pools, options["gpus"])
        self.last_launched = name
        if not command.wait:
            return self._launch_in_background(name, options)
        events: queue.Queue[Event] = queue.Queue()
        progress = ProgressView(name, self.in_notebook)
        placement = self.placement()

        async def go() -> tuple[LaunchResult, str]:
            async with UserSession(placement) as session:
                result = await session.launch(name, options, events.put_nowait)
                # the hub says ready; the service says where
                where = await ask_where(session, name) if result.ready else ""
                return result, where

        try:
            result, where = run_sync(go, progress.update, events)
        except SESSION_ERRORS as e:
            raise UsageError(getattr(e, "message", None) or str(e)) from None
        progress.finish(result, where)
        if not result.ready:
            raise UsageError(f"{name} did not start: {result.message}")

    def _launch_in_background(self, name: str, options: Mapping[str, Any]) -> None:
        """Start the server; in a notebook the progress bar goes on after the cell ends."""
        placement = self.placement()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            result = self.ask(lambda s: s.launch(name, options, wait=False))
            if not result.ready and result.message != "starting":
                raise UsageError(f"{name} did not start: {result.message}")
            state = "is ready" if result.ready else "is starting (the hub's home page shows it)"
            if not result.ready and options.get("queue"):
                state = (
                    "is starting; if no pool can take it now it waits in line "
                    "(%gpupool queue shows its place)"
                )
            print(f"{name} {state}")
            return
        progress = ProgressView(name, self.in_notebook)

        async def follow() -> None:
            where = ""
            async with UserSession(placement) as session:
                try:
                    result = await session.launch(name, options, progress.update)
                except SESSION_ERRORS as e:
                    result = LaunchResult(name, False, getattr(e, "message", None) or str(e))
                if result.ready:
                    where = await ask_where(session, name)
            progress.finish(result, where)

        self._background = loop.create_task(follow())


class ProgressView:
    """The hub's progress events as a bar redrawn in place (notebook) or lines (terminal)."""

    def __init__(self, server: str, html: bool):
        self.server = server
        self.html = html
        self._handle: Any = None
        self._printed = 0
        self._last: dict[str, Any] = {"progress": 0, "message": "asking JupyterHub"}
        if html:
            self._handle = display(HTML(render.progress_html(server, self._last)), display_id=True)

    def update(self, event: Event) -> None:
        same = render.progress_text(event) == render.progress_text(self._last)
        self._last = dict(event)
        if self._handle is not None:
            self._handle.update(HTML(render.progress_html(self.server, event)))
        elif not same or self._printed == 0:
            # a start waiting in line hears its place again and again: one line per change
            print(render.progress_text(event), flush=True)
            self._printed += 1

    def finish(self, result: LaunchResult, where: str = "") -> None:
        """The last redraw; ``where`` (:func:`.where.where_words`) replaces the hub's "ready"
        message, which does not say where the server went."""
        event = {
            "progress": 100 if result.ready else self._last.get("progress", 0),
            "message": f"ready {where}" if result.ready and where else result.message,
            "ready": result.ready,
            "failed": not result.ready,
            "url": result.url,
        }
        if self._handle is not None:
            self._handle.update(HTML(render.progress_html(self.server, event)))
        elif result.ready:
            at = f" at {result.url}" if result.url else ""
            print(f"{self.server} is ready{at}" + (f" {where}" if where else ""))
