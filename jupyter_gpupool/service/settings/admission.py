"""How admissions hold and take back GPUs, and how requests wait in line: their settings.

How long an admission holds its GPUs, how long a reclaim waits, the largest request, and how long
a request stays in line without its spawner asking for it.
"""

from __future__ import annotations

from typing import Any

from traitlets import Float, HasTraits, Integer, TraitError, validate

from .checks import more_than_zero


class AdmissionSettings(HasTraits):
    """How admissions hold GPUs, reclaim them and wait in line."""

    reservation_ttl = Float(
        120.0,
        help="""How long, in seconds, an admission holds its GPUs while its pod has not appeared.

        The spawner creates the pod right after the admission, so its pod normally shows up
        within a second; the reservation is then dropped and the pod itself counts. A spawn
        that dies before creating its pod gives the GPUs back after this long (or at once if
        it releases the admission).

        Example::

            c.GPUPoolService.reservation_ttl = 60
        """,
    ).tag(config=True)

    reclaim_wait = Float(
        30.0,
        help="""How long, in seconds, an admission that reclaims GPUs waits for the stopped
        servers to free them before it answers.

        Reclaim happens when a user asks for GPUs within their guaranteed quota and only
        over-quota (borrowing) servers stand in the way: the service stops those servers
        through the hub API and, once their pods are gone, admits the request. If they are
        not gone in time the answer is 409 and says to try again.

        Example::

            c.GPUPoolService.reclaim_wait = 60
        """,
    ).tag(config=True)

    max_gpus = Integer(
        1024,
        help="""The largest GPU count one admission request may ask for; more is refused as
        invalid (400) before any pool is looked at.

        Pools can set tighter limits (``limits.max-gpus``); this only guards against nonsense.

        Example::

            c.GPUPoolService.max_gpus = 64
        """,
    ).tag(config=True)

    queue_heartbeat = Float(
        60.0,
        help="""Seconds a request waiting in line (``"queue": true``) stays in line without its
        spawner asking for it (``GET api/v1/admissions/{id}``). The spawner keeps a question
        open while it waits (``?wait=20``: the service answers it when the place changes or the
        turn comes, and the spawner asks again), and a question held open counts as asking; a
        request nobody asks for has lost its spawn (JupyterHub restarted, the user went away)
        and is dropped, never admitted. After a restart of the
        service, the entries kept in its database wait this long for their spawners to ask
        again, and are not admitted before they do.

        Example::

            c.GPUPoolService.queue_heartbeat = 120
        """,
    ).tag(config=True)

    queue_place_interval = Float(
        1.0,
        help="""Seconds between two answers about a waiting request's new place in line alone.

        The hub asks for all its waiting spawns at once (``POST api/v1/admissions/wait``), and
        the service answers as soon as one of them changes. When the first request in line is
        admitted, every place behind it moves up one: with hundreds of requests in line and
        the line moving several times a second, re-answering each of them at every move would
        keep the service busy with news of places. A new place is answered at most once per
        request in this interval (it comes a little later, never lost); a change of state (the
        turn comes, back in line, cancelled) is always answered at once. 0 answers every move.

        Example::

            c.GPUPoolService.queue_place_interval = 0.5
        """,
    ).tag(config=True)

    max_queued_per_user = Integer(
        4,
        help="""The most requests one user may have waiting in line (``"queue": true``) at once.

        A further request of that user that no pool can take now is refused with ``429``,
        whose message names this cap and the user's requests in line (``places``: their ids,
        servers, pools and GPU counts); the spawner says so on the progress page. A request
        that a pool can take now is admitted as always: the cap counts only places in line.
        An admission from the line whose server never started (its reservation expired
        unused) goes back to the end of the line, unless its user holds this many places
        again by then: then it leaves the line. Without a cap, one user could hold a thousand
        places and, with spawns that never make their pods, keep everyone behind them waiting.
        Entries taken up after a restart are kept even above a cap lowered meanwhile.
        0 means no cap (not recommended).

        Example::

            c.GPUPoolService.max_queued_per_user = 2
        """,
    ).tag(config=True)

    booking_warning = Float(
        600.0,
        help="""Seconds before a booking's window starts that the servers borrowing its GPUs
        are warned (a ``booking`` notice in ``GET api/v1/servers``, on My GPUs, in
        ``%gpupool status`` and the JupyterLab status item). At the start they are stopped
        through the hub, newest first, as many as the booking needs. The servers admitted
        within a booking are told as long before its end that they borrow from then on.

        Example::

            c.GPUPoolService.booking_warning = 300
        """,
    ).tag(config=True)

    @validate("reservation_ttl", "reclaim_wait", "booking_warning")
    def _positive_seconds(self, proposal: Any) -> float:
        return more_than_zero(proposal, " seconds")

    @validate("max_queued_per_user")
    def _cap(self, proposal: Any) -> int:
        value = int(proposal["value"])
        if value < 0:
            raise TraitError(
                f"max_queued_per_user must be 0 (no cap) or more, not {value}: "
                "how many requests one user may have waiting in line at once"
            )
        return value

    @validate("queue_place_interval")
    def _place_interval(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not value >= 0:
            raise TraitError(
                f"queue_place_interval must be 0 or more seconds, not {proposal['value']!r}: "
                "how often a waiting request's new place in line is told"
            )
        return value

    @validate("queue_heartbeat")
    def _positive_heartbeat(self, proposal: Any) -> float:
        return more_than_zero(proposal)
