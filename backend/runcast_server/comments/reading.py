"""Which of a run's comments one reader sees, and how (comments.schemas.CommentOut).

The team (``moderator``) sees every comment, hidden, held and deleted ones too, with report
counts. Anyone else sees visible comments, and their own held ones, of threads whose first
comment they see and whose anchor the run's publication policy shows them (comments.anchors.shown).
"""

from __future__ import annotations

from collections.abc import Collection

from runcast_server.comments.anchors import shown
from runcast_server.comments.models import Comment
from runcast_server.comments.schemas import AnchorOut, Author, CommentOut
from runcast_server.people.models import User
from runcast_server.policy.apply import View


def _sees(comment: Comment, me: int | None, moderator: bool) -> bool:
    if moderator or comment.state == "visible":
        return True
    return comment.state == "held" and me is not None and comment.author_id == me


def out(comment: Comment, author: User | None, *, me: int | None, moderator: bool, reports: int = 0) -> CommentOut:
    mine = me is not None and comment.author_id == me
    return CommentOut(
        id=comment.id, parent=comment.parent_id, team=comment.team,
        author=None if author is None else Author(name=author.name, display_name=author.display_name),
        anchor=AnchorOut(kind=comment.anchor_kind, key=comment.anchor_key, id=comment.anchor_id,  # type: ignore[arg-type]
                         step=comment.anchor_step),
        html=comment.html, body=comment.body if mine or moderator else None, state=comment.state,  # type: ignore[arg-type]
        pinned=comment.pinned, locked=comment.locked, mine=mine, created_at=comment.created_at,
        edited_at=comment.edited_at, reports=reports if moderator else None)


def visible(rows: list[tuple[Comment, User | None]], view: View, *, me: int | None, moderator: bool,
            reports: dict[int, int] | None = None, shown_reports: Collection[int] | None = None) -> list[CommentOut]:
    """The comments this reader sees, threads (pinned first, then oldest first) each followed by its replies;
    ``shown_reports``: the numbers of the reports the reader sees (None: all), whose threads are shown."""
    counts: dict[int, int] = reports or {}
    roots: list[tuple[Comment, User | None]] = []
    replies: dict[int, list[tuple[Comment, User | None]]] = {}
    for comment, author in rows:
        if comment.parent_id is None:
            if comment.anchor_kind == "report" and shown_reports is not None and comment.anchor_id not in shown_reports:
                continue
            if _sees(comment, me, moderator) and shown(view, comment.anchor_kind, comment.anchor_key, comment.anchor_step):
                roots.append((comment, author))
        else:
            replies.setdefault(comment.parent_id, []).append((comment, author))
    roots.sort(key=lambda r: (not r[0].pinned, r[0].id))
    answer: list[CommentOut] = []
    for root, author in roots:
        answer.append(out(root, author, me=me, moderator=moderator, reports=counts.get(root.id, 0)))
        answer.extend(out(c, a, me=me, moderator=moderator, reports=counts.get(c.id, 0))
                      for c, a in replies.get(root.id, []) if _sees(c, me, moderator))
    return answer


def find_visible(answer: list[CommentOut], comment_id: int) -> CommentOut | None:
    return next((c for c in answer if c.id == comment_id), None)


