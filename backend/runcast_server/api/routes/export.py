"""``GET /runs/{run_id}/export``: every raw point as JSONL, CSV or Parquet, streamed."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from runcast_server.api.deps import ContextDep, SessionDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, ViewDep
from runcast_server.metrics.export import (
    MEDIA_TYPES,
    ExportFormat,
    export_chunks,
    filename,
    series_to_export,
)

router = APIRouter(tags=["export"])


@router.get(
    "/runs/{run_id}/export",
    response_class=StreamingResponse,
    responses={200: {"content": {media: {} for media in MEDIA_TYPES.values()}}, **RUN_ERRORS},
)
def export_run(
    ctx: ContextDep,
    session: SessionDep,
    found: ReadableRunDep,
    view: ViewDep,
    fmt: Annotated[
        ExportFormat, Query(alias="format", description="jsonl, csv or parquet.")
    ] = "jsonl",
    key: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only this metric.")
    ] = None,
) -> StreamingResponse:
    """Rows ``segment, key, step, value`` ordered by segment, key and step. JSONL and CSV write
    NaN/Inf as strings; Parquet (int32, string, int64, float64 columns, one row group per
    131,072 points) holds them as floats."""
    run, _ = found
    if key is not None:
        view.require_metric(key)
    refs = [r for r in series_to_export(session, run, key) if view.metric(r.key)]
    if view.horizon is not None:  # a delayed reader: only the points due (policy/delay.py)
        refs = [replace(r, upto=view.horizon.version) if r.id in view.horizon.frontier else r for r in refs]
    return StreamingResponse(
        export_chunks(ctx.database, refs, fmt),
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{filename(run, fmt)}"'},
    )
