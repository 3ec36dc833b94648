"""Comments stored and changed: threads, edits kept as versions, the team's moderation, reports,
and a run's hold-for-approval setting. Callers check who may do what (api/routes/comments.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runcast_server.comments.anchors import Anchor
from runcast_server.comments.markdown import render
from runcast_server.comments.models import Comment, CommentReport, CommentSettings, CommentVersion
from runcast_server.people.models import User


def holds(session: Session, run_id: str) -> bool:
    """Whether the run holds new comments for the team's approval."""
    return bool(session.scalar(select(CommentSettings.hold).where(CommentSettings.run_id == run_id)))


def set_hold(session: Session, run_id: str, hold: bool) -> None:
    row = session.get(CommentSettings, run_id)
    if row is None:
        session.add(CommentSettings(run_id=run_id, hold=hold, updated_at=time.time()))
    else:
        row.hold, row.updated_at = hold, time.time()
    session.flush()


def create(session: Session, run_id: str, body: str, *, anchor: Anchor, parent: Comment | None,
           author: User | None, team: bool, held: bool) -> Comment:
    """A new comment (a thread when ``parent`` is None, else a reply to ``parent``'s thread)."""
    root = parent if parent is None or parent.parent_id is None else session.get(Comment, parent.parent_id)
    comment = Comment(run_id=run_id, parent_id=None if root is None else root.id,
                      author_id=None if author is None else author.id, team=team,
                      anchor_kind=anchor.kind, anchor_key=anchor.key, anchor_id=anchor.id, anchor_step=anchor.step,
                      body=body, html=render(body), state="held" if held else "visible", created_at=time.time())
    session.add(comment)
    session.flush()
    return comment


def _keep(session: Session, comment: Comment) -> None:
    session.add(CommentVersion(comment_id=comment.id, body=comment.body, created_at=time.time()))


def edit(session: Session, comment: Comment, body: str) -> None:
    """Replace the text; the former one is kept as a version (for the team)."""
    _keep(session, comment)
    comment.body, comment.html, comment.edited_at = body, render(body), time.time()
    session.flush()


def withdraw(session: Session, comment: Comment) -> None:
    """The author's delete: the text leaves the comment for its versions; the comment stays, ``deleted``."""
    _keep(session, comment)
    comment.body, comment.html, comment.state, comment.edited_at = "", "", "deleted", time.time()
    session.flush()


@dataclass(frozen=True)
class Moderation:
    """The team's changes to a comment (None: unchanged). ``pinned`` and ``locked`` act on a thread."""

    pinned: bool | None = None
    locked: bool | None = None
    hidden: bool | None = None
    approved: bool | None = None


def moderate(session: Session, comment: Comment, change: Moderation) -> None:
    if change.pinned is not None:
        comment.pinned = change.pinned
    if change.locked is not None:
        comment.locked = change.locked
    if change.hidden is not None and comment.state != "deleted":
        comment.state = "hidden" if change.hidden else "visible"
    if change.approved and comment.state == "held":
        comment.state = "visible"
    session.flush()


def report(session: Session, comment: Comment, user: User, reason: str) -> bool:
    """Record ``user``'s report (once per person); False when they had reported it already."""
    known = session.scalar(select(CommentReport.id).where(CommentReport.comment_id == comment.id,
                                                          CommentReport.user_id == user.id))
    if known is not None:
        return False
    session.add(CommentReport(comment_id=comment.id, user_id=user.id, reason=reason, created_at=time.time()))
    session.flush()
    return True


def run_comments(session: Session, run_id: str) -> list[tuple[Comment, User | None]]:
    """Every comment of the run with its author, threads first in order, each followed by its replies."""
    rows = session.execute(select(Comment, User).outerjoin(User, User.id == Comment.author_id)
                           .where(Comment.run_id == run_id).order_by(Comment.id)).all()
    return [(c, u) for c, u in rows]


def report_counts(session: Session, run_id: str) -> dict[int, int]:
    return dict(session.execute(
        select(CommentReport.comment_id, func.count()).join(Comment, Comment.id == CommentReport.comment_id)
        .where(Comment.run_id == run_id).group_by(CommentReport.comment_id)).all())


def reports(session: Session, run_id: str) -> list[tuple[CommentReport, str]]:
    """The run's reports with their reporters' names, newest first."""
    return [(r, n) for r, n in session.execute(
        select(CommentReport, User.name).join(User, User.id == CommentReport.user_id)
        .join(Comment, Comment.id == CommentReport.comment_id).where(Comment.run_id == run_id)
        .order_by(CommentReport.id.desc())).all()]


def versions(session: Session, comment_id: int) -> list[CommentVersion]:
    return list(session.scalars(select(CommentVersion).where(CommentVersion.comment_id == comment_id)
                                .order_by(CommentVersion.id)))
