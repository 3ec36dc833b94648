"""GET /runs/{id}/export?format=parquet: exact values (NaN, +-Inf, 1e-300, 0.1+0.2), the
same rows as JSONL, one row group per page, streamed, and readable as is by pyarrow,
pandas and polars (each when installed)."""

from __future__ import annotations

import io
import json
import math
import sys
from typing import Any

import pyarrow.parquet as pq
import pytest
from runcast_server.metrics.export import SeriesRef, export_chunks
from runcast_server.record.models import Series

from api.test_events_export import export_run

API = "/api/v1/runs"


def _jsonl_rows(client, run: str) -> list[tuple[int, str, int, float]]:
    out = []
    for line in client.get(f"{API}/{run}/export").text.splitlines():
        row = json.loads(line)
        value = row["value"]
        out.append((row["segment"], row["key"], row["step"], float(value) if isinstance(value, str) else value))
    return out


def _same(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(
        x[:3] == y[:3] and (x[3] == y[3] or (math.isnan(x[3]) and math.isnan(y[3]))) for x, y in zip(a, b, strict=True)
    )


def test_parquet_export_equals_jsonl_exactly(client, seed):
    run = export_run(seed)
    res = client.get(f"{API}/{run.run}/export", params={"format": "parquet"})
    assert res.status_code == 200
    assert res.headers["content-type"] == "application/vnd.apache.parquet"
    assert res.headers["content-disposition"] == f'attachment; filename="runcast-{run.run}.parquet"'
    table = pq.read_table(io.BytesIO(res.content))
    assert [(f.name, str(f.type)) for f in table.schema] == [
        ("segment", "int32"), ("key", "string"), ("step", "int64"), ("value", "double"), ("time", "double")]
    assert table.column("time").to_pylist() == [1001.0, 1002.0, 1000.0, 1001.0, 1002.0, 2001.25, 2002.25]
    rows = list(zip(*(table.column(c).to_pylist() for c in ("segment", "key", "step", "value")), strict=True))
    assert _same(rows, _jsonl_rows(client, run.run))
    assert rows[4] == (0, "loss", 2, 0.1 + 0.2) and rows[5][3] == 1e-300
    assert rows[0][3] == math.inf and rows[1][3] == -math.inf and math.isnan(rows[3][3])
    only = pq.read_table(io.BytesIO(client.get(f"{API}/{run.run}/export",
                                               params={"format": "parquet", "key": "a,b"}).content))
    assert only.column("key").to_pylist() == ["a,b", "a,b"]


def test_parquet_is_streamed_one_row_group_per_page(db: Any, client, seed):
    run = seed.run(name="big").start()
    run.log({"x": [(s, s / 7) for s in range(0, 3000, 3)], "y": [(s, -s) for s in range(50)]})
    with db.scope() as session:
        ids = dict(session.query(Series.key, Series.id).filter(Series.run_id == run.run))
        refs = [SeriesRef(id=ids[k], segment=0, key=k, times=ids["_timestamp"]) for k in ("x", "y")]
    chunks = list(export_chunks(db, refs, "parquet", page_rows=100))
    # x: 1000 points in 10 pages, y: 50 in 1; a chunk per row group, then the footer
    assert len(chunks) == 12 and all(chunks)
    data = b"".join(chunks)
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    assert meta.num_row_groups == 11 and meta.num_rows == 1050
    whole = client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content
    assert pq.read_table(io.BytesIO(whole)).equals(pq.read_table(io.BytesIO(data)))


def test_an_empty_run_exports_an_empty_parquet_file(client, seed):
    run = seed.run(name="empty").start()
    table = pq.read_table(io.BytesIO(client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content))
    assert table.num_rows == 0 and table.column_names == ["segment", "key", "step", "value", "time"]


@pytest.mark.parametrize("reader", ["pandas", "polars"])
def test_pandas_and_polars_read_it_as_it_is(client, seed, reader):
    library = pytest.importorskip(reader)
    run = export_run(seed)
    data = client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content
    frame = library.read_parquet(io.BytesIO(data))
    if reader == "pandas":
        rows = list(frame.itertuples(index=False, name=None))
        dtypes = {name: str(t) for name, t in frame.dtypes.items()}
        assert (dtypes["segment"], dtypes["step"], dtypes["value"]) == ("int32", "int64", "float64")
    else:
        rows = frame.rows()
        assert [str(t) for t in frame.dtypes] == ["Int32", "String", "Int64", "Float64", "Float64"]
    assert _same([tuple(r) for r in rows], _jsonl_rows(client, run.run))


def test_a_series_that_starts_with_many_nans_keeps_its_types(client, seed):
    """More leading NaNs (stored NULL) than the driver's first batch: still float64 NaN, then the values."""
    run = seed.run(name="nans").start()
    run.log({"x": [(s, math.nan) for s in range(17_000)] + [(17_000 + s, s + 0.5) for s in range(3)]})
    table = pq.read_table(io.BytesIO(client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content))
    values = table.column("value").to_pylist()
    assert table.column("step").to_pylist() == list(range(17_003))
    assert all(math.isnan(v) for v in values[:17_000]) and values[17_000:] == [0.5, 1.5, 2.5]


def test_on_sqlite_the_export_uses_the_servers_own_sqlite_library(client, seed, db: Any, monkeypatch):
    """No second copy of SQLite in the process (ADBC's driver bundles one): its closing the
    database file would drop the locks the server's own connections hold on it, and the
    server's writes then fail ("disk I/O error"). Exporting works with that driver unloadable,
    and a write after it does too."""
    if db.engine.dialect.name != "sqlite":
        pytest.skip("the SQLite database only")
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # importing it fails
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", None)
    run = export_run(seed)
    res = client.get(f"{API}/{run.run}/export", params={"format": "parquet"})
    assert res.status_code == 200
    rows = pq.read_table(io.BytesIO(res.content)).num_rows
    assert rows == len(_jsonl_rows(client, run.run)) > 0
    run.send([run.event("metrics", step=99, values={"loss": 1.0})])
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
