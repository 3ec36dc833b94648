"""``/api/v1/runs/{run_id}/reports``: the team's training reports on a run (docs/reports.md).

Anyone who may read the run reads its published reports (the version the team published) and
their live blocks' data, under the run's publication policy and broadcast delay; the team (a
member's or owner's session, from this site's pages, or a token with the ``team`` scope of the
run's project) writes, edits (each edit a new version), publishes, unpublishes, and asks for a
draft generated from a period's record. A private run's reports answer 404 to everyone else.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from sqlalchemy.orm import Session

from runcast_server.api.deps import SESSION_COOKIE, ContextDep, PersonDep, SessionDep, TokenDep
from runcast_server.api.run_caller import Caller, RunPath, read_in_one_hop, require_team, run_caller
from runcast_server.comments.schemas import Author
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.people.models import User
from runcast_server.policy.apply import public_view, view_for
from runcast_server.record.models import Run
from runcast_server.reports import notices, service
from runcast_server.reports.blocks import Rendered, render
from runcast_server.reports.data import report_data
from runcast_server.reports.draft import draft
from runcast_server.reports.export import LANGUAGE, block_messages, static_html
from runcast_server.reports.models import Report, ReportVersion
from runcast_server.reports.schemas import (
    MAX_STEP,
    DraftOut,
    PublishIn,
    ReportData,
    ReportPreviewIn,
    ReportPreviewOut,
    ReportSummary,
    ReportVersionList,
    ReportVersionOut,
    TrainingReportIn,
    TrainingReportList,
    TrainingReportOut,
)
from runcast_server.web.vendor import PLOTLY

router = APIRouter(tags=["reports"])
ERRORS = error_responses(401, 403, 404, 409, 422)
NumberPath = Annotated[int, Path(ge=1, le=2**31 - 1, description="The report's number in its run (1, 2, ...).")]
RENDERER = "js/report-blocks.js"


def _reader(request: Request, session: SessionDep, token: TokenDep, person: PersonDep,
            run_id: RunPath) -> tuple[Caller, Run]:
    return run_caller(request, session, token, person, run_id)


def _writer(request: Request, session: SessionDep, token: TokenDep, person: PersonDep,
            run_id: RunPath) -> tuple[Caller, Run]:
    """The team, or 401 for nobody (before any lookup); 404 for a run hidden from the caller; 403 for
    anyone else, all before the body is read."""
    if token is None and person is None:
        raise ApiError(401, "sign in, or give a token with the 'team' scope, to write reports", field=SESSION_COOKIE)
    caller, run = run_caller(request, session, token, person, run_id)
    require_team(caller)
    return caller, run


ReaderDep = Annotated[tuple[Caller, Run], Depends(_reader)]
WriterDep = Annotated[tuple[Caller, Run], Depends(_writer)]


def _page(run: Run, number: int) -> str:
    return f"/runs/{run.id}/reports/{number}"


def _author(user: User | None) -> Author | None:
    return None if user is None else Author(name=user.name, display_name=user.display_name)


def _shown(session: Session, run: Run, caller: Caller, number: int,
           version: int | None = None) -> tuple[Report, ReportVersion, User | None]:
    """The report and the version this caller reads: the team any (default the newest), anyone else
    the published one (an unpublished report answers as an unknown one)."""
    report = service.find(session, run.id, number)
    if report is None or (not caller.team and report.published_version is None):
        raise NotFound("report", field="report")
    if version is not None and not caller.team and version != report.published_version:
        raise NotFound("report version", field="version")
    wanted = version or (report.version if caller.team else report.published_version)
    assert wanted is not None
    found = service.version(session, report, wanted)
    if found is None:
        raise NotFound("report version", field="version")
    return report, found[0], found[1]


def _rendered(session: Session, run: Run, caller: Caller, v: ReportVersion) -> Rendered:
    """The version's HTML and blocks as this reader may see them (withheld metric names left out)."""
    return render(v.body, None if caller.team else public_view(session, run).metric)


def _out(session: Session, run: Run, report: Report, v: ReportVersion, author: User | None,
         caller: Caller) -> TrainingReportOut:
    rendered = _rendered(session, run, caller, v)
    return TrainingReportOut(run=run.id, number=report.number, url=_page(run, report.number), state=report.state,  # type: ignore[arg-type]
                     version=v.version, latest_version=report.version if caller.team else None,
                     published_version=report.published_version, title=v.title,
                     body=v.body if caller.team else None, html=rendered.html,
                     blocks=[b.as_dict() for b in rendered.blocks], from_step=v.from_step, to_step=v.to_step,
                     author=_author(author), created_at=v.created_at, published_at=report.published_at)


