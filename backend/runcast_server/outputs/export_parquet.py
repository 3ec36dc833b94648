"""The Parquet export of samples and evaluations: one column per field of ``export.COLUMNS``.

Text as strings; ``scores`` and ``metrics`` as maps of name to double (NaN and +-Inf as
themselves); the free JSON objects (``settings``, ``config``, ``versions``) as their JSON text;
absent values null. Pages are gathered into row groups of at most ``GROUP_ROWS`` rows or
``GROUP_BYTES`` of Arrow data, each sent as soon as it is written (``metrics.export_parquet.Chunks``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq
from runcast.wire.events import NONFINITE

from runcast_server.metrics.export_parquet import Chunks
from runcast_server.outputs.export import OutputKind

GROUP_ROWS: Final = 10_000
GROUP_BYTES: Final = 64 << 20
_NUMBERS: Final = pa.map_(pa.string(), pa.float64())
SCHEMAS: Final[dict[str, pa.Schema]] = {
    "samples": pa.schema([
        pa.field("segment", pa.int32(), nullable=False), pa.field("step", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False), pa.field("prompt_id", pa.string(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False), pa.field("output", pa.string(), nullable=False),
        pa.field("reference", pa.string()), pa.field("scores", _NUMBERS), pa.field("settings", pa.string()),
    ]),
    "evals": pa.schema([
        pa.field("segment", pa.int32(), nullable=False), pa.field("step", pa.int64(), nullable=False),
        pa.field("checkpoint", pa.int64()), pa.field("suite", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False), pa.field("metrics", _NUMBERS, nullable=False),
        pa.field("n", pa.int64()), pa.field("config", pa.string()), pa.field("versions", pa.string()),
    ]),
}


def _numbers(values: dict[str, Any] | None) -> list[tuple[str, float]] | None:
    """A stored map of wire values as map entries (``"NaN"`` becomes the double NaN)."""
    if values is None:
        return None
    return [(k, NONFINITE[v] if isinstance(v, str) else float(v)) for k, v in values.items()]


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _batch(schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.RecordBatch:
    columns = []
    for f in schema:
        values = [row[f.name] for row in rows]
        if f.type == _NUMBERS:
            values = [_numbers(v) for v in values]
        elif f.type == pa.string() and f.name in ("settings", "config", "versions"):
            values = [_json(v) for v in values]
        columns.append(pa.array(values, f.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def parquet_chunks(what: OutputKind, pages: Iterable[list[dict[str, Any]]]) -> Iterator[bytes]:
    """The file, in pieces: pages gathered into row groups, each sent once written; the footer last."""
    schema = SCHEMAS[what]
    sink = Chunks()
    writer = pq.ParquetWriter(sink, schema, compression="snappy")
    pending: list[pa.RecordBatch] = []

    def flush() -> bytes:
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema=schema), row_group_size=GROUP_ROWS)
            pending.clear()
        return sink.take()

    try:
        for page in pages:
            pending.append(_batch(schema, page))
            full = sum(b.num_rows for b in pending) >= GROUP_ROWS or sum(b.nbytes for b in pending) >= GROUP_BYTES
            if full and (chunk := flush()):
                yield chunk
        if chunk := flush():
            yield chunk
    finally:
        writer.close()
    yield sink.take()
