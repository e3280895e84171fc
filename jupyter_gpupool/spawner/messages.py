"""What the user reads on the progress page and in errors, from admission answers (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _gpus(n: int, gpu_type: str | None = None) -> str:
    kind = f" {gpu_type}" if gpu_type else ""
    return f"{n}{kind} GPU" if n == 1 else f"{n}{kind} GPUs"


def skipped_lines(skipped: Sequence[Mapping[str, Any]]) -> list[str]:
    """``skipped POOL because REASON`` for each pool the service passed over."""
    return [f"skipped {s.get('pool')} because {s.get('reason')}" for s in skipped]


def admitted_lines(admission: Mapping[str, Any]) -> list[str]:
    """Progress lines for an admission: pools skipped, servers reclaimed, the admission."""
    lines = skipped_lines(admission.get("skipped") or [])
    reclaimed = admission.get("reclaimed") or []
    if reclaimed:
        names = ", ".join(f"{r.get('user')}/{r.get('server') or ''}".rstrip("/") for r in reclaimed)
        lines.append(f"stopped {len(reclaimed)} server(s) borrowing your guaranteed GPUs: {names}")
    pool = admission.get("pool")
    n = int(admission.get("gpus") or 0)
    what = _gpus(n, admission.get("gpu_type")) if n else "no GPU (CPU only)"
    if admission.get("over_quota"):
        lines.append(
            f"admitted to {pool} over quota ({what}): this server borrows idle GPUs and may be "
            "stopped (reclaimed) when their owners need them back"
        )
    else:
        lines.append(f"admitted to {pool} within quota ({what})")
    return lines


def scheduled_line(node: str, admission: Mapping[str, Any]) -> str:
    n = int(admission.get("gpus") or 0)
    kind = admission.get("gpu_type") if n else None
    return f"scheduled on node {node} ({kind or ('CPU only' if not n else 'GPU')})"


def fallback_line(pool: str, next_pool: str, words: str) -> str:
    """``falling back from X to Y because "0/3 nodes are available: ..."``."""
    because = f' because "{words}"' if words else " because it could not be scheduled"
    if next_pool == pool:
        return f"trying {pool} again{because}"
    return f"falling back from {pool} to {next_pool}{because}"


def no_pool_message(message: str, skipped: Sequence[Mapping[str, Any]]) -> str:
    """A refused admission (409) as one paragraph: why each pool could not take it."""
    reasons = "; ".join(f"{s.get('pool')}: {s.get('reason')}" for s in skipped)
    return f"No pool can take your server now. {reasons or message}"


def unschedulable_message(seconds: float, refusals: Sequence[str]) -> str:
    """The start gave up: the scheduler refused the pod in every pool it was admitted to."""
    tried = "; ".join(refusals) or "the scheduler never placed it"
    return f"No pool could schedule your server within {seconds:g} seconds. {tried}"


def unavailable_message(error: str) -> str:
    """The service could not be asked (and ``fail_open`` is off)."""
    return (
        f"The GPU pool service is not answering ({error}), so no server can be placed in a GPU "
        "pool right now. Try again in a minute; if it persists, tell your admin."
    )
