"""The comment tables (migration 0023): comments, their earlier versions, reports, and each run's
comment settings (hold-for-approval)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    delete,
    false,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from runcast_server.core.models import Base, BigId

ANCHOR_KINDS = ("step", "checkpoint", "alert", "sample", "eval", "report")
# visible: shown to its readers; held: waiting for the team's approval (hold-for-approval);
# hidden: hidden by the team; deleted: withdrawn by its author (its text kept as a version).
STATES = ("visible", "held", "hidden", "deleted")


class Comment(Base):
    """One comment. A thread is a top-level comment (``parent_id`` NULL) and its replies; a reply's
    ``parent_id`` is always the thread's first comment (one level). ``author_id`` NULL: written with
    a team token (the team's). ``anchor_step`` is the step the anchor stands at (the chart's marker)."""

    __tablename__ = "comments"
    __table_args__ = (Index("ix_comments_run_id_parent_id", "run_id", "parent_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), ForeignKey("runs.id", ondelete="CASCADE"))
    parent_id: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("comments.id", ondelete="CASCADE"))
    author_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("users.id", ondelete="SET NULL"), index=True)
    team: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    anchor_kind: Mapped[str] = mapped_column(String(16))
    anchor_key: Mapped[str | None] = mapped_column(String(200))
    anchor_id: Mapped[int | None] = mapped_column(BigInteger)
    anchor_step: Mapped[int | None] = mapped_column(BigInteger)
    body: Mapped[str] = mapped_column(Text)  # the Markdown source
    html: Mapped[str] = mapped_column(Text)  # sanitized (comments.markdown); what readers get
    state: Mapped[str] = mapped_column(String(16), default="visible")
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    locked: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[float] = mapped_column(Float)
    edited_at: Mapped[float | None] = mapped_column(Float)


class CommentVersion(Base):
    """A comment's text before an edit or a delete (for the team)."""

    __tablename__ = "comment_versions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    comment_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("comments.id", ondelete="CASCADE"), index=True)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class CommentReport(Base):
    """A signed-in person's report of a comment (one per person and comment; the team reads them)."""

    __tablename__ = "comment_reports"
    __table_args__ = (UniqueConstraint("comment_id", "user_id", name="uq_comment_reports_comment_id_user_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    comment_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("comments.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[float] = mapped_column(Float)


class CommentSettings(Base):
    """A run's comment settings: ``hold`` new comments for the team's approval."""

    __tablename__ = "comment_settings"

    run_id: Mapped[str] = mapped_column(String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    hold: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    updated_at: Mapped[float] = mapped_column(Float)


def delete_run_comment_rows(session: Session, run_id: str) -> None:
    """The versions and reports of a run's comments (no ``run_id`` of their own; ``tables.delete_run``)."""
    ids = select(Comment.id).where(Comment.run_id == run_id).scalar_subquery()
    session.execute(delete(CommentVersion).where(CommentVersion.comment_id.in_(ids)))
    session.execute(delete(CommentReport).where(CommentReport.comment_id.in_(ids)))
    session.execute(update(Comment).where(Comment.run_id == run_id).values(parent_id=None))
