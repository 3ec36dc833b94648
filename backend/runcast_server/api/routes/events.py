"""``GET /runs/{run_id}/events``: the run's timeline (not metrics or heartbeats)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import RUN_ERRORS, AfterDep
from runcast_server.reads.schemas import MAX_SEGMENT, EventList, TimelineType
from runcast_server.runs.events import list_events

router = APIRouter(tags=["events"])


@router.get("/runs/{run_id}/events", response_model=EventList, responses=RUN_ERRORS)
async def get_events(
    read: RunReadDep,
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
    def events(r: Reading) -> EventList:
        return list_events(r.session, r.run, types=list(type) if type else None, segment=segment, after=after,
                           limit=limit, full=r.full, private_ok=r.team, view=r.view())

    return await read(events)
