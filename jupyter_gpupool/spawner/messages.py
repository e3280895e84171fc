"""What the user reads on the progress page and in errors, from admission answers (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.admission.queue import waiting_words
from ..core.words.shape_choice import WHOLE


def _gpus(n: int, gpu_type: str | None = None) -> str:
    kind = f" {gpu_type}" if gpu_type else ""
    return f"{n}{kind} GPU" if n == 1 else f"{n}{kind} GPUs"


def shape_words(admission: Mapping[str, Any]) -> str | None:
    """``MIG 1g.10gb of an A100-80G`` for an admission of a shape other than whole GPUs (the
    service's ``shape_text``); ``None`` for whole GPUs, a CPU-only server, or an answer without
    shapes."""
    shape = admission.get("shape")
    text = admission.get("shape_text")
    if not shape or shape == WHOLE or not text or not int(admission.get("gpus") or 0):
        return None
    return str(text)


def admitted_choice(admission: Mapping[str, Any]) -> tuple[str, str | None]:
    """The ``(pool, shape)`` entry an admission took (``shape`` ``None`` for whole GPUs)."""
    shape = admission.get("shape")
    return str(admission["pool"]), None if not shape or shape == WHOLE else str(shape)


def skipped_lines(skipped: Sequence[Mapping[str, Any]]) -> list[str]:
    """``skipped POOL because REASON`` for each pool the service passed over."""
    return [f"skipped {s.get('pool')} because {s.get('reason')}" for s in skipped]


def admitted_line(admission: Mapping[str, Any]) -> str:
    """``admitted to POOL within quota (2 A100-80G GPUs)``, or over quota with what that means;
    for a shape, ``admitted MIG 1g.10gb of an A100-80G in POOL within quota``."""
    pool = admission.get("pool")
    n = int(admission.get("gpus") or 0)
    shaped = shape_words(admission)
    what = _gpus(n, admission.get("gpu_type")) if n else "no GPU (CPU only)"
    where = f"{shaped} in {pool}" if shaped else f"to {pool}"
    what = "" if shaped else f" ({what})"
    if admission.get("over_quota"):
        return (
            f"admitted {where} over quota{what}: this server borrows idle GPUs and may be "
            "stopped (reclaimed) when their owners need them back"
        )
    return f"admitted {where} within quota{what}"


def reclaimed_lines(admission: Mapping[str, Any]) -> list[str]:
    reclaimed = admission.get("reclaimed") or []
    if not reclaimed:
        return []
    names = ", ".join(f"{r.get('user')}/{r.get('server') or ''}".rstrip("/") for r in reclaimed)
    return [f"stopped {len(reclaimed)} server(s) borrowing your guaranteed GPUs: {names}"]


def admitted_lines(admission: Mapping[str, Any]) -> list[str]:
    """Progress lines for an admission: pools skipped, servers reclaimed, the admission."""
    skipped = skipped_lines(admission.get("skipped") or [])
    return [*skipped, *reclaimed_lines(admission), admitted_line(admission)]


def unplaced_line(pool: str, words: str) -> str:
    """A pool the start left because the scheduler kept refusing the pod there."""
    return f'{pool} could not schedule it ("{words}")' if words else f"{pool} could not schedule it"


@dataclass(frozen=True)
class Decision:
    """The pool decision of a start, as the progress page shows it with every later step.

    ``admitted``: where and whether within quota; ``others``: why not the pools before it (and
    servers reclaimed for it); ``tag``: the short form put before each step's plain message.
    """

    admitted: str
    others: tuple[str, ...]
    tag: str

    @property
    def summary(self) -> str:
        """The whole decision in one line, starting with a capital."""
        return _capital("; ".join([self.admitted, *self.others]))

    @classmethod
    def of(cls, admission: Mapping[str, Any], unplaced: Sequence[str] = ()) -> Decision:
        """From an admission, and the pools the scheduler refused earlier in this start
        (:func:`unplaced_line`)."""
        others = (
            *skipped_lines(admission.get("skipped") or []),
            *unplaced,
            *reclaimed_lines(admission),
        )
        pool = admission.get("pool")
        quota = "over quota: may be reclaimed" if admission.get("over_quota") else "within quota"
        shaped = shape_words(admission)
        where = f"{shaped} in {pool}" if shaped else pool
        return cls(admitted=admitted_line(admission), others=others, tag=f"{where}, {quota}")


@dataclass(frozen=True)
class InLine:
    """A start waiting in line, as the progress page shows it with every later step (the pod
    events KubeSpawner reports meanwhile, e.g. its "please be patient" message): the service's
    ``message`` (``waiting for 4 GPUs: position 2 in line for training-pool, inference-pool``)."""

    message: str
    position: int | None = None
    others: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        return _capital(self.message)

    @property
    def tag(self) -> str:
        return f"in line, position {self.position}" if self.position else "in line"

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> InLine:
        """From the service's answer for a queued request."""
        raw = row.get("position")
        position = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        pools = [str(p) for p in row.get("pools") or ()]
        words = row.get("message") or waiting_words(int(row.get("gpus") or 0), position, pools)
        return cls(message=str(words), position=position)


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f} s"


