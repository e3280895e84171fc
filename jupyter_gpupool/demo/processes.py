"""The processes the demo started, and stopping them: SIGTERM, a grace period, then SIGKILL.

JupyterHub starts its proxy and its services in sessions of their own, so killing the hub's
process group does not reach them, and once the hub is gone they are no longer its descendants.
The demo therefore notes the whole tree below the hub *before* it signals anything, and checks
each of those processes by pid and start time (a pid alone may be reused by then).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    #: When it started, in the table's own unit: with the pid, it names one process for good.
    started: str
    argv: tuple[str, ...] = field(default=(), compare=False)

    def describe(self) -> str:
        """A short human name: ``JupyterHub``, ``jupyter_gpupool.service``, ``stuck.py``…"""
        if not self.argv:
            return "a child"
        prog = os.path.basename(self.argv[0])
        rest = self.argv[1:]
        if prog.startswith("python") and rest:
            if rest[0] == "-m" and len(rest) > 1:
                return _KNOWN.get(rest[1], rest[1])
            if not rest[0].startswith("-"):
                return os.path.basename(rest[0])
        return _KNOWN.get(prog, prog)


_KNOWN = {
    "jupyterhub": "JupyterHub",
    "jupyter_gpupool.service": "the gpupool service",
    "jupyter_gpupool.demo.proxy": "the proxy",
    "configurable-http-proxy": "the proxy",
}


def process_table() -> dict[int, Proc]:
    """Every process that is not a zombie, by pid (``/proc``, else ``ps``); the command lines
    only from ``ps`` (:func:`descendants` adds them to what it returns)."""
    if _PROC.is_dir():
        table = {}
        for entry in _PROC.iterdir():
            if entry.name.isdigit() and (p := _from_proc(int(entry.name), argv=False)):
                table[p.pid] = p
        return table
    return _from_ps()


def _from_proc(pid: int, argv: bool = True) -> Proc | None:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        cmdline = (_PROC / str(pid) / "cmdline").read_bytes() if argv else b""
    except OSError:
        return None
    # "pid (comm) state ppid ... starttime(22nd) ...": comm may hold spaces and parentheses
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    args = tuple(cmdline.decode(errors="replace").split("\0")[:-1])
    return Proc(pid, int(fields[1]), fields[19], args)


def _from_ps(pid: int | None = None) -> dict[int, Proc]:
    cmd = ["ps", "-o", "pid=,ppid=,stat=,lstart=,command="]
    cmd += ["-p", str(pid)] if pid is not None else ["-A"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    table = {}
    for line in out.splitlines():
        parts = line.split(None, 8)  # pid ppid stat, lstart's five words, the command
        if len(parts) < 8 or parts[2].startswith("Z"):
            continue
        argv = tuple(parts[8].split()) if len(parts) > 8 else ()  # spaces in args: lost
        p = Proc(int(parts[0]), int(parts[1]), " ".join(parts[3:8]), argv)
        table[p.pid] = p
    return table


def process(pid: int) -> Proc | None:
    """The process ``pid`` if it runs (a zombie has finished: it only awaits its parent)."""
    if _PROC.is_dir():
        return _from_proc(pid)
    return _from_ps(pid).get(pid)


def descendants(pid: int, table: dict[int, Proc] | None = None) -> list[Proc]:
    """Every process below ``pid``, parents before their children, with their command lines."""
    table = process_table() if table is None else table
    children: dict[int, list[Proc]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p)
    out: list[Proc] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            full = child if child.argv else process(child.pid)
            if full is not None and full.started == child.started:
                out.append(full)
            todo.append(child.pid)
    return out


def running(p: Proc) -> bool:
    """Whether ``p`` still runs: same pid, same start time, not a zombie."""
    now = process(p.pid)
    return now is not None and now.started == p.started


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Stopping:
    """Processes asked to stop, and since when, so that a kill can say how long they ignored it.

    ``term`` sends SIGTERM; the caller waits (:meth:`wait` or :meth:`wait_async`, so the event
    loop keeps serving whatever the stopping processes still ask of it); ``kill`` then sends
    SIGKILL to the ones still running and says so through ``say`` (stderr by default).
    """

    def __init__(self, who: str, say: Callable[[str], None] = _say):
        self.who = who  # who speaks: "gpupool demo"
        self.say = say
        self.since: dict[Proc, float] = {}

    def term(self, procs: Iterable[Proc]) -> None:
        for p in procs:
            if running(p):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p.pid, signal.SIGTERM)
                self.since.setdefault(p, time.monotonic())

    @staticmethod
    def left(procs: Iterable[Proc]) -> list[Proc]:
        return [p for p in procs if running(p)]

    def overdue(self, procs: Iterable[Proc], grace: float) -> list[Proc]:
        """Those of ``procs`` that were asked to stop at least ``grace`` s ago (a process
        adopted late has its own grace still to come)."""
        now = time.monotonic()
        return [p for p in procs if now - self.since.get(p, now) >= grace]

    def adopt(self, root: Proc, members: list[Proc]) -> list[Proc]:
        """SIGTERM what appeared below ``root`` since ``members`` were noted, and add it to them
        (a hub that is still alive restarts a proxy that exits, for one); the newcomers."""
        if not running(root):
            return []
        known = {(p.pid, p.started) for p in members}
        new = [p for p in descendants(root.pid) if (p.pid, p.started) not in known]
        members.extend(new)
        self.term(new)
        return new

    def wait(self, procs: Sequence[Proc], timeout: float) -> list[Proc]:
        """Wait up to ``timeout`` s for ``procs`` to finish; those still running."""
        deadline = time.monotonic() + timeout
        while True:
            # no event says that a process which is not our child has exited: poll
            left = self.left(procs)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)

    async def wait_async(self, procs: Sequence[Proc], timeout: float) -> list[Proc]:
        """:meth:`wait` that lets the event loop run meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.left(procs)
            if not left or time.monotonic() >= deadline:
                return left
            await asyncio.sleep(0.05)

    def kill(self, procs: Iterable[Proc]) -> list[Proc]:
        """SIGKILL the ones of ``procs`` still running, and say which; those killed."""
        killed = []
        for p in self.left(procs):
            since = self.since.get(p)
            try:
                os.kill(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            killed.append(p)
            what = (
                f"ignored SIGTERM for {time.monotonic() - since:.1f}s"
                if since is not None
                else "was still running"
            )
            self.say(
                f"{self.who}: {p.describe()} (pid {p.pid}) {what}; killed it with SIGKILL "
                f"[{' '.join(p.argv)[:200]}]"
            )
        # SIGKILL cannot be ignored, but the kernel takes a moment to finish the process off
        self.wait(killed, 5)
        return killed
