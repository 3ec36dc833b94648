"""``GET /runs/{run_id}/events``: the run's timeline (not metrics or heartbeats)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    AfterDep,
    FullViewDep,
    ReadableRunDep,
    ViewDep,
)
from runcast_server.reads.published import is_project_reader
from runcast_server.reads.schemas import MAX_SEGMENT, EventList, TimelineType
from runcast_server.runs.events import list_events

router = APIRouter(tags=["events"])


@router.get("/runs/{run_id}/events", response_model=EventList, responses=RUN_ERRORS)
def get_events(
    session: SessionDep,
    viewer: ViewerDep,
    found: ReadableRunDep,
    full: FullViewDep,
    view: ViewDep,
    after: AfterDep,
    type: Annotated[
        list[TimelineType] | None, Query(description="Only these types (repeatable).")
    ] = None,
    segment: Annotated[
        int | None, Query(ge=0, le=MAX_SEGMENT, description="Only this segment's events.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Events per page.")] = 100,
) -> EventList:
    """Events oldest first (in the order they were stored)."""
    run, _ = found
    return list_events(
        session,
        run,
        types=list(type) if type else None,
        segment=segment,
        after=after,
        limit=limit,
        full=full,
        private_ok=is_project_reader(run, viewer),
        view=view,
    )
