"""``GET /runs/{run_id}/export``: every raw point as JSONL or CSV, streamed."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from runcast_server.api.deps import SessionDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep
from runcast_server.reads.export import (
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
    responses={200: {"content": {MEDIA_TYPES["jsonl"]: {}, MEDIA_TYPES["csv"]: {}}}, **RUN_ERRORS},
)
def export_run(
    session: SessionDep,
    found: ReadableRunDep,
    fmt: Annotated[
        ExportFormat, Query(alias="format", description="jsonl or csv.")
    ] = "jsonl",
    key: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only this metric.")
    ] = None,
) -> StreamingResponse:
    """Rows ``segment, key, step, value`` ordered by segment, key and step; NaN/Inf as strings."""
    run, _ = found
    refs = series_to_export(session, run, key)
    return StreamingResponse(
        export_chunks(refs, fmt),
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{filename(run, fmt)}"'},
    )
