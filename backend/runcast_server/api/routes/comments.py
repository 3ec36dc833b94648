"""``/api/v1/runs/{run_id}/comments``: comments on a run, anchored to the curve (docs/comments.md).

Anyone who may read the run reads its comments (under the run's publication policy); a signed-in
person writes them (from this site's pages only); the team (a member's or owner's session, or a
token with the ``team`` scope of the run's project) also answers as the team, moderates, reads
reports and earlier versions, and sets hold-for-approval. Each change is announced on the run's
live channel (``event: comments``, docs/live.md) after its commit.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from sqlalchemy.orm import Session

from runcast_server.alerts import ratelimit
from runcast_server.api.deps import (
    SESSION_COOKIE,
    ContextDep,
    PersonDep,
    SessionDep,
    TokenDep,
    over_rate_limit,
)
from runcast_server.api.run_caller import Caller, RunPath, read_in_one_hop, require_team, run_caller
from runcast_server.comments import service
from runcast_server.comments.anchors import Anchor, resolve
from runcast_server.comments.models import Comment
from runcast_server.comments.reading import find_visible, visible
from runcast_server.comments.schemas import (
    CommentEdit,
    CommentIn,
    CommentList,
    CommentOut,
    HoldIn,
    ModerationIn,
    ReportIn,
    ReportList,
    ReportOut,
    VersionList,
    VersionOut,
)
from runcast_server.context import AppContext
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.policy.apply import View, view_for
from runcast_server.record.models import Run
from runcast_server.reports import service as reports_service

router = APIRouter(tags=["comments"])
CommentPath = Annotated[int, Path(ge=1, le=2**63 - 1, description="The comment id.")]
ERRORS = error_responses(401, 403, 404, 409, 422, 429)


def _listing(session: Session, run: Run, caller: Caller, view: View | None = None) -> list[CommentOut]:
    view = view if view is not None else view_for(session, run, caller.reader)
    counts = service.report_counts(session, run.id) if caller.team else None
    return visible(service.run_comments(session, run.id), view, me=None if caller.person is None else caller.person.id,
                   moderator=caller.team, reports=counts, shown_reports=_reports_seen(session, run, caller))


def _reports_seen(session: Session, run: Run, caller: Caller) -> set[int]:
    """The numbers of the run's reports this caller sees: every one for the team, else the published."""
    return {r.number for r in reports_service.run_reports(session, run.id) if caller.team or r.published_version}


def _comment(session: Session, run: Run, caller: Caller, comment_id: int) -> Comment:
    """The comment if this caller sees it (else 404, as an unknown one)."""
    comment = session.get(Comment, comment_id)
    if comment is None or comment.run_id != run.id or find_visible(_listing(session, run, caller), comment_id) is None:
        raise NotFound("comment", field="comment")
    return comment


def _limited(request: Request, session: Session, ctx: AppContext, caller: Caller) -> None:
    """Count one write against the person's and the address's limits (the team's tokens are not limited)."""
    if caller.token:
        return
    settings = ctx.settings
    message = "too many comments; wait and try again"
    if caller.person is not None:
        wait = ratelimit.hit(session, f"comment-user:{caller.person.id}", settings.comment_rate_limit,
                             settings.comment_rate_window_s)
        if wait is not None:
            session.commit()
            raise ApiError(429, message, field=SESSION_COOKIE, headers={"Retry-After": str(int(wait) + 1)})
    refused = over_rate_limit(request, session, "comment-address", settings.comment_address_rate_limit,
                              settings.comment_rate_window_s, message)
    if refused is not None:
        raise ApiError(429, message, field="address", headers={"Retry-After": refused.headers["Retry-After"]})


def _announce(ctx: AppContext, run_id: str, comment_id: int, change: str) -> None:
    """After the commit: every open page of the run reloads its comments (live/fanout.py)."""
    ctx.hub.publish(run_id, {"run": run_id, "comments": {"id": comment_id, "change": change}})


