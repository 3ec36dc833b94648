"""``bulk.append_rows`` on SQLite writes its rows in multi-row INSERTs (the rest by ``executemany``): the
table holds exactly what one INSERT a row writes, at every count around a statement's size, within
SQLite's limit on parameters, and a conflict anywhere raises with nothing of the call kept."""

from __future__ import annotations

import math
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
from runcast_server.core.db import make_engine
from runcast_server.ingest import bulk
from sqlalchemy import Engine, text

NAMES = ("series_id", "step", "value", "version")
HOSTILE = [math.inf, -math.inf, None, -0.0, 5e-324, 1.7976931348623157e308, 1e-7, 0.1 + 0.2, -2.5e-300]


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'bulk.db'}")
    with engine.begin() as conn:
        for table in ("points", "reference"):
            conn.execute(text(f"CREATE TABLE {table} (series_id INTEGER NOT NULL, step INTEGER NOT NULL, value FLOAT,"
                              " version INTEGER NOT NULL, PRIMARY KEY (series_id, step)) WITHOUT ROWID"))
    return engine


def rows(count: int, series: int = 1) -> list[tuple[Any, ...]]:
    return [(series, step * 3 + 2**40, HOSTILE[step % len(HOSTILE)] if step % 5 == 0 else step / 7, step % 4)
            for step in range(count)]


def table(engine: Engine, name: str) -> list[tuple[Any, ...]]:
    """The rows, each value as its bits (``-0.0 == 0.0`` would hide a difference)."""
    with engine.connect() as conn:
        return [(sid, step, kind, None if v is None else struct.pack("<d", v).hex(), version) for sid, step, kind, v, version
                in conn.execute(text(f"SELECT series_id, step, typeof(value), value, version FROM {name} ORDER BY series_id, step"))]


@pytest.mark.parametrize("per", [bulk.SQLITE_ROWS_PER_INSERT, 7])
def test_every_count_writes_what_one_insert_a_row_writes(engine: Engine, monkeypatch: pytest.MonkeyPatch, per: int) -> None:
    monkeypatch.setattr(bulk, "SQLITE_ROWS_PER_INSERT", per)
    counts = [0, 1, per - 1, per, per + 1, 2 * per + 3, 3 * per]
    with engine.begin() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, sqlite3.Connection)
        for series, count in enumerate(counts):
            batch = rows(count, series)
            bulk.append_rows(conn, "points", NAMES, ("int8", "int8", "float8", "int8"), batch)
            raw.executemany("INSERT INTO reference VALUES (?, ?, ?, ?)", batch)
    stored = table(engine, "points")
    assert stored == table(engine, "reference") and len(stored) == sum(counts)
    assert {r[2] for r in stored} == {"real", "null"}  # NaN is NULL; every other value a REAL, +-Inf and -0.0 included


def test_a_statement_stays_within_sqlites_limit_on_parameters(engine: Engine) -> None:
    with engine.begin() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, sqlite3.Connection)
        limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 10)  # two rows of four a statement
        try:
            bulk.append_rows(conn, "points", NAMES, ("int8", "int8", "float8", "int8"), rows(25))
        finally:
            raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    assert len(table(engine, "points")) == 25


@pytest.mark.parametrize("at", [0, 1999, 2000, 4100])
def test_a_conflict_anywhere_raises_and_keeps_nothing_of_the_call(engine: Engine, at: int) -> None:
    batch = rows(4500)
    batch[at] = (1, batch[at - 1 if at else 1][1], 0.5, 0)  # a step twice
    with pytest.raises(sqlite3.IntegrityError), engine.begin() as conn:
        bulk.append_rows(conn, "points", NAMES, ("int8", "int8", "float8", "int8"), batch)
    assert table(engine, "points") == []
