"""``GET /runs`` (listing) and ``GET /runs/{run_id}`` (detail)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.api.read_deps import RUN_ERRORS, FullViewDep, ReadableRunDep, SettingsDep
from runcast_server.errors import error_responses
from runcast_server.reads import runs as reads
from runcast_server.reads.schemas import RunDetail, RunList, RunStatus

router = APIRouter(tags=["runs"])


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
    limit: Annotated[int, Query(ge=1, le=200, description="Runs per page.")] = 50,
    cursor: Annotated[
        str | None,
        Query(max_length=512, description="next_cursor of the previous page."),
    ] = None,
) -> RunList:
    """Runs newest first: public ones, plus every run of the project whose token is presented."""
    return reads.list_runs(
        session,
        viewer=viewer,
        project=project,
        status=status,
        limit=limit,
        cursor=cursor,
        stall_after_s=settings.stall_after_s,
    )


@router.get("/runs/{run_id}", response_model=RunDetail, responses=RUN_ERRORS)
def get_run(
    session: SessionDep, settings: SettingsDep, found: ReadableRunDep, full: FullViewDep
) -> RunDetail:
    """A run's summary, config, code, environment, metric keys and segments. Paths, host
    and pid only for a token of the run's project or a run with ``public_paths``."""
    run, project = found
    return reads.run_detail(session, run, project, stall_after_s=settings.stall_after_s, full=full)