@router.get("/runs/{run_id}/comments", response_model=CommentList, responses=ERRORS)
async def list_comments(request: Request, ctx: ContextDep, token: TokenDep, run_id: RunPath) -> CommentList:
    """The run's comments the caller may see: threads (pinned first), each followed by its replies."""
    def listing(session: Session, caller: Caller, run: Run) -> CommentList:
        return CommentList(run=run.id, hold=service.holds(session, run.id), moderator=caller.team,
                           signed_in=caller.person is not None or caller.team, comments=_listing(session, run, caller))

    return await read_in_one_hop(ctx, request, token, run_id, listing)


def _writer(request: Request, session: SessionDep, token: TokenDep, person: PersonDep,
            run_id: RunPath) -> tuple[Caller, Run]:
    """Who writes, and the run: 401 for nobody (before any lookup), 404 for a run hidden from the
    caller, both before the body is read (as every write route answers)."""
    if token is None and person is None:
        raise ApiError(401, "sign in to comment", field=SESSION_COOKIE)
    return run_caller(request, session, token, person, run_id)


WriterDep = Annotated[tuple[Caller, Run], Depends(_writer)]


@router.post("/runs/{run_id}/comments", response_model=CommentOut, status_code=201, responses=ERRORS)
def post_comment(request: Request, session: SessionDep, ctx: ContextDep,
                 writer: WriterDep, body: CommentIn) -> CommentOut:
    """A new thread anchored to the curve (``anchor``) or a reply (``parent``). With a token, only the
    team's answer (a ``team`` token of the run's project)."""
    caller, run = writer
    if caller.person is None and not caller.team:
        if caller.token:
            raise ApiError(403, "comments are written by signed-in people; a token writes only the team's "
                           "(the 'team' scope of the run's project)", field="Authorization")
        raise ApiError(401, "sign in to comment", field=SESSION_COOKIE)
    if (body.anchor is None) == (body.parent is None):
        raise ApiError(422, "give either 'anchor' (a new thread) or 'parent' (a reply)", field="anchor")
    _limited(request, session, ctx, caller)
    view = view_for(session, run, caller.reader)
    parent = None
    if body.parent is not None:
        parent = _comment(session, run, caller, body.parent)
        root = parent if parent.parent_id is None else session.get(Comment, parent.parent_id)
        assert root is not None
        if root.locked and not caller.team:
            raise ApiError(409, "the thread is locked", field="parent")
        anchor = Anchor(root.anchor_kind, root.anchor_key, root.anchor_id, root.anchor_step)
    else:
        assert body.anchor is not None
        anchor = resolve(session, run, view, body.anchor, team=caller.reader is not None
                         and caller.reader.id == run.project_id, reports=_reports_seen(session, run, caller))
    held = service.holds(session, run.id) and not caller.team
    comment = service.create(session, run.id, body.body, anchor=anchor, parent=parent, author=caller.person,
                             team=caller.team, held=held)
    session.commit()
    _announce(ctx, run.id, comment.id, "new")
    answer = find_visible(_listing(session, run, caller, view), comment.id)
    assert answer is not None
    return answer


@router.patch("/runs/{run_id}/comments/{comment_id}", response_model=CommentOut, responses=ERRORS)
def edit_comment(request: Request, session: SessionDep, ctx: ContextDep,
                 writer: WriterDep, comment_id: CommentPath, body: CommentEdit) -> CommentOut:
    """Change one's own comment (its former text is kept for the team)."""
    caller, run = writer
    comment = _comment(session, run, caller, comment_id)
    if caller.person is None or comment.author_id != caller.person.id or comment.state == "deleted":
        raise ApiError(403, "only its author changes a comment", field="comment")
    service.edit(session, comment, body.body)
    session.commit()
    _announce(ctx, run.id, comment.id, "edited")
    answer = find_visible(_listing(session, run, caller), comment.id)
    assert answer is not None
    return answer


