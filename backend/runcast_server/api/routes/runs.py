"""``GET /runs`` (listing) and ``GET /runs/{run_id}`` (detail)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from runcast_server.alerts.service import stall_after, stall_after_sql
from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    FullViewDep,
    ReadableRunDep,
    SettingsDep,
    ViewDep,
)
from runcast_server.core.errors import error_responses
from runcast_server.reads.cursor import RUN_CURSOR
from runcast_server.reads.schemas import RunDetail, RunList, RunStatus
from runcast_server.runs import queries as reads

router = APIRouter(tags=["runs"])
TEXT_FILTER = r"^[^\x00-\x1f\x7f]+$"  # what a tag or group can hold (runcast.events)


@router.get("/runs", response_model=RunList, responses=error_responses(401, 422))
def list_runs(
    session: SessionDep,
    viewer: ViewerDep,
    settings: SettingsDep,
    project: Annotated[
        str | None, Query(max_length=100, description="Only runs of this project.")
    ] = None,
    status: Annotated[
        RunStatus | None, Query(description="Only runs with this status.")
    ] = None,
    tag: Annotated[str | None, Query(min_length=1, max_length=64, pattern=TEXT_FILTER, description="Only runs with this tag.")] = None,
    group: Annotated[str | None, Query(min_length=1, max_length=128, pattern=TEXT_FILTER, description="Only runs of this group.")] = None,
    limit: Annotated[int, Query(ge=1, le=200, description="Runs per page.")] = 50,
    cursor: Annotated[
        str | None,
        Query(pattern=RUN_CURSOR, description="next_cursor of the previous page, unchanged."),
    ] = None,
    archived: Annotated[
        Literal["exclude", "include", "only"],
        Query(description="Archived runs: left out (default), included, or only them."),
    ] = "exclude",
) -> RunList:
    """Runs newest first: public ones, plus every run of the project whose token is presented."""
    return reads.list_runs(
        session,
        viewer=viewer,
        project=project,
        status=status,
        tag=tag,
        group=group,
        limit=limit,
        cursor=cursor,
        stall_after=stall_after_sql(settings.stall_after_s),
        archived=archived,
    )


@router.get("/runs/{run_id}", response_model=RunDetail, responses=RUN_ERRORS)
def get_run(
    session: SessionDep, settings: SettingsDep, found: ReadableRunDep, full: FullViewDep, view: ViewDep
) -> RunDetail:
    """A run's summary, config, code, environment, metric keys and segments. Paths, host
    and pid only for a token of the run's project or a run with ``public_paths``; what the run's
    publication policy withholds only for a token of its project (``publication`` says what)."""
    run, project = found
    after = stall_after(session, run.id, settings.stall_after_s)
    return reads.run_detail(session, run, project, stall_after_s=after, full=full, view=view)
