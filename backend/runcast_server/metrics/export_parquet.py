"""The Parquet export: columns ``segment`` (int32), ``key`` (string), ``step`` (int64),
``value`` (float64; NaN and +-Inf as themselves), one row group per page, streamed.

Pages are read with ADBC (Arrow Database Connectivity: SQLite's and PostgreSQL's
drivers, the latter through binary COPY), straight into Arrow columns: no Python object
per point, which is what lets a 10^6-point series leave at 10^6 points/s
(docs/performance.md). Each page is one keyset query on an autocommit connection, so
no transaction stays open across the download. Each row group's bytes go to the client
as soon as it is written, so the server holds one page, never the file; the footer
(the row groups' offsets) comes last, as Parquet requires. Readers (pyarrow, pandas,
polars, DuckDB, Spark) read it as it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from runcast_server.metrics.export import SeriesRef

SCHEMA: Final = pa.schema(
    [
        pa.field("segment", pa.int32(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ]
)
_NAN: Final = pa.scalar(float("nan"), pa.float64())
SQLITE_BATCH_ROWS: Final = 16_384


class _Chunks:
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
    """An ADBC connection (autocommit) to the database SQLAlchemy's ``database_url`` names."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        import adbc_driver_sqlite.dbapi

        return adbc_driver_sqlite.dbapi.connect(url.database or ":memory:", autocommit=True)
    import adbc_driver_postgresql.dbapi

    uri = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return adbc_driver_postgresql.dbapi.connect(uri, autocommit=True)


def _page(cursor: Any, series_id: int, after: int, limit: int, upto: int | None = None) -> pa.Table:
    # value is never NULL in the answer (a NULL column could be typed as anything): NaN rows say so.
    due = "" if upto is None else f" AND version <= {int(upto)}"  # a delayed reader (policy/delay.py)
    cursor.execute(
        "SELECT step, value IS NULL AS nan, COALESCE(value, 0.0) AS value"
        f" FROM points WHERE series_id = {int(series_id)} AND step > {int(after)}{due} ORDER BY step LIMIT {int(limit)}"
    )
    return cursor.fetch_arrow_table()


def _batch(segment: int, key: str, page: pa.Table) -> pa.RecordBatch:
    n = page.num_rows
    nan = pc.cast(page.column("nan"), pa.bool_())  # SQLite answers 0/1, PostgreSQL booleans
    value = pc.if_else(nan, _NAN, pc.cast(page.column("value"), pa.float64()))
    return pa.RecordBatch.from_arrays(
        [
            pc.fill_null(pa.nulls(n, pa.int32()), segment),
            pc.fill_null(pa.nulls(n, pa.string()), key),
            pc.cast(page.column("step"), pa.int64()).combine_chunks(),
            value.combine_chunks(),
        ],
        schema=SCHEMA,
    )


def parquet_chunks(database_url: str, refs: Sequence[SeriesRef], page_rows: int) -> Iterator[bytes]:
    """The file, in pieces: each page of ``page_rows`` points of a series becomes one row group."""
    sink = _Chunks()
    # Dictionaries only where values repeat (a dictionary of a million distinct floats costs
    # more than the rest of the export); steps delta-encoded; min/max statistics on steps.
    writer = pq.ParquetWriter(
        sink, SCHEMA, compression="snappy", use_dictionary=["segment", "key"], write_statistics=["step"],
        column_encoding={"step": "DELTA_BINARY_PACKED"},
    )
    try:
        with closing(_connect(database_url)) as connection, closing(connection.cursor()) as cursor:
            if database_url.startswith("sqlite"):  # fewer, larger batches inside the driver
                cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(SQLITE_BATCH_ROWS)})
            for ref in refs:
                after = -1
                while True:
                    page = _page(cursor, ref.id, after, page_rows, ref.upto)
                    if page.num_rows == 0:
                        break
                    writer.write_batch(_batch(ref.segment, ref.key, page), row_group_size=page.num_rows)
                    if chunk := sink.take():
                        yield chunk
                    if page.num_rows < page_rows:
                        break
                    after = page.column("step")[-1].as_py()
    finally:
        writer.close()
    yield sink.take()
