"""Export of a run's raw points as JSONL, CSV or Parquet, streamed page by page.

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
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.db import Database
from runcast_server.core.errors import NotFound
from runcast_server.core.models import Point, Run, Segment, Series
from runcast_server.reads.values import stored_value

ExportFormat = Literal["jsonl", "csv", "parquet"]
COLUMNS: Final = ("segment", "key", "step", "value")
MEDIA_TYPES: Final = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}
PAGE_ROWS: Final = 10_000
PARQUET_PAGE_ROWS: Final = 1 << 17  # one Parquet row group


@dataclass(frozen=True)
class SeriesRef:
    id: int
    segment: int
    key: str
    upto: int | None = None  # only points of run versions up to this one (a delayed reader)


def series_to_export(session: Session, run: Run, key: str | None) -> list[SeriesRef]:
    """The run's series (of one key, if given) in (segment, key) order; ``NotFound`` for an unknown key."""
    query = (
        select(Series.id, Segment.index, Series.key)
        .join(Segment, Segment.id == Series.segment_id)
        .where(Series.run_id == run.id)
        .order_by(Segment.index, Series.key)
    )
    if key is not None:
        query = query.where(Series.key == key)
    refs = [SeriesRef(id=i, segment=seg, key=k) for i, seg, k in session.execute(query)]
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


def _format_page(
    ref: SeriesRef, rows: Sequence[tuple[int, float | None]], fmt: ExportFormat
) -> bytes:
    if fmt == "jsonl":
        lines = (
            json.dumps(
                {
                    "segment": ref.segment,
                    "key": ref.key,
                    "step": step,
                    "value": stored_value(value),
                },
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            )
            for step, value in rows
        )
        return ("\n".join(lines) + "\n").encode()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(
        (ref.segment, csv_text(ref.key), step, _value_text(value)) for step, value in rows
    )
    return buf.getvalue().encode()


def series_pages(database: Database, ref: SeriesRef, page_rows: int) -> Iterator[Sequence[tuple[int, float | None]]]:
    """The series' ``(step, value)`` rows in step order, ``page_rows`` per list (NULL = NaN)."""
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
