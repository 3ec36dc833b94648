"""The Parquet export on SQLite reads a page whose steps are all stored as values alone
(``series_ref.DensePage``); on PostgreSQL (these tests again in ``test_manage_postgres.py``) it reads
such pages two at a time, each known before it is read. Its bytes are those of the row-by-row read it
replaced, for dense and gappy series, a series dense up to a gap, NaN and +-Inf, a resume (a series
starting at a later step), gaps filled later, every page size, and a delayed reader."""

from __future__ import annotations

import io
import math
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq
import pytest
from runcast_server.metrics import arrow_pages, export_parquet
from runcast_server.metrics.export import PARQUET_PAGE_ROWS, export_chunks, series_pages, series_to_export
from runcast_server.metrics.series_ref import DensePage
from runcast_server.record.models import Run
from sqlalchemy import text

from api.test_export_bytes import hostile_values, log_hostile_run

API = "/api/v1/runs"


def rows_path(db: Any, refs: list[Any], page_rows: int) -> bytes:
    """The Parquet bytes as the export wrote them before: every page read as ``(step, value)`` rows."""
    pages = ((ref, arrow_pages.page_of_rows(rows, points))
             for ref in refs for rows, points in series_pages(db, ref, page_rows))
    return b"".join(export_parquet.parquet_chunks(pages))


def log_dense_run(seed: Any) -> Any:
    """``dense``: every step 0..999 with NaN and +Inf among its values; ``gappy``: steps 500..599
    sent last; then a resume at step 650 (segment 1, its series starting there)."""
    run = seed.run(name="dense").start(ts=1000.0)
    values = [v for v in hostile_values(300) if v != -math.inf and not abs(v) >= 1e300] + [math.nan, math.inf]

    def send(steps: range, t0: float, keys: tuple[str, ...]) -> None:
        run.send([run.event("metrics", step=s, values={k: values[(s * 5 + i) % len(values)] for i, k in enumerate(keys)},
                            ts=t0 + s / 1000) for s in steps])

    send(range(0, 500), 1000.0, ("dense", "gappy"))
    send(range(500, 700), 1000.0, ("dense",))
    send(range(600, 700), 1000.0, ("gappy",))
    send(range(500, 600), 1000.0, ("gappy",))  # the gap filled last
    run.resume(650, ts=5000.0)
    send(range(650, 1000), 5000.0, ("dense", "gappy"))
    return run


@pytest.mark.parametrize("logger", [log_dense_run, log_hostile_run])
def test_dense_pages_write_the_row_by_row_bytes(client, seed, db, logger):
    run = logger(seed)
    with db.scope() as session:
        refs = series_to_export(session, session.get(Run, run.run), None)
    whole = client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content
    assert whole == rows_path(db, refs, PARQUET_PAGE_ROWS)
    for page_rows in (1, 7, 100, 350, 4096):  # pages cut inside gaps, at a segment's first step, at the end
        assert b"".join(export_chunks(db, refs, "parquet", page_rows=page_rows)) == rows_path(db, refs, page_rows), page_rows
    table = pq.read_table(io.BytesIO(whole))
    nan = sum(1 for v in table.column("value").to_pylist() if math.isnan(v))
    assert nan == db_nulls(db, refs) and table.num_rows == sum(1 for ref in refs for _ in point_steps(db, ref.id))


def test_a_series_dense_up_to_a_gap_gets_the_row_by_row_bytes(seed, db):
    """Pages of consecutive steps, then a gap inside a page: the pages from there on are those of ``LIMIT``."""
    run = seed.run(name="gap").start(ts=1000.0)
    steps = [*range(3, 300), *range(400, 1000), 5000]
    run.send([run.event("metrics_columns", steps=steps[i:i + 250], times=[1000.0 + s / 100 for s in steps[i:i + 250]],
                        values={"loss": [math.nan if s % 97 == 0 else 1.0 / (s + 1) for s in steps[i:i + 250]]})
              for i in range(0, len(steps), 250)])
    with db.scope() as session:
        refs = series_to_export(session, session.get(Run, run.run), None)
    for page_rows in (1, 7, 100, 297, 298, 350, 4096):  # the gap inside the 2nd page, at a page's edge, in the 1st
        assert b"".join(export_chunks(db, refs, "parquet", page_rows=page_rows)) == rows_path(db, refs, page_rows), page_rows
    table = pq.read_table(io.BytesIO(b"".join(export_chunks(db, refs, "parquet", page_rows=100))))
    assert table.column("step").to_pylist() == steps


def test_dense_series_are_read_as_dense_pages(seed, db):
    run = log_dense_run(seed)
    with db.scope() as session:
        refs = {r.key: r for r in series_to_export(session, session.get(Run, run.run), None) if r.segment == 0}
    kinds = [type(page).__name__ for page, _ in series_pages(db, refs["dense"], 100, dense=True)]
    assert kinds == ["DensePage"] * 7  # steps 0..699
    pages = [page for page, _ in series_pages(db, refs["gappy"], 100, dense=True)]
    assert all(isinstance(p, DensePage) for p in pages)  # 0..699 complete once the gap is filled
    assert [p.first for p in pages if isinstance(p, DensePage)] == list(range(0, 700, 100))


def test_a_delayed_reader_gets_the_row_by_row_bytes(seed, db):
    run = log_dense_run(seed)
    with db.scope() as session:
        upto = session.execute(text("SELECT min(version) FROM points")).scalar_one()
        refs = [replace(r, upto=upto, times_upto=upto if r.times is not None else None)
                for r in series_to_export(session, session.get(Run, run.run), None)]
    assert b"".join(export_chunks(db, refs, "parquet", page_rows=64)) == rows_path(db, refs, 64)


def point_steps(db: Any, series_id: int) -> list[int]:
    with db.scope() as session:
        return list(session.execute(text(f"SELECT step FROM points WHERE series_id = {int(series_id)}")).scalars())


def db_nulls(db: Any, refs: list[Any]) -> int:
    ids = ",".join(str(int(r.id)) for r in refs)
    with db.scope() as session:
        return int(session.execute(text(f"SELECT count(*) FROM points WHERE series_id IN ({ids}) AND value IS NULL")).scalar_one())
