"""The ``commands`` table (migration 0022)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base

STATES = ("pending", "delivered", "acknowledged", "expired")
OPEN = ("pending", "delivered")


class Command(Base):
    """One command to a run's trainer: what was asked, by whom and why, and what became of it.

    ``uid`` (``cmd_...``) is the id the trainer sees and acknowledges; ``ack_segment``/``ack_seq``
    name the ``command_ack`` event that acknowledged it (the same event sent again is no replay)."""

    __tablename__ = "commands"
    __table_args__ = (Index("ix_commands_run_state", "run_id", "state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uid: Mapped[str] = mapped_column(String(64), unique=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(String(200))
    value: Mapped[Any] = mapped_column(JSON, nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    sender: Mapped[str] = mapped_column(String(200))
    sender_kind: Mapped[str] = mapped_column(String(8))  # "person" | "token"
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    delivered_at: Mapped[float | None] = mapped_column(Float)
    acked_at: Mapped[float | None] = mapped_column(Float)
    step: Mapped[int | None] = mapped_column(BigInteger)
    outcome: Mapped[str | None] = mapped_column(String(16))
    message: Mapped[str | None] = mapped_column(Text)
    ack_segment: Mapped[str | None] = mapped_column(String(64))
    ack_seq: Mapped[int | None] = mapped_column(BigInteger)
