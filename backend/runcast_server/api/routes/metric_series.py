"""``GET /runs/{run_id}/metrics``: a metric at any zoom level, from rollups."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from runcast.wire.events import MAX_STEP

from runcast_server.api.deps import SessionDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, ViewDep
from runcast_server.metrics.queries import query_metrics
from runcast_server.reads.schemas import MAX_SEGMENT, MetricsResponse

router = APIRouter(tags=["metrics"])


@router.get("/runs/{run_id}/metrics", response_model=MetricsResponse, responses=RUN_ERRORS)
def get_metrics(
    session: SessionDep,
    found: ReadableRunDep,
    view: ViewDep,
    key: Annotated[
        str, Query(min_length=1, max_length=200, description="The metric name.")
    ],
    segment: Annotated[
        int | None, Query(ge=0, le=MAX_SEGMENT, description="One segment's index; default: all.")
    ] = None,
    start: Annotated[
        int | None,
        Query(ge=0, le=MAX_STEP, description="First step; default: the first logged."),
    ] = None,
    end: Annotated[
        int | None,
        Query(ge=0, le=MAX_STEP, description="Last step, not below start; default: the last logged."),
    ] = None,
    max_points: Annotated[
        int, Query(ge=1, le=20_000, description="Most buckets per segment.")
    ] = 2000,
) -> MetricsResponse:
    """Buckets of ``2**level`` steps with min/max/mean/last/count; level 0 is the raw points."""
    run, _ = found
    view.require_metric(key)  # a withheld key answers as an unknown one
    return query_metrics(
        session,
        run,
        key=key,
        segment=segment,
        start=start,
        end=end,
        max_points=max_points,
        horizon=view.horizon,
    )
