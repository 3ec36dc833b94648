"""The tables of samples, evaluations, media and blobs (migration 0016).

Each sample, evaluation and media row is one event of its type, stored once per (segment, seq),
with the run version of the batch that stored it (``version``: the live stream and the broadcast
delay, as for timeline events). An image's bytes are a ``Blob`` of the run's project, named by
their SHA-256: uploaded (and checked) by ``artifacts``, referred to by media rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base, BigId


class Sample(Base):
    """A text generation: a prompt, what the model wrote, how it was sampled and scored."""

    __tablename__ = "samples"
    __table_args__ = (
        UniqueConstraint("segment_id", "seq", name="uq_samples_segment_seq"),
        Index("ix_samples_run_key_prompt_step", "run_id", "key", "prompt_id", "step"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    segment_id: Mapped[int] = mapped_column(ForeignKey("segments.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    step: Mapped[int] = mapped_column(BigInteger)
    key: Mapped[str] = mapped_column(String(200))
    prompt_id: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    output: Mapped[str] = mapped_column(Text)
    reference: Mapped[str | None] = mapped_column(Text)
    scores: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    settings: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int | None] = mapped_column(BigInteger)


class Evaluation(Base):
    """One task's scores from one suite at a step, tied to a checkpoint (its step) when one is named."""

    __tablename__ = "evals"
    __table_args__ = (
        UniqueConstraint("segment_id", "seq", name="uq_evals_segment_seq"),
        Index("ix_evals_run_suite_task_step", "run_id", "suite", "task", "step"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    segment_id: Mapped[int] = mapped_column(ForeignKey("segments.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    step: Mapped[int] = mapped_column(BigInteger)
    suite: Mapped[str] = mapped_column(String(100))
    task: Mapped[str] = mapped_column(String(200))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    checkpoint: Mapped[int | None] = mapped_column(BigInteger)
    n: Mapped[int | None] = mapped_column(BigInteger)
    config: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    versions: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int | None] = mapped_column(BigInteger)


class Media(Base):
    """An image (``blob``), a small table or a histogram's bins, under a key at a step.

    ``payload`` holds the kind's fields as the wire has them (caption; width, height, content
    type and size of an image; columns and rows of a table; edges, counts and the NaN and
    infinity counts of a histogram); ``blob`` the image's SHA-256, indexed to keep blobs in use.
    """

    __tablename__ = "media"
    __table_args__ = (
        UniqueConstraint("segment_id", "seq", name="uq_media_segment_seq"),
        Index("ix_media_run_key_step", "run_id", "key", "step"),
        Index("ix_media_blob", "blob"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    segment_id: Mapped[int] = mapped_column(ForeignKey("segments.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    step: Mapped[int] = mapped_column(BigInteger)
    key: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    blob: Mapped[str | None] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int | None] = mapped_column(BigInteger)



class Blob(Base):
    """Bytes a project uploaded once, addressed by their SHA-256 (an image of a media row).

    Stored under ``<project>/blobs/<sha256[:2]>/<sha256>`` of the checkpoint storage; the row is
    written once the bytes are in place and checked (``content_type`` is what the server found
    in them, never what the client said)."""

    __tablename__ = "blobs"

    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(String(64))
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
