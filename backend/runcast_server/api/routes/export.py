"""``GET /runs/{run_id}/export``: every raw point (or every sample, or evaluation) as JSONL, CSV or Parquet, streamed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from runcast_server.api.deps import ContextDep, SessionDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, ViewDep
from runcast_server.core.db import Database
from runcast_server.core.errors import ApiError
from runcast_server.metrics.export import (
    MEDIA_TYPES,
    ExportFormat,
    export_chunks,
    filename,
    series_to_export,
)
from runcast_server.outputs import export as outputs_export

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
        ExportFormat, Query(alias="format", description="jsonl, csv or parquet (samples and evals: jsonl or parquet).")
    ] = "jsonl",
    key: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only this metric (or sample key).")
    ] = None,
    what: Annotated[
        Literal["metrics", "samples", "evals"], Query(description="The points, the samples or the evaluations.")
    ] = "metrics",
) -> StreamingResponse:
    """Points: rows ``segment, key, step, value`` ordered by segment, key and step. JSONL and CSV write
    NaN/Inf as strings; Parquet (int32, string, int64, float64 columns, one row group per 131,072
    points) holds them as floats. ``what=samples`` (or ``evals``): one row per sample (evaluation) in
    step order, every field whole (docs/api.md#samples-evaluations-and-media); not as CSV, and
    ``key`` (a sample key) only with samples."""
    run, _ = found
    if what != "metrics":
        if fmt == "csv":
            raise ApiError(422, f"{what} export as jsonl or parquet", field="format")
        if what == "evals" and key is not None:
            raise ApiError(422, "key selects metrics or samples, not evaluations", field="key")
        chosen = outputs_export.export_for(session, run.id, what, view, key)
        return StreamingResponse(
            _output_chunks(ctx.database, chosen, what, fmt), media_type=MEDIA_TYPES[fmt],
            headers={"Content-Disposition": f'attachment; filename="{outputs_export.filename(run.id, what, fmt)}"'},
        )
    if key is not None:
        view.require_metric(key)
    refs = [r for r in series_to_export(session, run, key) if view.metric(r.key)]
    if view.horizon is not None:  # a delayed reader: only the points due (policy/delay.py)
        h = view.horizon
        refs = [replace(r, upto=h.version if r.id in h.frontier else None,
                        times_upto=h.version if r.times in h.frontier else None) for r in refs]
    return StreamingResponse(
        export_chunks(ctx.database, refs, fmt, connections=ctx.arrow),
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{filename(run, fmt)}"'},
    )


def _output_chunks(database: Database, chosen: outputs_export.OutputExport | None, what: outputs_export.OutputKind,
                   fmt: ExportFormat) -> Iterator[bytes]:
    """The body of a samples or evals export (none withheld from the reader: an empty file of its format)."""
    pages = iter(()) if chosen is None else outputs_export.pages(database, chosen)
    if fmt == "parquet":
        from runcast_server.outputs.export_parquet import parquet_chunks  # pyarrow: on use

        yield from parquet_chunks(what, pages)
        return
    yield from outputs_export.jsonl_chunks(pages)
