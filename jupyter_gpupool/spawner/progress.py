"""Progress messages: gpupool's own steps interleaved with KubeSpawner's pod events.

The start loop appends to a :class:`ProgressLog` (admitted, skipped, scheduled, falling
back...); ``progress()`` yields those as they come, merged with what KubeSpawner's own
``progress()`` yields (the pod's Kubernetes events), until the start is over.

JupyterHub's progress page shows only the latest event's message above the bar (every event
also goes to the collapsed event log), and a start's last events are the pod's ("Started
container notebook"). So once a pool is decided, every later step carries the decision
(:func:`with_decision`): the page shows it with the latest step, the log lists each step once.
While a start waits in line, its place is shown the same way: each new place the service
reports is one step (a new line when it changes, none while it stays), and KubeSpawner's own
messages meanwhile (its "please be patient" after ``slow_spawn_message_threshold``) carry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from .messages import Decision, InLine

#: What later steps are shown with: the pool decision, or the place in line while waiting.
Standing = Decision | InLine

#: How often new messages of our own are looked for while KubeSpawner's generator sleeps.
POLL_SECONDS = 0.1


#: The class of the decision repeated in each step's ``html_message``.
REPEAT_CLASS = "gpupool-decision-again"
#: Sent once with the decision: JupyterHub's page appends every ``html_message`` to its event log
#: (``#progress-log``), where the repeated decision would fill every line. A page without that
#: log (another template) shows the decision with each step, which is still right.
LOG_STYLE = f"<style>#progress-log .{REPEAT_CLASS} {{ display: none; }}</style>"


def with_decision(event: dict[str, Any], decision: Standing | None) -> dict[str, Any]:
    """``event`` with the pool decision (or the place in line): before its plain ``message`` in
    short, and in full above it in ``html_message`` (the page shows that instead of
    ``message``)."""
    if decision is None or not event.get("message"):
        return event
    step = str(event["message"])
    step_html = event.get("html_message") or html.escape(step)
    return {
        **event,
        "message": f"{decision.tag} \u00b7 {step}",
        "html_message": (
            f'<span class="{REPEAT_CLASS}">{html.escape(decision.summary)}<br></span>{step_html}'
        ),
    }


class ProgressLog:
    """The messages of one start, in order (several progress pages may read them), and the
    pool decision in force (or the place in line while the start waits), which later steps are
    shown with."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.decision: Standing | None = None

    def add(self, message: str, **extra: Any) -> None:
        self.events.append(with_decision({"message": message, **extra}, self.decision))

    def decide(self, decision: Standing | None, lines: Sequence[str] = ()) -> None:
        """Add the lines that tell a decision (the last carries :data:`LOG_STYLE`), then show
        every later step with it; ``None``: the decision no longer holds (the pool is left)."""
        self.decision = None
        for i, line in enumerate(lines):
            last = i == len(lines) - 1
            self.add(line, **({"html_message": html.escape(line) + LOG_STYLE} if last else {}))
        self.decision = decision

    @property
    def messages(self) -> list[str]:
        return [e["message"] for e in self.events]


async def merge_progress(
    log: ProgressLog,
    other: AsyncIterator[dict[str, Any]],
    done: Callable[[], bool],
    poll: float = POLL_SECONDS,
) -> AsyncIterator[dict[str, Any]]:
    """Yield ``log``'s events as they are added and ``other``'s as they come (``log``'s added
    before one of ``other``'s arrives go first), until ``other`` is exhausted and ``done()``;
    then whatever ``log`` still holds."""
    sent = 0
    pending: asyncio.Future[dict[str, Any]] | None = asyncio.ensure_future(anext(other))
    try:
        while True:
            while sent < len(log.events):
                yield log.events[sent]
                sent += 1
            if pending is None:
                if done():
                    break
                await asyncio.sleep(poll)
                continue
            finished, _ = await asyncio.wait({pending}, timeout=poll)
            if pending in finished:
                try:
                    item = pending.result()
                except StopAsyncIteration:
                    pending = None
                    continue
                # our steps recorded meanwhile first: they happened before this event reached us
                # (a pod event carrying a decision comes after the lines telling it)
                while sent < len(log.events):
                    yield log.events[sent]
                    sent += 1
                yield item
                pending = asyncio.ensure_future(anext(other))
        while sent < len(log.events):
            yield log.events[sent]
            sent += 1
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
