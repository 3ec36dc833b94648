"""The runs domain's own tables: a run's tags and its update events (``run_updates``). The run
itself, its segments and events are the run record's (``record.models``): every domain reads them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base, BigId


class RunTag(Base):
    """One tag of a run: from ``init(tags=[...])``, or given by its project later (PATCH /runs/{id},
    ``runcast runs tag``). The runs page filters by it."""

    __tablename__ = "run_tags"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)


class RunUpdate(Base):
    """An ``update`` event (config, summary, metric declarations), stored once per (segment, seq).

    The run's ``config``, ``summary`` and ``metric_defs`` are these folded in trainer order
    (ts, segment index, seq) over the first run_started's config, so batches may arrive in
    any order.
    """

    __tablename__ = "run_updates"
    __table_args__ = (UniqueConstraint("segment_id", "seq", name="uq_run_updates_segment_seq"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    segment_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("segments.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    ts: Mapped[float] = mapped_column(Float)
    body: Mapped[dict[str, Any]] = mapped_column()