def _announce(ctx: ContextDep, run: Run, report: Report, change: str) -> None:
    """After the commit: every open page of the run reads its reports again (``event: reports``)."""
    ctx.hub.publish(run.id, {"run": run.id, "reports": {"number": report.number, "change": change}})


def _text(body: TrainingReportIn) -> service.Text:
    if body.to_step < body.from_step:
        raise ApiError(422, "to_step is below from_step", field="to_step")
    render(body.body)  # a bad live block is refused before anything is written
    return service.Text(body.title, body.body, body.from_step, body.to_step)


@router.get("/runs/{run_id}/reports", response_model=TrainingReportList, responses=ERRORS)
async def list_run_reports(request: Request, ctx: ContextDep, token: TokenDep, run_id: RunPath) -> TrainingReportList:
    """The run's reports: published ones for everyone, drafts too for the team (read at every first
    load of the run page: one hop, a shared read, as the comments are)."""
    def listing(session: Session, caller: Caller, run: Run) -> TrainingReportList:
        if caller.team:
            rows = [(r, service.version(session, r, r.version)) for r in service.run_reports(session, run.id)]
            items = [(r, v[0]) for r, v in rows if v is not None]
        else:
            items = sorted(service.published(session, run.id), key=lambda rv: rv[0].number)
        return TrainingReportList(run=run.id, team=caller.team, reports=[
            ReportSummary(number=r.number, url=_page(run, r.number), title=v.title,
                          state=r.state,  # type: ignore[arg-type]
                          from_step=v.from_step, to_step=v.to_step, published_at=r.published_at) for r, v in items])

    return await read_in_one_hop(ctx, request, token, run_id, listing)


@router.post("/runs/{run_id}/reports", response_model=TrainingReportOut, status_code=201, responses=ERRORS)
def create_report(session: SessionDep, writer: WriterDep, body: TrainingReportIn) -> TrainingReportOut:
    """A new report, a draft until published (the team)."""
    caller, run = writer
    report, version = service.create(session, run.id, _text(body), author=caller.person)
    session.commit()
    return _out(session, run, report, version, caller.person, caller)


@router.get("/runs/{run_id}/reports/{number}", response_model=TrainingReportOut, responses=ERRORS)
def get_report(session: SessionDep, reader: ReaderDep, number: NumberPath,
               version: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="A version (the team: any).")]
               = None) -> TrainingReportOut:
    """A report: the published version for everyone, the newest (or ``version``) for the team."""
    caller, run = reader
    report, v, author = _shown(session, run, caller, number, version)
    return _out(session, run, report, v, author, caller)


@router.put("/runs/{run_id}/reports/{number}", response_model=TrainingReportOut, responses=ERRORS)
def edit_report(session: SessionDep, writer: WriterDep, number: NumberPath, body: TrainingReportIn) -> TrainingReportOut:
    """A new version of the report (the team); the public reads the published one until it is published."""
    caller, run = writer
    report, _, _ = _shown(session, run, caller, number)
    version = service.edit(session, report, _text(body), author=caller.person)
    session.commit()
    return _out(session, run, report, version, caller.person, caller)


@router.post("/runs/{run_id}/reports/{number}/publish", response_model=TrainingReportOut, responses=ERRORS)
def publish_report(session: SessionDep, ctx: ContextDep, writer: WriterDep, number: NumberPath,
                   body: PublishIn) -> TrainingReportOut:
    """Publish the newest version (or ``version``): its page, the run's list and feed show it (the team)."""
    caller, run = writer
    report, _, _ = _shown(session, run, caller, number)
    if body.version is not None and body.version > report.version:
        raise NotFound("report version", field="version")
    service.publish(session, report, body.version)
    session.commit()
    _announce(ctx, run, report, "published")
    # subscribers hear of a report once, when it is public (reports/notices.py, docs/alerts.md)
    notices.published(ctx, run.id, report.id, report.published_at or 0.0)
    shown, v, author = _shown(session, run, caller, number, report.published_version)
    return _out(session, run, shown, v, author, caller)


@router.post("/runs/{run_id}/reports/{number}/unpublish", response_model=TrainingReportOut, responses=ERRORS)
def unpublish_report(session: SessionDep, ctx: ContextDep, writer: WriterDep, number: NumberPath) -> TrainingReportOut:
    """Take the report back to a draft: the public no longer sees it (the team)."""
    caller, run = writer
    report, _, _ = _shown(session, run, caller, number)
    service.unpublish(session, report)
    session.commit()
    _announce(ctx, run, report, "unpublished")
    shown, v, author = _shown(session, run, caller, number)
    return _out(session, run, shown, v, author, caller)


