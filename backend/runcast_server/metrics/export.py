"""Export of a run's raw points as JSONL, CSV or Parquet, streamed page by page.

Every row has the step's wall time (``time``, epoch seconds: ``metrics.step_times``); the
``_timestamp`` series those times come from is exported only when asked for by name.

CSV cells that hold text (metric names) are neutralised against formula injection;
numbers (negative ones included) and the ``NaN``/``Infinity``/``-Infinity`` markers are
written as they are. JSONL is exact.

Each page is one keyset query (``step > last step seen``) in a short session of its
own, so memory stays constant and no read transaction is held open for the whole
download, however many points the run has. JSONL and CSV pages are read through the
DB-API cursor (at a million points SQLAlchemy's row objects would cost more than the
database does); Parquet's into Arrow columns (``export_parquet``: ADBC on PostgreSQL).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any, Final, Literal

from runcast.wire.events import TIMESTAMP_KEY
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.db import Database
from runcast_server.core.errors import NotFound
from runcast_server.metrics.series_ref import SeriesRef
from runcast_server.metrics.step_times import page_times
from runcast_server.reads.values import stored_value
from runcast_server.record.models import Point, Run, Segment, Series

ExportFormat = Literal["jsonl", "csv", "parquet"]
COLUMNS: Final = ("segment", "key", "step", "value", "time")
MEDIA_TYPES: Final = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}
PAGE_ROWS: Final = 10_000
PARQUET_PAGE_ROWS: Final = 1 << 17  # one Parquet row group


Row = tuple[int, float | None, float | None]  # step, value (NULL = NaN), time


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


# OWASP CSV injection: a text cell starting with one of these is a formula to a spreadsheet.
_FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """A text cell (a metric name) that no spreadsheet runs: a leading formula character gets a ``'``."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def _value_text(value: float | None) -> str:
    v = stored_value(value)
    return v if isinstance(v, str) else repr(v)


def _format_page(ref: SeriesRef, rows: Sequence[Row], fmt: ExportFormat) -> bytes:
    if fmt == "jsonl":
        lines = (
            json.dumps(
                {
                    "segment": ref.segment,
                    "key": ref.key,
                    "step": step,
                    "value": stored_value(value),
                    "time": at,
                },
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            )
            for step, value, at in rows
        )
        return ("\n".join(lines) + "\n").encode()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(
        (ref.segment, csv_text(ref.key), step, _value_text(value), "" if at is None else repr(at))
        for step, value, at in rows
    )
    return buf.getvalue().encode()


def series_pages(database: Database, ref: SeriesRef, page_rows: int) -> Iterator[Sequence[Row]]:
    """The series' ``(step, value, time)`` rows in step order, ``page_rows`` per list (NULL = NaN)."""
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
                rows = cursor.fetchall()
                steps = [step for step, _ in rows]
                times = page_times(cursor, ref.times, ref.times_upto, steps)
                rows = [(step, value, at) for (step, value), at in zip(rows, times)]
            finally:
                cursor.close()
        if not rows:
            return
        yield rows
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
            pages = ((ref, parquet.page_of_rows(page)) for ref in refs for page in series_pages(database, ref, size))
        else:
            pages = parquet.adbc_pages(database.engine.url.render_as_string(hide_password=False), refs, size)
        yield from parquet.parquet_chunks(pages)
        return
    if fmt == "csv":
        yield (",".join(COLUMNS) + "\n").encode()
    for ref in refs:
        for rows in series_pages(database, ref, page_rows or PAGE_ROWS):
            yield _format_page(ref, rows, fmt)


def filename(run: Run, fmt: ExportFormat) -> str:
    """The download's name; run ids are URL-safe, so it needs no escaping."""
    return f"runcast-{run.id}.{fmt}"