def turn_line(waited: float) -> str:
    """A queued start's turn came: the admission follows."""
    return f"your turn came after {_seconds(waited)} in line"


def line_lost_line() -> str:
    """The service no longer knows a queued request (it lost it, e.g. in a restart)."""
    return "the GPU pool service lost this server's place in line; asking again"


def waiting_unavailable_line(error: str) -> str:
    """The service stopped answering while a start waits in line (it keeps asking)."""
    return f"the GPU pool service is not answering ({error}); still waiting in line"


def left_line_message(state: str, message: str) -> str:
    """A queued request left the line without being admitted (an admin cancelled it, or the
    service dropped it)."""
    why = message if message and message != state else state
    return f"Your server stopped waiting in line for GPUs: {why}. Start it again to wait anew."


def queue_timeout_message(seconds: float, waited: float, row: Mapping[str, Any]) -> str:
    """The start gave up at ``start_timeout`` while waiting in line: how long, where it stood
    last, and why no pool could take it (the service's last reasons, one per pool)."""
    pools = ", ".join(str(p) for p in row.get("pools") or ())
    where = f" for {pools}" if pools else ""
    position = row.get("position")
    last = f" (last at position {position})" if position else ""
    reasons = "; ".join(r for r in str(row.get("reasons") or "").splitlines() if r.strip())
    because = f" {reasons}" if reasons else ""
    return (
        f"No pool could take your server within {seconds:g} seconds: it waited "
        f"{_seconds(waited)} in line{where}{last}.{because}"
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def ready_words(placement: Mapping[str, Any]) -> str:
    """Where a started server runs, for the "Server ready" message: ``in training-pool within
    quota (4 A100-80G GPUs on node gpu-node-1)``, over quota with what that means."""
    n = int(placement.get("gpus") or 0)
    what = shape_words(placement) or (_gpus(n, placement.get("gpu_type")) if n else "CPU only")
    node = f" on node {placement['node']}" if placement.get("node") else ""
    pool = placement.get("pool")
    if placement.get("over_quota"):
        return (
            f"in {pool} over quota ({what}{node}): it borrows idle GPUs and may be stopped "
            "(reclaimed) when their owners need them back"
        )
    return f"in {pool} within quota ({what}{node})"


def scheduled_line(node: str, admission: Mapping[str, Any]) -> str:
    n = int(admission.get("gpus") or 0)
    kind = shape_words(admission) or (admission.get("gpu_type") if n else None)
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


def line_full_message(message: str, body: Mapping[str, Any]) -> str:
    """The service would not put the start in line: the user already waits with as many
    requests as one user may (its 429 names the cap and those requests' servers)."""
    cap = body.get("max_queued_per_user")
    places = [p for p in body.get("places") or () if isinstance(p, Mapping)]
    if not isinstance(cap, int) or not places:
        return f"No pool can take your server now, and it cannot wait in line: {message}"
    names = ", ".join(
        f"{p.get('server')}" if p.get("server") else "your default server" for p in places
    )
    return (
        f"No pool can take your server now, and it cannot wait in line: you already wait "
        f"for GPUs with {len(places)} server{'s' if len(places) != 1 else ''} ({names}), the "
        f"most one user may ({cap}). Start it again once one of them has started, or stop "
        "one of them."
    )


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
