"""The service's tables: usage samples, the ledger of server sessions, the admin change log, the
fair queue's entries and the admissions' reservations.

Times are seconds since the epoch (UTC), as floats: the same numbers the service's clock gives and
the API answers with, on SQLite and PostgreSQL alike. The schema is versioned by alembic
(:mod:`jupyter_gpupool.db.migrations`); a change to these models needs a new revision there.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Float, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class UsageSample(Base):
    """A pool's GPUs at one moment (``hourly``: the average of an hour, once samples are older
    than the service's ``history_raw_days``)."""

    __tablename__ = "usage_samples"
    __table_args__ = (Index("ix_usage_samples_pool_time", "pool", "time"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    pool: Mapped[str] = mapped_column(String(255))
    hourly: Mapped[bool] = mapped_column(Boolean, default=False)
    gpu_total: Mapped[float] = mapped_column(Float)
    gpu_used: Mapped[float] = mapped_column(Float)
    gpu_over_quota: Mapped[float] = mapped_column(Float)
    gpu_pending: Mapped[float] = mapped_column(Float)
    #: GPUs actually busy: over the pool's running servers whose utilization was measured, the
    #: sum of GPUs x utilization / 100; None when nothing was measured (or there is no source).
    gpu_busy: Mapped[float | None] = mapped_column(Float, nullable=True)


class ServerSession(Base):
    """A single-user server's time on GPUs: from its pod running to its pod gone."""

    __tablename__ = "server_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pod_uid: Mapped[str] = mapped_column(String(64), unique=True)
    namespace: Mapped[str] = mapped_column(String(255))
    pod: Mapped[str] = mapped_column(String(255))
    user: Mapped[str] = mapped_column(String(255), index=True)
    server: Mapped[str] = mapped_column(String(255))
    #: ``group:NAME`` or ``user:NAME``, the subject whose quota it counted against
    charged: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    pool: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    platform: Mapped[str | None] = mapped_column(String(255), nullable=True)
    gpu_type: Mapped[str | None] = mapped_column(String(255), nullable=True)
    gpus: Mapped[int] = mapped_column(Integer)
    #: The shape it was admitted with (``mig-1g.10gb``, ``shared-4``...); None: whole GPUs
    shape: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: What it counts per hour, GPU-equivalents as text (``1/7``); None: ``gpus`` (the
    #: sessions written before shapes were kept, all of whole GPUs)
    equivalents: Mapped[str | None] = mapped_column(String(64), nullable=True)
    over_quota: Mapped[bool] = mapped_column(Boolean)
    started: Mapped[float] = mapped_column(Float, index=True)
    #: None while it runs
    stopped: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)
    #: The last time the service saw it running: where it is closed if it ended unseen.
    last_seen: Mapped[float] = mapped_column(Float)
    #: stopped (by its user, an admin, the idle culler, or unseen while the service was away) |
    #: reclaimed | failed | over budget | culled (its GPUs stayed idle: the idle policy)
    ended: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: The last time the idle policy warned that its GPUs were idle (None: never warned)
    idle_warned: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)
    #: How many documents the user's open lab saved before a stop (None: no lab reported)
    saved: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: When the lab's report came (the service's clock)
    saved_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Their paths, a JSON list (at most the first 100)
    saved_paths: Mapped[str | None] = mapped_column(Text, nullable=True)


class ChangeRecord(Base):
    """One admin change: who changed what, when, and through what (API, page)."""

    __tablename__ = "changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    who: Mapped[str] = mapped_column(String(255))
    what: Mapped[str] = mapped_column(Text)
    via: Mapped[str] = mapped_column(String(32))


class QueueEntry(Base):
    """A request that waits (or waited) in the fair queue: kept so that the line survives a
    restart of the service (:mod:`jupyter_gpupool.service.admission.line`)."""

    __tablename__ = "queue_entries"

    #: The admission id its spawner follows
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: Its arrival number: first come, first served among equals
    seq: Mapped[int] = mapped_column(Integer)
    since: Mapped[float] = mapped_column(Float)
    user: Mapped[str] = mapped_column(String(255), index=True)
    #: JSON lists
    groups: Mapped[str] = mapped_column(Text)
    pools: Mapped[str] = mapped_column(Text)
    gpus: Mapped[int] = mapped_column(Integer)
    gpu_type: Mapped[str | None] = mapped_column(String(255), nullable=True)
    server: Mapped[str] = mapped_column(String(255))
    reclaim: Mapped[bool] = mapped_column(Boolean)
    #: queued | admitted | cancelled | expired
    state: Mapped[str] = mapped_column(String(16), index=True)
    #: When it left the line (None while it waits)
    ended: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)


class ReservationRow(Base):
    """GPUs an admission holds until its pod shows up (a
    :class:`~jupyter_gpupool.core.usage.reservations.Reservation`): kept so that what was promised
    survives a crash of the service. Written before the admission is answered."""

    __tablename__ = "reservations"

    admission_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    pool: Mapped[str] = mapped_column(String(255))
    #: The node its GPUs are held on (None: no node is held)
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    gpus: Mapped[int] = mapped_column(Integer)
    user: Mapped[str] = mapped_column(String(255))
    #: ``group:NAME`` or ``user:NAME``, the subject whose quota it counts against
    charged: Mapped[str] = mapped_column(String(255))
    over_quota: Mapped[bool] = mapped_column(Boolean)
    expires_at: Mapped[float] = mapped_column(Float, index=True)
    #: The extended resource held on ``node`` (``nvidia.com/mig-1g.10gb``...)
    resource: Mapped[str] = mapped_column(String(255), server_default="nvidia.com/gpu")
    #: What it counts against quotas, GPU-equivalents as text (``1/7``); None: ``gpus``
    equivalents: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The shape id when not whole GPUs (``mig-3g.40gb``...)
    shape: Mapped[str | None] = mapped_column(String(64), nullable=True)


class BookingRow(Base):
    """A booking made through the API: its ``kind: booking`` document as JSON text,
    and who made it and last changed it. Written before the API answers."""

    __tablename__ = "bookings"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: The booking document (``booking_to_document``), JSON
    document: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(255))
    created: Mapped[float] = mapped_column(Float)
    changed_by: Mapped[str] = mapped_column(String(255))
    changed: Mapped[float] = mapped_column(Float)
