"""The process table as the tests see it, read from /proc directly: what the demo says about its
children is checked against the kernel, not against the demo's own bookkeeping."""

from __future__ import annotations

import os
from pathlib import Path

from needs import need

need(Path("/proc/self/stat").exists(), "/proc (Linux) to check which processes are left")


def _stat(pid: int) -> list[str] | None:
    """The fields after ``(comm)`` in /proc/PID/stat: state, ppid, …"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(int(stat.parent.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (a zombie has finished, and only
    waits for a parent, perhaps a PID 1 that never reaps, to collect its status)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def mentioning(text: str) -> list[int]:
    """Running processes (other than this one) whose command line, working directory or
    environment holds ``text``: what a test's temporary directory finds, however they were
    started and whoever their parent is now."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid == os.getpid() or not alive(pid):
            continue
        try:
            seen = [(proc / "cmdline").read_bytes(), (proc / "environ").read_bytes()]
            seen.append(os.readlink(proc / "cwd").encode())
        except OSError:
            continue
        if any(text.encode() in part for part in seen):
            found.append(pid)
    return found
