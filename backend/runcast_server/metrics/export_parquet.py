"""The Parquet export: columns ``segment`` (int32), ``key`` (string), ``step`` (int64),
``value`` (float64; NaN and +-Inf as themselves), ``time`` (float64, epoch seconds; null for a
step without a time), one row group per page (``arrow_pages``: read from PostgreSQL by ADBC, or
made from SQLite's rows), streamed.

Each row group's bytes go to the client as soon as it is written, so the server holds one
page, never the file; the footer (the row groups' offsets) comes last, as Parquet requires.
Readers (pyarrow, pandas, polars, DuckDB, Spark) read it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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


def _batch(segment: int, key: str, page: pa.Table) -> pa.RecordBatch:
    n = page.num_rows
    value = pc.fill_null(pc.cast(page.column("value"), pa.float64()), _NAN)
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
