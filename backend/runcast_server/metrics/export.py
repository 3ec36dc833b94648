"""Export of a run's raw points as JSONL, CSV or Parquet, streamed page by page.

Every row has the step's wall time (``time``, epoch seconds: ``metrics.step_times``); the
``_timestamp`` series those times come from is exported only when asked for by name.

CSV cells that hold text (metric names) are neutralised against formula injection;
numbers (negative ones included) and the ``NaN``/``Infinity``/``-Infinity`` markers are
written as they are. JSONL is exact. Both are written by orjson a slice of a page at a time
(``export_text``).

Each page is one keyset query (``step > last step seen``) in a short session of its
own, so memory stays constant and no read transaction is held open for the whole
download, however many points the run has. JSONL and CSV pages are read through the
DB-API cursor (at a million points SQLAlchemy's row objects would cost more than the
database does); Parquet's too on SQLite, into Arrow columns (``export_parquet``: ADBC on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Literal

from runcast.wire.events import TIMESTAMP_KEY
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.db import Database
from runcast_server.core.errors import NotFound
from runcast_server.metrics.export_text import PageWriter, Row
from runcast_server.metrics.series_ref import SeriesRef
from runcast_server.metrics.step_times import TimePoints, time_points, time_runs
from runcast_server.record.models import Point, Run, Segment, Series

ExportFormat = Literal["jsonl", "csv", "parquet"]
COLUMNS: Final = ("segment", "key", "step", "value", "time")
MEDIA_TYPES: Final = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}
PAGE_ROWS: Final = 1 << 15  # about 3 MB of JSONL
PARQUET_PAGE_ROWS: Final = 1 << 17  # one Parquet row group


def series_to_export(session: Session, run: Run, key: str | None) -> list[SeriesRef]:
    """The run's series (of one key, if given; ``_timestamp`` only by name) in (segment, key)
    order, each with its segment's times; ``NotFound`` for an unknown key."""
    query = (
        select(Series.id, Segment.index, Series.key)
        .join(Segment, Segment.id == Series.segment_id)
        .where(Series.run_id == run.id)
        .order_by(Segment.index, Series.key)
    )
    if key is not None:
        query = query.where(Series.key.in_(sorted({key, TIMESTAMP_KEY})))
    rows = session.execute(query).all()
    times = {seg: i for i, seg, k in rows if k == TIMESTAMP_KEY}
    wanted = key or ""
    refs = [SeriesRef(id=i, segment=seg, key=k, times=times.get(seg)) for i, seg, k in rows
            if k == wanted or (key is None and k != TIMESTAMP_KEY)]
    if key is not None and not refs:
        raise NotFound(f"metric {key!r}", field="key")
    return refs


def series_pages(database: Database, ref: SeriesRef, page_rows: int) -> Iterator[tuple[list[Row], TimePoints]]:
    """The series' ``(step, value)`` rows in step order, ``page_rows`` per list (NULL = NaN), each
    page with the time points of its steps (``step_times.time_points``)."""
    after = -1
    while True:
        with database.scope() as session:
            connection = session.connection()
            query = select(Point.step, Point.value).where(Point.series_id == ref.id, Point.step > after)
            if ref.upto is not None:
                query = query.where(Point.version <= ref.upto)
            sql = str(
                query
                .order_by(Point.step)
                .limit(page_rows)
                .compile(connection, compile_kwargs={"literal_binds": True})
            )
            cursor = connection.connection.cursor()
            try:
                cursor.execute(sql)
                rows: list[Row] = list(cursor.fetchall())
                points = time_points(cursor, ref.times, ref.times_upto, rows[0][0], rows[-1][0]) if rows else []
            finally:
                cursor.close()
        if not rows:
            return
        yield rows, points
        if len(rows) < page_rows:
            return
        after = rows[-1][0]


def export_chunks(
    database: Database, refs: list[SeriesRef], fmt: ExportFormat, page_rows: int | None = None
) -> Iterator[bytes]:
    """The export body: a CSV header (for csv), then one chunk per page of points
    (Parquet: the file, one row group per page)."""
    if fmt == "parquet":
        from runcast_server.metrics import export_parquet as parquet  # pyarrow and ADBC: on use

        size = page_rows or PARQUET_PAGE_ROWS
        pages: Iterator[tuple[SeriesRef, Any]]
        if database.engine.dialect.name == "sqlite":  # SQLAlchemy's connection: see export_parquet
            pages = ((ref, parquet.page_of_rows(rows, points))
                     for ref in refs for rows, points in series_pages(database, ref, size))
        else:
            pages = parquet.adbc_pages(database.engine.url.render_as_string(hide_password=False), refs, size)
        yield from parquet.parquet_chunks(pages)
        return
    if fmt == "csv":
        yield (",".join(COLUMNS) + "\n").encode()
    for ref in refs:
        writer = PageWriter(fmt, ref.segment, ref.key)
        for rows, points in series_pages(database, ref, page_rows or PAGE_ROWS):
            yield b"".join(writer.rows(rows[start:end], at) for start, end, at in time_runs(rows, points))


def filename(run: Run, fmt: ExportFormat) -> str:
    """The download's name; run ids are URL-safe, so it needs no escaping."""
    return f"runcast-{run.id}.{fmt}"
