"""The checkpoint uploads table (migration 0008): one row per checkpoint a trainer publishes over HTTP."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base


class Upload(Base):
    """A checkpoint (one file, or a directory tree) sent by the SDK, and its manifest.

    ``path`` is what the checkpoint event records: ``<project>/<run>/step-<N>/<name>``
    (relative to the storage root) for an upload, the trainer's own path for a checkpoint
    the server found in place. ``files`` is the manifest ``[{"path", "size", "sha256"}]``
    (a file checkpoint: one entry, its name); ``fingerprint`` the sha256 of it, so the
    same checkpoint asked for again (a restarted trainer) resumes this row. ``state``:
    ``open`` (bytes arriving), ``done`` (every file verified, moved into place, the
    checkpoint event recorded) or ``failed`` (a file did not match its sha256; nothing
    kept). ``event`` holds the fields of the checkpoint event recorded at ``done``;
    ``parts`` the S3 multipart upload id of each file.
    """

    __tablename__ = "uploads"
    __table_args__ = (
        UniqueConstraint("run_id", "path", "fingerprint", name="uq_uploads_run_path_fingerprint"),
        Index("ix_uploads_run_path", "run_id", "path"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(String(4096))
    fingerprint: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))  # file | directory
    mode: Mapped[str] = mapped_column(String(16))  # upload | in_place
    size: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[list[Any]] = mapped_column(JSON)
    event: Mapped[dict[str, Any]] = mapped_column(JSON)
    parts: Mapped[list[Any] | None] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    completed_at: Mapped[float | None] = mapped_column(Float)
