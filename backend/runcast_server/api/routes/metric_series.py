"""``GET /runs/{run_id}/metrics``: a metric at any zoom level, from rollups."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from runcast.wire.events import MAX_STEP

from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import RUN_ERRORS
from runcast_server.metrics.queries import query_metrics
from runcast_server.reads.schemas import MAX_SEGMENT, MetricsResponse

router = APIRouter(tags=["metrics"])


@router.get("/runs/{run_id}/metrics", response_model=MetricsResponse, responses=RUN_ERRORS)
async def get_metrics(
    read: RunReadDep,
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
    def metrics(r: Reading) -> MetricsResponse:
        view = r.view()
        view.require_metric(key)  # a withheld key answers as an unknown one
        return query_metrics(r.session, r.run, key=key, segment=segment, start=start, end=end,
                             max_points=max_points, horizon=view.horizon)

    return await read(metrics)
