"""The ingest inbox table (migration 0006): every accepted batch, committed before 202."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base, BigId

# The rows still on their way, written as the partial index's condition so that SQLite, which
# matches the text of a query's terms against it, uses the index.
WAITING = text("state IN ('pending', 'stored')")


class InboxRow(Base):
    """One accepted batch and where it is on its way to storage.

    ``state``: ``pending`` (committed by the API, not stored yet), ``stored`` (its points
    and events are committed; the detectors have not run), ``done`` (``body`` cleared;
    the row is deleted once ``next_sweep_at`` passes) or ``quarantined`` (a failure that
    no retry fixes: ``error`` says which, ``bad_events`` lists the events that could not
    be stored; the others were stored). ``next_sweep_at``: when the sweeper looks at the
    row again (re-enqueue a pending or stored row; delete a done one). ``project_id`` is
    NULL only for a legacy broker message whose token matched no project. ``run_id``
    (migration 0026): the run of a batch of one run, by which the detectors take a run's
    batches in acceptance order (``inbox.process``).
    """

    __tablename__ = "ingest_inbox"
    __table_args__ = (
        Index("ix_ingest_inbox_state_sweep", "state", "next_sweep_at"),
        Index("ix_ingest_inbox_run_waiting", "run_id", "id", postgresql_where=WAITING, sqlite_where=WAITING),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    run_id: Mapped[str | None] = mapped_column(String(64))  # the batch's run; NULL: several runs, or none
    state: Mapped[str] = mapped_column(String(16))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)  # the batch as received ({"v", "events"})
    events: Mapped[int] = mapped_column(Integer)
    received_at: Mapped[float] = mapped_column(Float)
    next_sweep_at: Mapped[float | None] = mapped_column(Float)
    sweeps: Mapped[int] = mapped_column(Integer, default=0)  # times the sweeper re-enqueued it
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # times a worker started storing it
    done_at: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)  # why it is quarantined
    bad_events: Mapped[list[Any] | None] = mapped_column(JSON)  # [{"index", "error"}] of a quarantined batch
    detector_error: Mapped[str | None] = mapped_column(Text)  # a detector failure (the data is stored)
