"""The Parquet export: columns ``segment`` (int32), ``key`` (string), ``step`` (int64),
``value`` (float64; NaN and +-Inf as themselves), ``time`` (float64, epoch seconds; null for a
step without a time), one row group per page, streamed.

On PostgreSQL, pages are read with ADBC (its PostgreSQL driver, through binary COPY)
straight into Arrow columns: no Python object per point. On SQLite they are read through
the connection SQLAlchemy uses (``export.series_pages``) and turned into Arrow columns:
ADBC's SQLite driver is a second copy of the SQLite library, and a second copy in one
process breaks SQLite's locking (closing its file releases the POSIX locks the server's
own connections hold on the database: https://sqlite.org/howtocorrupt.html, "multiple
copies of SQLite linked into the same application"; writes then failed with "disk I/O
error"). Each page is one keyset query, so no transaction stays open across the
download. Each row group's bytes go to the client as soon as it is written, so the server
holds one page, never the file; the footer (the row groups' offsets) comes last, as
Parquet requires. Readers (pyarrow, pandas, polars, DuckDB, Spark) read it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sqlalchemy.engine import make_url

from runcast_server.metrics.series_ref import INDEX_ORDER_PG, DensePage
from runcast_server.metrics.step_times import TimePoints, time_points_sql

if TYPE_CHECKING:
    from runcast_server.metrics.series_ref import SeriesRef

SCHEMA: Final = pa.schema(
    [
        pa.field("segment", pa.int32(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("time", pa.float64(), nullable=True),
    ]
)
_NAN: Final = pa.scalar(float("nan"), pa.float64())
_ROW: Final = pa.struct([pa.field("step", pa.int64()), pa.field("value", pa.float64())])
_VALUE: Final = pa.struct([pa.field("value", pa.float64())])


class Chunks:
    """A write-only file that keeps what was written until ``take`` hands it on."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._position = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        self._parts.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


def _connect(database_url: str) -> Any:
    """An ADBC connection (autocommit) to the PostgreSQL database SQLAlchemy's ``database_url`` names."""
    import adbc_driver_postgresql.dbapi

    uri = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    return adbc_driver_postgresql.dbapi.connect(uri, autocommit=True)


def _page(cursor: Any, series_id: int, after: int, limit: int, upto: int | None = None) -> pa.Table:
    # value is never NULL in the answer (a NULL column could be typed as anything): NaN rows say so.
    due = "" if upto is None else f" AND version <= {int(upto)}"  # a delayed reader (policy/delay.py)
    cursor.execute(
        "SELECT step, value IS NULL AS nan, COALESCE(value, 0.0) AS value"
        f" FROM points WHERE series_id = {int(series_id)} AND step > {int(after)}{due} ORDER BY step LIMIT {int(limit)}"
    )
    return cursor.fetch_arrow_table()


def _times(steps: pa.Array, at: np.ndarray, seconds: np.ndarray) -> pa.Array:
    """The ``time`` column of ``steps`` (ascending): each step's last time point (``at``, ascending, with its
    ``seconds``) at or before it, null before the first."""
    if not len(at):
        return pa.nulls(len(steps), pa.float64())
    index = np.searchsorted(at, steps.to_numpy(zero_copy_only=False), side="right") - 1
    return pa.array(seconds[np.maximum(index, 0)], pa.float64(), mask=index < 0)


def _point_arrays(points: TimePoints) -> tuple[np.ndarray, np.ndarray]:
    return (np.fromiter((step for step, _ in points), np.int64, len(points)),
            np.fromiter((t for _, t in points), np.float64, len(points)))


def _time_arrays(cursor: Any, ref: SeriesRef, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """``step_times.time_points`` of ``first..last`` read as columns: one a step for a slow run, and ADBC's
    row by row ``fetchall`` costs about 9 µs a row."""
    if ref.times is None:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    cursor.execute(time_points_sql(ref.times, first, last, ref.times_upto))
    points = cursor.fetch_arrow_table()
    return (pc.cast(points.column("step"), pa.int64()).to_numpy(),
            pc.cast(points.column("value"), pa.float64()).to_numpy())


def page_of_rows(rows: Sequence[tuple[int, float | None]] | DensePage, points: TimePoints) -> pa.Table:
    """A page of ``(step, value)`` rows or a ``DensePage`` (NULL value = NaN) as the columns ``_page``
    answers, with ``time``."""
    # pyarrow reads the tuples in C++ (a struct per row): no Python list per column, no bool per row.
    if isinstance(rows, DensePage):
        (value,) = pa.array(rows.values, type=_VALUE).flatten()
        step = pa.array(np.arange(rows.first, rows.first + len(rows.values), dtype=np.int64))
    else:
        step, value = pa.array(rows, type=_ROW).flatten()
    return pa.table({"step": step, "nan": value.is_null(), "value": value.fill_null(0.0),
                     "time": _times(step, *_point_arrays(points))})


def adbc_pages(database_url: str, refs: Sequence[SeriesRef], page_rows: int) -> Iterator[tuple[SeriesRef, pa.Table]]:
    """Each series' pages of ``page_rows`` points, read by ADBC from PostgreSQL, in step order."""
    with closing(_connect(database_url)) as connection, closing(connection.cursor()) as cursor:
        cursor.execute(f"SET {INDEX_ORDER_PG}")  # autocommit: for this connection, closed after the export
        for ref in refs:
            after = -1
            while True:
                page = _page(cursor, ref.id, after, page_rows, ref.upto)
                if page.num_rows == 0:
                    break
                step = pc.cast(page.column("step"), pa.int64()).combine_chunks()
                first, last = step[0].as_py(), step[-1].as_py()
                yield ref, page.append_column("time", _times(step, *_time_arrays(cursor, ref, first, last)))
                if page.num_rows < page_rows:
                    break
                after = last


def _batch(segment: int, key: str, page: pa.Table) -> pa.RecordBatch:
    n = page.num_rows
    nan = pc.cast(page.column("nan"), pa.bool_())
    value = pc.if_else(nan, _NAN, pc.cast(page.column("value"), pa.float64()))
    return pa.RecordBatch.from_arrays(
        [
            pc.fill_null(pa.nulls(n, pa.int32()), segment),
            pc.fill_null(pa.nulls(n, pa.string()), key),
            pc.cast(page.column("step"), pa.int64()).combine_chunks(),
            value.combine_chunks(),
            pc.cast(page.column("time"), pa.float64()).combine_chunks(),
        ],
        schema=SCHEMA,
    )


def parquet_chunks(pages: Iterable[tuple[SeriesRef, pa.Table]]) -> Iterator[bytes]:
    """The file, in pieces: each page (``adbc_pages``, ``page_of_rows``) becomes one row group."""
    sink = Chunks()
    # Dictionaries only where values repeat (a dictionary of a million distinct floats costs
    # more than the rest of the export); steps delta-encoded; min/max statistics on steps.
    writer = pq.ParquetWriter(
        sink, SCHEMA, compression="snappy", use_dictionary=["segment", "key"], write_statistics=["step"],
        column_encoding={"step": "DELTA_BINARY_PACKED"},
    )
    try:
        for ref, page in pages:
            writer.write_batch(_batch(ref.segment, ref.key, page), row_group_size=page.num_rows)
            if chunk := sink.take():
                yield chunk
    finally:
        writer.close()
    yield sink.take()