@router.get("/runs/{run_id}/reports/{number}/versions", response_model=ReportVersionList, responses=ERRORS)
def list_report_versions(session: SessionDep, reader: ReaderDep, number: NumberPath) -> ReportVersionList:
    """Every version of the report, oldest first (the team)."""
    caller, run = reader
    require_team(caller)
    report, _, _ = _shown(session, run, caller, number)
    users = {u.id: u for u in session.query(User).filter(User.id.in_(
        [v.author_id for v in service.versions(session, report) if v.author_id is not None]))}
    return ReportVersionList(run=run.id, number=report.number, versions=[
        ReportVersionOut(version=v.version, title=v.title, from_step=v.from_step, to_step=v.to_step,
                   author=_author(users.get(v.author_id) if v.author_id is not None else None), created_at=v.created_at)
        for v in service.versions(session, report)])


@router.get("/runs/{run_id}/reports/{number}/data", response_model=ReportData, responses=ERRORS)
def get_report_data(session: SessionDep, reader: ReaderDep, number: NumberPath,
                    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None) -> ReportData:
    """The live blocks' data as this reader may see it (the page draws it and asks again as the run goes on)."""
    caller, run = reader
    report, v, _ = _shown(session, run, caller, number, version)
    view = view_for(session, run, caller.reader)
    return ReportData(run=run.id, number=report.number, version=v.version,
                      blocks=report_data(session, run, view, _rendered(session, run, caller, v).blocks))


@router.get("/runs/{run_id}/reports/{number}/export.html", response_class=Response, responses={
    200: {"content": {"text/html": {}}, "description": "One HTML file that opens offline with its charts."}, **ERRORS})
def export_report(request: Request, session: SessionDep, reader: ReaderDep, number: NumberPath) -> Response:
    """The report as one static HTML file: the data inline as the public reads it, Plotly.js inline."""
    caller, run = reader
    report, v, author = _shown(session, run, caller, number)
    public = public_view(session, run)
    rendered = render(v.body, public.metric)
    blocks = report_data(session, run, public, rendered.blocks)
    plotly = request.app.state.vendor.get(PLOTLY).asset.body
    renderer = request.app.state.frontend.file(RENDERER)
    catalog = request.app.state.frontend.file(f"i18n/{LANGUAGE}.json")
    if renderer is None or catalog is None:  # pragma: no cover - the files ship with the package
        raise ApiError(503, "the report renderer is missing from this install", field="report")
    who = author.display_name if author is not None else "the team"
    meta = f"{run.name}, steps {v.from_step} to {v.to_step}, version {v.version}, by {who}"
    body = static_html(title=v.title, meta=meta, body_html=rendered.html, blocks=blocks, plotly=plotly,
                       renderer=renderer.body, messages=block_messages(catalog.body))
    name = f"{run.name}-report-{report.number}.html".replace('"', "")
    return Response(body, media_type="text/html; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.post("/runs/{run_id}/report-preview", response_model=ReportPreviewOut, responses=ERRORS)
def preview_report(session: SessionDep, writer: WriterDep, body: ReportPreviewIn) -> ReportPreviewOut:
    """Markdown rendered as a saved report is, by the same renderer and sanitizer, with its live blocks'
    data as the public will read the published report (the run's publication policy: withheld keys
    left out, a delayed run's points as of its delay); nothing is written (the team: the editor's live
    preview; 422 naming ``body`` for a bad block)."""
    _, run = writer
    public = public_view(session, run)
    rendered = render(body.body, public.metric)
    return ReportPreviewOut(run=run.id, html=rendered.html, blocks=report_data(session, run, public, rendered.blocks))


@router.get("/runs/{run_id}/report-draft", response_model=DraftOut, responses=ERRORS)
def get_draft(session: SessionDep, reader: ReaderDep,
              from_step: Annotated[int, Query(ge=0, le=MAX_STEP)],
              to_step: Annotated[int, Query(ge=0, le=MAX_STEP)],
              audience: Annotated[str, Query(pattern="^(public|team)$", description=(
                  "public (default): only what the run's policy publishes, as of its broadcast delay; "
                  "team: everything"))] = "public") -> DraftOut:
    """A Markdown draft from the period's record: loss change, alerts, checkpoints, evaluations, data-mix
    changes, code revisions, resumes and decisions (the team)."""
    caller, run = reader
    require_team(caller)
    if to_step < from_step:
        raise ApiError(422, "to_step is below from_step", field="to_step")
    view = public_view(session, run) if audience == "public" else view_for(session, run, caller.reader)
    return DraftOut(run=run.id, from_step=from_step, to_step=to_step, audience=audience,  # type: ignore[arg-type]
                    body=draft(session, run, view, from_step, to_step))
