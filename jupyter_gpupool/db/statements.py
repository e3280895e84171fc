"""The tables and statements of the durable writes, as the writer batches them
(:class:`~.writer.Row`: a batch's rows of one table are one DELETE and one INSERT;
:class:`~.writer.Many`: a batch's uses of one statement are one executemany).
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, bindparam, delete, update

from .models import BookingRow, QueueEntry, ReservationRow, ServerSession

RESERVATIONS = cast(Table, ReservationRow.__table__)
QUEUE_ENTRIES = cast(Table, QueueEntry.__table__)
BOOKINGS = cast(Table, BookingRow.__table__)
SESSIONS = cast(Table, ServerSession.__table__)

#: A booking deleted (``b_name``)
DROP_BOOKING = delete(BOOKINGS).where(BOOKINGS.c.name == bindparam("b_name"))

#: What a lab saved before a stop, on the session of ``s_uid`` (``s_saved``, ``s_at``,
#: ``s_paths``)
SAVED = (
    update(SESSIONS)
    .where(SESSIONS.c.pod_uid == bindparam("s_uid"))
    .values(
        saved=bindparam("s_saved"), saved_at=bindparam("s_at"), saved_paths=bindparam("s_paths")
    )
)

#: How the open session of ``s_uid`` is to end (``s_ended``), before its server is stopped
STOPPING = (
    update(SESSIONS)
    .where(SESSIONS.c.pod_uid == bindparam("s_uid"), SESSIONS.c.stopped.is_(None))
    .values(ended=bindparam("s_ended"))
)