@router.delete("/runs/{run_id}/comments/{comment_id}", status_code=204, response_class=Response, responses=ERRORS)
def delete_comment(request: Request, session: SessionDep, ctx: ContextDep,
                   writer: WriterDep, comment_id: CommentPath) -> Response:
    """Withdraw one's own comment (its text is kept for the team; the team hides instead)."""
    caller, run = writer
    comment = _comment(session, run, caller, comment_id)
    if caller.person is None or comment.author_id != caller.person.id:
        raise ApiError(403, "only its author deletes a comment (the team hides it)", field="comment")
    service.withdraw(session, comment)
    session.commit()
    _announce(ctx, run.id, comment.id, "deleted")
    return Response(status_code=204)


@router.post("/runs/{run_id}/comments/{comment_id}/moderation", response_model=CommentOut, responses=ERRORS)
def moderate_comment(request: Request, session: SessionDep, ctx: ContextDep,
                     writer: WriterDep, comment_id: CommentPath, body: ModerationIn) -> CommentOut:
    """The team pins, locks, hides (or shows again) and approves."""
    caller, run = writer
    require_team(caller)
    comment = _comment(session, run, caller, comment_id)
    if comment.parent_id is not None and (body.pinned is not None or body.locked is not None):
        raise ApiError(422, "pin and lock a thread by its first comment", field="pinned" if body.pinned is not None
                       else "locked")
    service.moderate(session, comment, service.Moderation(**body.model_dump()))
    session.commit()
    _announce(ctx, run.id, comment.id, "moderated")
    answer = find_visible(_listing(session, run, caller), comment.id)
    assert answer is not None
    return answer


@router.post("/runs/{run_id}/comments/{comment_id}/reports", status_code=202, response_class=Response,
             responses=ERRORS)
def report_comment(request: Request, session: SessionDep, ctx: ContextDep,
                   writer: WriterDep, comment_id: CommentPath, body: ReportIn) -> Response:
    """Report a comment to the team (any signed-in person, once per comment)."""
    caller, run = writer
    if caller.person is None:
        raise ApiError(401, "sign in to report a comment", field=SESSION_COOKIE)
    comment = _comment(session, run, caller, comment_id)
    _limited(request, session, ctx, caller)
    service.report(session, comment, caller.person, body.reason)
    return Response(status_code=202)


@router.get("/runs/{run_id}/comment-reports", response_model=ReportList, responses=ERRORS)
def list_reports(request: Request, session: SessionDep, token: TokenDep, person: PersonDep,
                 run_id: RunPath) -> ReportList:
    """The reports of the run's comments, newest first (the team)."""
    caller, run = run_caller(request, session, token, person, run_id)
    require_team(caller)
    return ReportList(run=run.id, reports=[ReportOut(comment=r.comment_id, reporter=name, reason=r.reason,
                                                     created_at=r.created_at)
                                           for r, name in service.reports(session, run.id)])


@router.get("/runs/{run_id}/comments/{comment_id}/versions", response_model=VersionList, responses=ERRORS)
def list_versions(request: Request, session: SessionDep, token: TokenDep, person: PersonDep,
                  run_id: RunPath, comment_id: CommentPath) -> VersionList:
    """A comment's earlier texts (the team)."""
    caller, run = run_caller(request, session, token, person, run_id)
    require_team(caller)
    comment = _comment(session, run, caller, comment_id)
    return VersionList(comment=comment.id, versions=[VersionOut(body=v.body, created_at=v.created_at)
                                                     for v in service.versions(session, comment.id)])


@router.put("/runs/{run_id}/comment-settings", response_model=CommentList, responses=ERRORS)
def put_comment_settings(request: Request, session: SessionDep, ctx: ContextDep,
                         writer: WriterDep, body: HoldIn) -> CommentList:
    """Hold new comments for approval, or not (the team); answers as the GET."""
    caller, run = writer
    require_team(caller)
    service.set_hold(session, run.id, body.hold)
    session.commit()
    return CommentList(run=run.id, hold=body.hold, moderator=True, signed_in=True, comments=_listing(session, run, caller))
