"""What the service keeps over time: the database's settings and the usage history's.

The database's URL, and how often, how finely and how long usage history is kept (in the database
and in memory).
"""

from __future__ import annotations

from typing import Any

from traitlets import Float, HasTraits, Unicode, validate

from .checks import more_than_zero


class DatabaseSettings(HasTraits):
    """What the service keeps over time, and where."""

    history_interval = Float(
        60.0,
        help="""How often, in seconds, the GPUs per pool (total, in use, over quota, pending)
        are sampled into the database (``db_url``) for the usage history, and the running
        servers' sessions are marked as seen.

        The pools page's chart also keeps the last ``history_hours`` in memory, for when the
        database is down.

        Example::

            c.GPUPoolService.history_interval = 30
        """,
    ).tag(config=True)

    history_hours = Float(
        6.0,
        help="""How many hours of usage samples the service also keeps in memory, for the
        pools page's chart when the database (``db_url``) is missing or down.

        With a database the chart reads its ranges (6h to 30d) from it. Memory grows with
        pools x hours / interval: 50 pools over 6 hours sampled every minute is 18,000
        samples, a few MB.

        Example::

            c.GPUPoolService.history_hours = 24
        """,
    ).tag(config=True)

    db_url = Unicode(
        "sqlite:///gpupool.sqlite",
        help="""The database that keeps usage history, the ledger of server sessions (GPU-hours)
        and the change log: an SQLAlchemy URL.

        The default is an SQLite file in the service's working directory; on a cluster use
        PostgreSQL (``pip install jupyter_gpupool[postgresql]``), e.g.
        ``postgresql+psycopg://gpupool:PASSWORD@postgres:5432/gpupool``. The schema is
        upgraded when the service starts (and logged); a database written by a newer gpupool
        is refused. A database that cannot be reached at start is logged and tried again
        (``db_check_interval``): the service starts, but admits nothing (503) until it has
        read back what it promised before (reservations, places in line, bookings), then
        admits again with no restart. An empty value keeps nothing, and admissions are then
        answered at once but forgotten by a crash.

        With a database, an admission's reservation (201) and a queued request's place (202)
        are committed before the answer (``durable_timeout``), so a crash of the service
        forgets nothing it promised.

        Example::

            c.GPUPoolService.db_url = "postgresql+psycopg://gpupool@db:5432/gpupool"
        """,
    ).tag(config=True)

    db_check_interval = Float(
        10.0,
        help="""How often, in seconds, the service checks that its database (``db_url``)
        answers, and the longest it waits before trying again one that does not.

        A database that does not answer when the service starts (or stops answering later)
        is tried again after 0.5 s, then twice as long each time (with jitter) up to this;
        the ``records.database`` loop in ``GET api/v1/health`` shows the tries, and the
        health report says the database is not answering until it does. Until a database
        that did not answer at start has been read back, nothing is admitted (503).

        Example::

            c.GPUPoolService.db_check_interval = 30
        """,
    ).tag(config=True)

    durable_timeout = Float(
        5.0,
        help="""How long, in seconds, an admission waits for its reservation (or its place in
        line) to be committed to the database (``db_url``) before it is answered.

        Nothing is promised before it is durable: an admission whose write fails, or does not
        commit within this time, is dropped and answered 503 ("could not be recorded... try
        again"), so that a crash of the service never forgets GPUs it promised. Concurrent
        admissions share one commit; a healthy database commits in milliseconds. Without a
        database (``db_url = ""``) admissions are answered at once and are not durable.

        Example::

            c.GPUPoolService.durable_timeout = 2
        """,
    ).tag(config=True)

    history_raw_days = Float(
        7.0,
        help="""Usage samples older than this many days are averaged by the hour.

        Example::

            c.GPUPoolService.history_raw_days = 14
        """,
    ).tag(config=True)

    history_days = Float(
        90.0,
        help="""How many days of usage samples, server sessions and changes the database keeps.

        The wait estimates of requests in line read the sessions that ended within these days
        ("about 20 min, from the last 90 days of training-pool").

        Example::

            c.GPUPoolService.history_days = 365
        """,
    ).tag(config=True)

    @validate(
        "history_interval",
        "history_hours",
        "history_raw_days",
        "history_days",
        "durable_timeout",
        "db_check_interval",
    )
    def _positive_history(self, proposal: Any) -> float:
        return more_than_zero(proposal)
